"""Tests of the h5dcp command-line tool: exit codes and output of every
subcommand. One case per CTest test; run with the project's virtual
environment's python (h5py is needed to damage files for `verify`).

usage: cli_test.py H5DCP CASE ARGS...
  help [SUBCOMMAND]                 --help: exit 0, usage, options, exit codes
  usage                             bad command lines: exit 2
  inspect_json FILE GOLDEN          --json equals the golden file (file, created
                                    and library_version normalized)
  inspect_text FILE                 the human-readable tree
  diff_equal A B                    exit 0, "equal:"
  diff_unequal A B                  exit 1, every expected difference line
  diff_tolerance A B                exit 1 exactly, 0 with --atol 0.01, 1 with --atol 1e-4
  verify_good FILE                  exit 0, "OK"
  format_1_1 FILE WORKDIR           a copy rewritten as format 1.1 wrote it (no
                                    packs, variable-length string attributes):
                                    verify OK, diff equal, inspect says 1.1
  verify_damaged KIND FILE WORKDIR  damages a copy (truncated, tiling, bool, bytes,
                                    list, utf8); exit 1 naming the check and the key
  convert_errors FIXTURES WORKDIR   missing, legacy, unknown SRC: exit 3 with a
                                    clear message; existing DST: exit 2
  split FILE RANKS                  a checkpoint converted by RANKS ranks: written by
                                    them, large enough tensors split along dim 0
  progress FIXTURES WORKDIR         a progress line on a terminal (through script(1)),
                                    nothing on stderr otherwise, none with -q
  bounded_memory WORKDIR            converting 8 tensors of 16 MiB each way holds
                                    less than 3 of them in memory beyond what
                                    `inspect` takes (tensor by tensor)
"""
import json
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from child_output import hdf5_diag  # noqa: E402

FAILURES = []


def check(condition, message):
    if not condition:
        FAILURES.append(message)


def fresh(workdir):
    """An empty work directory of this case's own."""
    shutil.rmtree(workdir, ignore_errors=True)
    os.makedirs(workdir)


def no_hdf5_diag(command, *outputs):
    """h5dcp must never let HDF5 print its error stack, even when it fails:
    CTest's log (scripts/test.sh's check) does not see what is captured here."""
    for output in outputs:
        found = hdf5_diag(output, " ".join(str(c) for c in command))
        check(found is None, found)


