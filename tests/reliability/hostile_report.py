"""The hostile-input section of docs/RELIABILITY.md.

Its figures come from the JSON of tests/hostile/run_hostile.py, and its table
of limits from the library's source: every limit on what a file may ask for
is a named constant preceded by a comment line

    // hostile-input limit: <why legitimate files stay far below it>

so the table cannot drift from the code.
"""

import json
import os
import re

LIMIT_MARK = re.compile(r"^\s*//\s*hostile-input limit:\s*(.*)$")
CONSTANT = re.compile(r"constexpr\s+[\w:<>, ]+?\s+(k\w+)\s*=\s*([^;]+?)\s*;")


def limits_from_source(root):
    """(constant, value, file, why) for each marked constant under root/lib/src, sorted by file."""
    found = []
    src = os.path.join(root, "lib", "src")
    for dirpath, _dirs, files in os.walk(src):
        for name in sorted(files):
            if not name.endswith((".cpp", ".hpp")):
                continue
            path = os.path.join(dirpath, name)
            with open(path) as f:
                lines = f.read().splitlines()
            for i, line in enumerate(lines):
                mark = LIMIT_MARK.match(line)
                if not mark:
                    continue
                why = [mark.group(1).strip()]
                j = i + 1
                # The comment may go on over several lines before the constant.
                while j < len(lines) and lines[j].strip().startswith("//"):
                    why.append(lines[j].strip()[2:].strip())
                    j += 1
                # One comment may stand for several constants declared together.
                constants = []
                while j < len(lines) and CONSTANT.search(lines[j]):
                    constants.append(CONSTANT.search(lines[j]))
                    j += 1
                if not constants:
                    raise SystemExit("hostile_report: %s:%d: a 'hostile-input limit' comment without a constant "
                                     "after it" % (path, i + 1))
                for constant in constants:
                    found.append((constant.group(1), constant.group(2).strip(), os.path.relpath(path, root),
                                  " ".join(why)))
    return sorted(found, key=lambda row: (row[2], row[0]))


def hostile_section(json_path, root):
    """Markdown lines: the hostile-input figures (if json_path exists) and the limits table."""
    lines = ["## Hostile inputs", ""]
    if json_path and os.path.exists(json_path):
        with open(json_path) as f:
            data = json.load(f)
        t = data["totals"]
        lines += ["`tests/hostile/run_hostile.py` runs every `h5dcp` subcommand that applies on",
                  "each input written by `tests/hostile/make_hostile_*.py`: checkpoints get",
                  "`inspect`, `verify`, `diff F F` and `convert`, torch.save files `diff F F`,",
                  "`convert` and `convert --to torch`, safetensors files and indexes and DCP",
                  "checkpoint directories `convert`. The inputs are damaged and malicious files:",
                  "self-linked and deeply nested groups, sizes that overflow or exceed the file,",
                  "overlapping chunks, pickle bombs, compressed records; reads outside the input",
                  "(HDF5 external links, external storage and virtual datasets, which every",
                  "command must refuse; shards, `.distcp` and `.metadata` files that are links",
                  "leading out of their directory; `../` and absolute paths); a FIFO or a",
                  "directory where a file should be; one key with two meanings (duplicate JSON",
                  "keys, a name that is both a tensor and a dict or value, two chunks or tensors",
                  "at one byte range); names and planner_data paths thousands of keys deep;",
                  "thousands of DCP chunks naming one costly item. Each run has an address space of",
                  "%d MiB and %g s; a run passes when it ends with the expected exit code and an" % (
                      t["address_space_mib"], t["timeout_s"]),
                  "`h5dcp` message, with no signal, no HDF5 error stack or C++ backtrace, no",
                  "output left behind, and a peak resident size under %d MiB. The Python" % t["rss_limit_mib"],
                  "package meets the same list of checkpoints (`tests/python/hostile_package_test.py`",
                  "runs `make_hostile_h5.py`'s files through `load_state_dict`, `verify` and",
                  "`DCPReader`, each refused with `h5dcp.FormatError`).", "",
                  "| figure | count | must be |", "|---|---:|---:|",
                  "| hostile inputs (refuse-* / accept-*) | %d (%d / %d) | |" % (t["inputs"], t["inputs_refuse"],
                                                                             t["inputs_accept"]),
                  "| largest input (a directory: its files together), bytes | %d | |" % t["largest_input_bytes"],
                  "| command runs | %d | |" % t["runs"],
                  "| ... refused cleanly | %d | |" % t["refused_cleanly"],
                  "| ... failing any rule | %d | 0 |" % (t["runs"] - t["passed"]),
                  "| ... crashes | %d | 0 |" % t["crashes"],
                  "| ... hangs | %d | 0 |" % t["hangs"],
                  "| ... over the memory bound | %d | 0 |" % t["over_memory"],
                  "| peak resident size of any run, MiB | %s | < %d |" % (t["peak_rss_mib_max"], t["rss_limit_mib"]),
                  "| longest run, seconds | %s | < %g |" % (t["seconds_max"], t["timeout_s"]), "",
                  "One row a file: each command's exit code (`-` where it does not apply), the",
                  "highest peak resident size of its runs, and what `convert` said.", "",
                  "| file | bytes | what it is | inspect | verify | diff | convert | resave | peak MiB | convert's message |",
                  "|---|---:|---|---:|---:|---:|---:|---:|---:|---|"]
        by_file = {}
        for r in data["runs"]:
            by_file.setdefault(r["file"], {})[r["command"]] = r
        for name, runs in by_file.items():
            def outcome(command):
                r = runs.get(command)
                if r is None:
                    return "-"
                text = str(r["exit"]) if r["signal"] is None else "signal %d" % r["signal"]
                return text + (" **(%s)**" % "; ".join(r["problems"]) if r["problems"] else "")
            convert = runs.get("convert", {}).get("message", "").replace("|", "\\|")
            lines.append("| %s | %d | %s | %s | %s | %s | %s | %s | %.0f | %s |" % (
                name, next(iter(runs.values()))["bytes"], data.get("files", {}).get(name, ""), outcome("inspect"),
                outcome("verify"), outcome("diff"), outcome("convert"), outcome("resave"),
                max(r["peak_rss_kib"] for r in runs.values()) / 1024, convert[:160]))
        lines.append("")
    else:
        lines += ["No hostile-input run was given to this report (see `scripts/reliability.sh`).", ""]
    limits = limits_from_source(root)
    lines += ["### Limits on what a file may ask for", "",
              "Named constants in the library (each marked `hostile-input limit` in its",
              "source); a file beyond one is refused with a message naming it.", "",
              "| limit | value | where | why legitimate files stay below it |", "|---|---:|---|---|"]
    for name, value, path, why in limits:
        lines.append("| `%s` | `%s` | %s | %s |" % (name, value, path, why))
    lines.append("")
    return lines
