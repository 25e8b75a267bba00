#!/usr/bin/env python3
"""Is docs/RELIABILITY.md current? Its figures hold for the sources they were
measured on; reliability.py records their hash in the report, and this
checks it against the sources as they are now.

  report_current.py [--root DIR] [--report MD] [--self-test]

The sources are the library's save, load and publish paths and what the
report runs: COVERED below, but EXCLUDED (training utilities, which no
trial runs). The hash is SHA-256 over each file's repository-relative path
and bytes, in sorted order, read from the files themselves (not from git),
so it is the same in any checkout. Exits 1, naming what to run, when the
report records another hash or none.
--self-test first shows that the check can fail: on a copy of the covered
sources with a report of their hash, it must pass; with one covered file
changed it must fail; files outside the sources must not matter.
"""

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile

COVERED = ["lib/src", "lib/include/h5dcp", "tests/reliability", "tests/hostile"]
EXCLUDED = ["lib/src/training"]
# Python's byte-code caches appear beside the scripts when they run.
SKIPPED_DIRS = {"__pycache__"}
REGENERATE = "scripts/reliability.sh (about 35 minutes; it rewrites docs/RELIABILITY.md)"
LINE = re.compile(r"^Sources: sha256 ([0-9a-f]{64}) of (.*) \((\d+) files\)\.$", re.M)


def covered_files(root):
    """Repository-relative paths ("/"-separated) of the covered files, sorted."""
    found = []
    for top in COVERED:
        for dirpath, dirs, names in os.walk(os.path.join(root, top)):
            rel = os.path.relpath(dirpath, root).replace(os.sep, "/")
            dirs[:] = [d for d in dirs if d not in SKIPPED_DIRS and rel + "/" + d not in EXCLUDED]
            found += [rel + "/" + n for n in names if not n.endswith(".pyc")]
    return sorted(found)


def sources_hash(root):
    """(sha256 hex, number of files) of the covered sources under root."""
    h = hashlib.sha256()
    files = covered_files(root)
    for rel in files:
        with open(os.path.join(root, rel), "rb") as f:
            data = f.read()
        # Path and length first: no two different trees give the same stream.
        h.update(b"%s\0%d\0" % (rel.encode(), len(data)))
        h.update(data)
    return h.hexdigest(), len(files)


def covered_text():
    return ", ".join(top + "".join(" (but %s)" % e for e in EXCLUDED if e.startswith(top + "/")) for top in COVERED)


def sources_line(digest, count):
    """The report's line recording the sources it was measured on."""
    return "Sources: sha256 %s of %s (%d files)." % (digest, covered_text(), count)


def check(root, report):
    """None when report records the hash of root's sources; otherwise why not."""
    digest, count = sources_hash(root)
    try:
        with open(report) as f:
            text = f.read()
    except OSError as e:
        return "cannot read %s (%s)" % (report, e.strerror)
    m = LINE.search(text)
    if not m:
        return "%s records no sources hash (no line 'Sources: sha256 ...'): it predates this check" % report
    if m.group(2) != covered_text():
        return "%s covers %s, the check covers %s" % (report, m.group(2), covered_text())
    if m.group(1) != digest:
        return ("%s is stale: it was measured on sources with sha256 %s (%s files), but %s now hash to %s "
                "(%d files)" % (report, m.group(1), m.group(3), covered_text(), digest, count))
    return None


def self_test(root):
    """Fails (exception) unless the check passes on a current copy and fails on a changed one."""
    me = os.path.abspath(__file__)
    with tempfile.TemporaryDirectory() as tmp:
        for top in COVERED:
            if os.path.isdir(os.path.join(root, top)):
                shutil.copytree(os.path.join(root, top), os.path.join(tmp, top),
                                ignore=shutil.ignore_patterns(*SKIPPED_DIRS, "*.pyc"))
        report = os.path.join(tmp, "docs", "RELIABILITY.md")
        os.makedirs(os.path.dirname(report))
        with open(report, "w") as f:
            f.write("# Reliability\n\n%s\n" % sources_line(*sources_hash(tmp)))

        def run():
            return subprocess.run([sys.executable, me, "--root", tmp, "--report", report],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        first = run()
        assert first.returncode == 0, "a current report failed the check:\n" + first.stdout
        # Outside the sources: a training utility, a byte-code cache.
        for extra in ("lib/src/training/extra.cpp", "tests/reliability/__pycache__/x.pyc"):
            os.makedirs(os.path.dirname(os.path.join(tmp, extra)), exist_ok=True)
            with open(os.path.join(tmp, extra), "w") as f:
                f.write("// not covered\n")
        outside = run()
        assert outside.returncode == 0, "a change outside the sources failed the check:\n" + outside.stdout
        # One byte more in one covered file.
        changed = covered_files(tmp)[0]
        with open(os.path.join(tmp, changed), "a") as f:
            f.write("\n")
        stale = run()
        assert stale.returncode == 1 and "is stale" in stale.stdout and "scripts/reliability.sh" in stale.stdout, (
            "a change to %s passed the check (exit %d):\n%s" % (changed, stale.returncode, stale.stdout))
    print("self-test: the check passes on a current report, ignores lib/src/training and byte-code caches, and fails "
          "when %s changes" % changed)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default=os.path.normpath(os.path.join(here, "..", "..")), help="the source tree")
    ap.add_argument("--report", help="the report (default: ROOT/docs/RELIABILITY.md)")
    ap.add_argument("--self-test", action="store_true", help="first show that the check fails on a changed copy")
    args = ap.parse_args()
    if args.self_test:
        self_test(args.root)
    problem = check(args.root, args.report or os.path.join(args.root, "docs", "RELIABILITY.md"))
    if problem:
        print("FAIL: %s.\nRegenerate it on this code: %s." % (problem, REGENERATE))
        return 1
    print("ok: the reliability report was measured on these sources (%s)" % covered_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