def run(h5dcp, *args):
    p = subprocess.run([h5dcp, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    no_hdf5_diag([h5dcp, *args], p.stdout, p.stderr)
    return p.returncode, p.stdout, p.stderr


def expect(h5dcp, code, *args):
    rc, out, err = run(h5dcp, *args)
    check(rc == code, "h5dcp %s: exit %d, wanted %d\nstdout:\n%s\nstderr:\n%s" % (" ".join(args), rc, code, out, err))
    return out, err


def case_help(h5dcp, sub=None):
    args = ([sub] if sub else []) + ["--help"]
    out, _ = expect(h5dcp, 0, *args)
    check(out.startswith("Usage: h5dcp") or "\nUsage: h5dcp" in out, "no usage line:\n" + out)
    check("Exit codes:" in out and "  3  " in out, "the exit codes are not documented:\n" + out)
    wanted = {None: ["inspect", "verify", "diff", "convert", "--version"], "inspect": ["FILE", "--json"],
              "verify": ["FILE"], "diff": ["--rtol", "--atol"], "convert": ["SRC", "DST", "--to", "--force"]}[sub]
    for w in wanted:
        check(w in out, "%s --help does not mention %s" % (sub or "h5dcp", w))


def case_usage(h5dcp):
    expect(h5dcp, 2)  # no subcommand
    expect(h5dcp, 2, "frobnicate")
    expect(h5dcp, 2, "inspect")  # FILE missing
    expect(h5dcp, 2, "diff", "a.h5")  # B missing
    expect(h5dcp, 2, "diff", "a.h5", "b.h5", "--atol", "-1")
    expect(h5dcp, 2, "convert", "a.pt", "b.h5", "--to", "numpy")
    out, _ = expect(h5dcp, 0, "--version")
    check(re.search(r"h5dcp \d+\.\d+\.\d+", out), "--version: " + out)


def normalized(doc):
    doc = dict(doc)
    for key in ("file", "created", "library_version"):
        check(isinstance(doc.get(key), str) and doc[key], "inspect --json has no %s" % key)
        doc[key] = "<%s>" % key
    return doc


def case_inspect_json(h5dcp, path, golden):
    out, _ = expect(h5dcp, 0, "inspect", "--json", path)
    got = normalized(json.loads(out))
    with open(golden) as f:
        want = json.load(f)
    if got != want:
        FAILURES.append("inspect --json differs from %s; got:\n%s" % (golden, json.dumps(got, indent=2, sort_keys=True)))


def case_inspect_text(h5dcp, path):
    out, _ = expect(h5dcp, 0, "inspect", path)
    lines = out.splitlines()
    check(re.match(r"^.*known\.h5: h5dcp checkpoint, format 1\.2, written by h5dcp \d+\.\d+\.\d+ on 2 ranks at "
                   r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$", lines[0]), "header: " + lines[0])
    check(lines[1] == "6 tensors (150 B), 11 values, 6 containers", "totals: " + lines[1])
    for pattern in [r"^model/ +dict$", r"^  weight +float32 +\[6, 4\] +96 B +2 shards along dim 0$",
                    r"^  grid +float16 +\[4, 4\] +32 B +4 blocks$", r"^  bias +bfloat16 +\[4\] +8 B +whole$",
                    r"^step +int64 +\[\] +8 B +scalar$", r"^ids +int32 +\[0, 3\] +0 B +whole$",
                    r'^name +str +"adam"$', r"^flag +bool +True$", r"^nothing +none +None$",
                    r"^raw +bytes +bytes\[3\] 0001ff$", r"^blob +pickle +pickle\[4\]$", r"^lr +float +0\.5$",
                    r'^"a/b%c" +int +1$', r"^  param_groups/ +list$", r"^    0/ +dict$", r"^        1 +float +0\.999$",
                    r"^  state/ +dict +\(empty\)$"]:
        check(any(re.match(pattern, l) for l in lines), "no line matches %r in:\n%s" % (pattern, out))


def case_diff_equal(h5dcp, a, b):
    out, _ = expect(h5dcp, 0, "diff", a, b)
    check(re.search(r"^equal: \d+ keys, 6 tensors compared \(atol 0\.0, rtol 0\.0\)$", out, re.M), out)
    check(not re.search(r"^[-+~] ", out, re.M), "differences reported for equal files:\n" + out)


def case_diff_unequal(h5dcp, a, b):
    out, _ = expect(h5dcp, 1, "diff", a, b)
    lines = out.splitlines()
    for want in ["~ epoch: 7 in A, 8 in B",
                 "+ extra: only in B (tensor float32 [2])",
                 "- flag: only in A (bool True)",
                 "~ model/bias: dtype bfloat16 in A, float32 in B",
                 "~ model/mask: shape [2, 3] in A, [3, 2] in B",
                 '~ name: "adam" in A, "sgd" in B',
                 "~ optim/param_groups/0/betas/1: 0.999 in A, 0.99 in B"]:
        check(want in lines, "missing line %r in:\n%s" % (want, out))
    check(any(re.match(r"^~ model/weight: 1 of 24 elements differ; max abs diff 0\.25 at \[1, 2\]; max rel diff 0\.\d+$",
                       l) for l in lines), "no weight line in:\n" + out)
    check(sum(1 for l in lines if re.match(r"^[-+~] ", l)) == 8, "not exactly 8 differences:\n" + out)
    check(re.search(r"^different: 8 of \d+ keys differ", out, re.M), out)


def case_diff_tolerance(h5dcp, a, b):
    out, _ = expect(h5dcp, 1, "diff", a, b)
    # -0.0, the subnormal and 19 normal numbers moved; +-inf and NaN did not.
    check(re.search(r"^~ model/weight: 21 of 24 elements differ; max abs diff 0\.00\d+", out, re.M), out)
    expect(h5dcp, 0, "diff", a, b, "--atol", "0.01")
    expect(h5dcp, 1, "diff", a, b, "--atol", "0.0001")
    expect(h5dcp, 0, "diff", a, b, "--rtol", "1")  # |a - b| <= |b|
    expect(h5dcp, 1, "diff", a, b, "--rtol", "0.00001")


def case_verify_good(h5dcp, path):
    out, _ = expect(h5dcp, 0, "verify", path)
    check(re.search(r": OK: 6 tensors \(150 B read\), 11 values, 6 containers; checked metadata, structure, tiling, "
                    r"data, checksums, values$", out, re.M), out)


def case_format_1_1(h5dcp, path, workdir):
    import h5py
    from older_format import as_format_1_1
    fresh(workdir)
    target = os.path.join(workdir, "format-1.1.h5")
    shutil.copyfile(path, target)
    unpacked, strings = as_format_1_1(target)
    check(unpacked >= 4 and strings > 20, "only %d tensors unpacked, %d strings rewritten" % (unpacked, strings))
    with h5py.File(target, "r") as f:
        check("%packs" not in f and list(f.attrs["h5dcp.format_version"]) == [1, 1], "not a format 1.1 file")
        check(h5py.check_string_dtype(f.attrs.get_id("h5dcp.created").dtype).length is None,
              "h5dcp.created is not a variable-length string")
    case_verify_good(h5dcp, target)
    case_diff_equal(h5dcp, path, target)
    out, _ = expect(h5dcp, 0, "inspect", "--json", target)
    check(json.loads(out)["format_version"] == [1, 1], "inspect --json does not say format 1.1:\n" + out[:400])


def damage(kind, source, target):
    import h5py
    import numpy as np
    from file_bytes import data_offset
    shutil.copyfile(source, target)
    if kind == "truncated":
        os.truncate(target, os.path.getsize(target) * 6 // 10)
        return [r"\[metadata\] "]
    if kind == "tiling":
        with h5py.File(target, "r+") as f:
            d = f["model/weight"]
            sizes = np.array(d.attrs["h5dcp.chunk_sizes"])
            sizes[0][0] -= 1  # a row no chunk covers
            d.attrs.modify("h5dcp.chunk_sizes", sizes)
        # The chunk's slab now covers other bytes than were checksummed, too.
        return [r"\[tiling\] model/weight: shards of 'model/weight' cover 20 of the 24 elements .*",
                r"\[checksums\] model/weight: 1 of 2 slabs differ from their stored checksums \(first: saved "
                r"chunk 0, slab \[0:3, 0:4\]\)"]
    if kind in ("bool", "utf8", "bytes"):
        name = {"bool": "model/mask", "utf8": "name", "bytes": "model/weight"}[kind]
        offset = data_offset(target, name) + (4 * 4 + 1 if kind == "bytes" else 0)  # weight: a byte of row 1
        with open(target, "r+b") as f:
            f.seek(offset)
            f.write({"bool": b"\x07", "utf8": b"\xff\xfe", "bytes": b"\x5a"}[kind])
        if kind == "bool":  # two checks see it: the bool values and the checksum
            return [r"\[data\] model/mask: a bool tensor holds the byte 7 \(only 0 and 1 are booleans\)",
                    r"\[checksums\] model/mask: 1 of 1 slabs differ from their stored checksums \(first: saved "
                    r"chunk 0, slab \[0:2, 0:3\]\): the data is damaged"]
        if kind == "bytes":  # only the checksum can see a changed float
            return [r"\[checksums\] model/weight: 1 of 2 slabs differ from their stored checksums \(first: saved "
                    r"chunk 0, slab \[0:4, 0:4\]\): the data is damaged"]
        # A value's checksum is checked when the metadata is read, before the
        # text is decoded; a file without checksums gets the UTF-8 check.
        return [r"(\[values\] name: the string is not valid UTF-8|\[metadata\] checksum mismatch in the value 'name')"]
    if kind == "list":
        with h5py.File(target, "r+") as f:
            f.move("optim/param_groups/0", "optim/param_groups/1")
            f["optim/param_groups/1"].attrs["h5dcp.key"] = "1"
        return [r"\[structure\] optim/param_groups: the list's elements are not numbered 0\.\.0"]
    raise SystemExit("unknown damage " + kind)


def case_verify_damaged(h5dcp, kind, path, workdir):
    workdir = os.path.join(workdir, kind)
    fresh(workdir)
    target = os.path.join(workdir, "damaged-%s.h5" % kind)
    patterns = damage(kind, path, target)
    out, _ = expect(h5dcp, 1, "verify", target)
    count = len(patterns)
    check(re.search(r"^.*damaged-%s\.h5: %d problems? found \(checked metadata, structure, tiling, data, checksums, "
                    r"values\):$" % (kind, count), out, re.M), "not %d problems in:\n%s" % (count, out))
    for pattern in patterns:
        check(re.search("^  " + pattern, out, re.M), "no line matching %r in:\n%s" % (pattern, out))
    if kind == "truncated":
        check("truncated" in out, "the report does not say the file is truncated:\n" + out)


def case_convert_errors(h5dcp, fixtures, workdir):
    fresh(workdir)
    dst = os.path.join(workdir, "out.h5")
    _, err = expect(h5dcp, 3, "convert", os.path.join(fixtures, "missing.pt"), dst)
    check("missing.pt': No such file or directory" in err, err)
    _, err = expect(h5dcp, 3, "convert", os.path.join(fixtures, "legacy.pt"), dst)
    check("legacy format" in err and "torch.save(torch.load(" in err, err)
    _, err = expect(h5dcp, 3, "convert", os.path.join(fixtures, "text.txt"), dst)
    check("neither a torch.save file nor an h5dcp checkpoint" in err, err)
    _, err = expect(h5dcp, 3, "convert", os.path.join(fixtures, "set.pt"), dst)
    check("set" in err, err)
    _, err = expect(h5dcp, 3, "inspect", os.path.join(fixtures, "matrix.pt"))
    check("is a torch.save file, not an h5dcp checkpoint" in err, err)
    _, err = expect(h5dcp, 3, "verify", os.path.join(fixtures, "missing.h5"))
    check("No such file" in err, err)
    check(not os.path.exists(dst), "a failed convert left " + dst)
    with open(dst, "w") as f:
        f.write("in the way\n")
    _, err = expect(h5dcp, 2, "convert", os.path.join(fixtures, "matrix.pt"), dst)
    check("exists (--force replaces it)" in err, err)
    expect(h5dcp, 0, "convert", "--force", os.path.join(fixtures, "matrix.pt"), dst)
    check(not [n for n in os.listdir(workdir) if ".h5dcp-partial." in n], "temporary files left in " + workdir)


def case_split(h5dcp, path, ranks):
    out, _ = expect(h5dcp, 0, "inspect", "--json", path)
    doc = json.loads(out)
    check(doc["world_size"] == int(ranks), "world size %s" % doc["world_size"])
    dtypes = doc["root"]["entries"]["dtypes"]["entries"]
    for name, node in dtypes.items():  # [3, 5] each: one row per rank
        want = "%s shards along dim 0" % ranks if int(ranks) > 1 else "whole"
        check(node["sharding"] == want, "dtypes/%s: %s, wanted %s" % (name, node["sharding"], want))
    check(doc["root"]["entries"]["views"]["entries"]["scalar"]["sharding"] == "scalar", "the 0-d tensor")


def case_progress(h5dcp, fixtures, workdir):
    fresh(workdir)
    src = os.path.join(fixtures, "load.pt")
    dst = os.path.join(workdir, "progress.h5")
    _, err = expect(h5dcp, 0, "convert", "--force", src, dst)
    check(err == "", "stderr is not a terminal, yet convert wrote to it: %r" % err)
    command = " ".join("'%s'" % a for a in [h5dcp, "convert", "--force", src, dst])
    tty = subprocess.run(["script", "-qec", command, "/dev/null"], stdout=subprocess.PIPE)
    shown = tty.stdout.decode(errors="replace")
    no_hdf5_diag(["script", "-qec", command], shown)
    check(tty.returncode == 0, "convert on a terminal: exit %d" % tty.returncode)
    # The last update of the line: every (non-empty) tensor, all bytes.
    check(re.search(r"\r\x1b\[Kconvert: (\d+)/\1 tensors, ([\d.]+ KiB) of \2 \(100%\)\r\x1b\[K", shown),
          "no progress line on a terminal: %r" % shown)
    quiet = subprocess.run(["script", "-qec", command.replace("convert", "-q convert", 1), "/dev/null"],
                           stdout=subprocess.PIPE)
    no_hdf5_diag(["script", "-qec", command], quiet.stdout)
    check(b"tensors," not in quiet.stdout, "-q still shows progress: %r" % quiet.stdout)


MAX_RSS = """
import resource, subprocess, sys
code = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL).returncode
print(code, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)
"""


def peak_bytes(*command):
    """The exit code and peak resident memory of a command (its own process only)."""
    env = dict(os.environ)
    if "ASAN_OPTIONS" in env:
        # Under AddressSanitizer (scripts/sanitize.sh) freed memory waits in
        # ASan's quarantine (256 MiB) before it is reused: freed tensors
        # would count as held. The measured commands run without it.
        env["ASAN_OPTIONS"] += ":quarantine_size_mb=0"
    out = subprocess.run([sys.executable, "-c", MAX_RSS, *command], stdout=subprocess.PIPE, text=True, check=True,
                         env=env)
    code, rss = out.stdout.split()
    return int(code), int(rss)


def case_bounded_memory(h5dcp, workdir):
    import torch
    fresh(workdir)
    mib = 1 << 20
    src, h5, back = (os.path.join(workdir, n) for n in ("big.pt", "big.h5", "back.pt"))
    tensors = {"t%d" % i: torch.full((4 * mib,), float(i)) for i in range(8)}  # 8 x 16 MiB
    torch.save(tensors, src)
    total = 8 * 16 * mib
    code, to_h5dcp = peak_bytes(h5dcp, "convert", "--force", src, h5)
    check(code == 0, "convert to h5dcp failed")
    code, to_torch = peak_bytes(h5dcp, "convert", "--force", h5, back)
    check(code == 0, "convert to torch.save failed")
    code, baseline = peak_bytes(h5dcp, "inspect", h5)
    check(code == 0, "inspect failed")
    for name, peak in (("torch.save -> h5dcp", to_h5dcp), ("h5dcp -> torch.save", to_torch)):
        print("%s: peak %d MiB, %d MiB above inspect's, for %d MiB of tensors" %
              (name, peak // mib, (peak - baseline) // mib, total // mib))
        # Tensor by tensor: a tensor or two at a time (16 MiB each), never all 128 MiB.
        check(peak - baseline < 3 * 16 * mib, "%s held %d MiB beyond inspect's: not tensor by tensor" %
              (name, (peak - baseline) // mib))
    loaded = torch.load(back)
    check(sorted(loaded) == sorted(tensors) and torch.equal(loaded["t7"], tensors["t7"]), "the round trip changed values")


CASES = {"help": case_help, "usage": case_usage, "inspect_json": case_inspect_json, "inspect_text": case_inspect_text,
         "diff_equal": case_diff_equal, "diff_unequal": case_diff_unequal, "diff_tolerance": case_diff_tolerance,
         "verify_good": case_verify_good, "format_1_1": case_format_1_1,
         "verify_damaged": case_verify_damaged,
         "convert_errors": case_convert_errors, "bounded_memory": case_bounded_memory,
         "progress": case_progress, "split": case_split}


def main(argv):
    if len(argv) < 3 or argv[2] not in CASES:
        print(__doc__)
        return 2
    CASES[argv[2]](argv[1], *argv[3:])
    for f in FAILURES:
        print("FAIL:", f)
    print("%s: %s" % (argv[2], "passed" if not FAILURES else "%d failures" % len(FAILURES)))
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
