#!/usr/bin/env python3
"""Runs every `h5dcp` subcommand on hostile files and checks that each ends
cleanly: no signal, no hang, bounded memory, a clear message.

The files come from generator scripts (tests/hostile/make_hostile_*.py), each
called as `PYTHON GENERATOR OUTDIR`. A file's name says what must happen:

  refuse-<case>.h5  a damaged or hostile checkpoint: `verify` reports a
                    problem (exit 1) or refuses it (exit 3); `convert`
                    refuses it (exit 3) and leaves no DST behind; `inspect`
                    and `diff F F` may show what they can (exit 0 or 1) or
                    refuse (exit 3). When <case> starts with "external-" or
                    "virtual-" (an external link, external storage, a
                    virtual dataset: a layout that reads another file),
                    `inspect` and `diff` must refuse it too (exit 3): what
                    they would show comes from outside the input.
  refuse-<case>.pt  a hostile torch.save file: `diff F F`, `convert` and
                    `convert --to torch` (a re-save) refuse it (exit 3),
                    leaving no DST.
  refuse-<case>.safetensors
                    a hostile safetensors file (or a FIFO in its place);
  refuse-<case>.st  a directory holding model.safetensors.index.json and
                    its shards;
  refuse-<case>.dcp a PyTorch DCP checkpoint directory (.metadata and
                    .distcp files): `convert SRC DST.h5` refuses each (exit
                    3), leaving no DST. `convert` is the one command that
                    reads them (`inspect`, `verify` and `diff` take
                    checkpoints and torch.save files, and a torch.save
                    file, safetensors or DCP is written from a checkpoint).
  accept-<case>.*   nasty but legitimate: every command succeeds (exit 0).

An input may be a directory, and may be or hold a symlink or a FIFO (a case
that points outside the input, or blocks whoever opens it): this script
never opens, follows or copies through them itself (lstat only; --inputs
copies a symlink as a symlink and makes a new FIFO). Files named other than
refuse-*/accept-* (outside-*: what a hostile input points at, outside it)
are not inputs. Every command runs in the inputs directory, so that a
relative path in an input (HDF5 external storage, a VDS source) finds the
file beside it that it names. A run that refuses an input must also leave
no temporary file of its output behind.

Every run is bounded: an address-space limit (so a memory bomb ends in
bad_alloc rather than taking the machine), a wall-clock timeout, and a peak
resident size checked afterwards from the child's rusage. With --sanitized
(a build under AddressSanitizer, which reserves terabytes of shadow address
space at startup and so cannot run under an address-space limit) ASan's own
allocator limits take the limit's place (an allocation past them returns
null, so `new` throws bad_alloc), and the resident-size bound is tripled for
ASan's shadow memory, redzones and quarantine. A run that hit the
address-space limit (bad_alloc in its message) counts as a memory failure,
not a clean refusal. A message must start with "h5dcp" and must not carry
HDF5's own error stack (HDF5-DIAG) or a C++ backtrace.

--json writes every run and the totals (docs/RELIABILITY.md takes its
hostile-input figures from it). Exit status 0 only when every run passed.
"""

import argparse
import json
import os
import resource
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time

# Marks of output that must never reach a user (see the module's docstring).
FORBIDDEN = ("HDF5-DIAG", "Exception raised from", "frame #", "terminate called", "AddressSanitizer",
             "runtime error:")
MEMORY_MARKS = ("bad_alloc", "Cannot allocate memory", "out of memory")

# The kinds of input, by the end of the name: (suffix, kind).
KINDS = ((".h5", "h5dcp"), (".pt", "torch.save"), (".safetensors", "safetensors"), (".st", "safetensors index"),
         (".dcp", "DCP"))
# Checkpoint cases whose layout reads another file: every command must refuse them.
OUTSIDE_CASES = ("refuse-external-", "refuse-virtual-")
# A conversion's temporary output (docs/FORMAT.md, "Publishing").
PARTIAL_MARK = ".h5dcp-partial."


def kind_of(name):
    """The kind of input `name` is, or None when it is not one."""
    if not (name.startswith("refuse-") or name.startswith("accept-")):
        return None
    for suffix, kind in KINDS:
        if name.endswith(suffix):
            return kind
    return None


def total_size(path):
    """The input's size in bytes: a directory's files together; a symlink's own size (its target is not part
    of the input); a FIFO 0. lstat only: nothing is opened or followed."""
    info = os.lstat(path)
    if stat.S_ISDIR(info.st_mode):
        return sum(total_size(os.path.join(path, n)) for n in os.listdir(path))
    return info.st_size if (stat.S_ISREG(info.st_mode) or stat.S_ISLNK(info.st_mode)) else 0


def copy_input(src, dst):
    """Copies src to dst as it is: a directory entry by entry, a symlink as a symlink (not what it points
    at), a FIFO as a new FIFO (never opened), a regular file's bytes."""
    info = os.lstat(src)
    if stat.S_ISLNK(info.st_mode):
        os.symlink(os.readlink(src), dst)
    elif stat.S_ISDIR(info.st_mode):
        os.mkdir(dst)
        for name in sorted(os.listdir(src)):
            copy_input(os.path.join(src, name), os.path.join(dst, name))
    elif stat.S_ISFIFO(info.st_mode):
        os.mkfifo(dst)
    elif stat.S_ISREG(info.st_mode):
        shutil.copyfile(src, dst, follow_symlinks=False)
    else:
        sys.exit("run_hostile: %s is neither a file, a directory, a symlink nor a FIFO" % src)


def remove_entry(path):
    """Removes a file, symlink or directory tree without following a symlink."""
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    else:
        os.remove(path)


def commands_for(path, out_dir):
    """(name, argv, allowed exit codes, output that must not exist afterwards) for one file."""
    base = os.path.basename(path)
    accept = base.startswith("accept-")
    kind = kind_of(base)
    is_h5 = kind == "h5dcp"
    dst = os.path.join(out_dir, base + (".pt" if is_h5 else ".h5"))
    runs = []
    if kind in ("safetensors", "safetensors index", "DCP"):
        # Only `convert` reads them (see the module's docstring); into a checkpoint.
        runs.append(("convert", ["convert", path, dst], {0} if accept else {3}, None if accept else dst))
    elif is_h5:
        outside = base.startswith(OUTSIDE_CASES)
        runs.append(("inspect", ["inspect", path], {0} if accept else {3} if outside else {0, 3}, None))
        runs.append(("verify", ["verify", path], {0} if accept else {1, 3}, None))
        runs.append(("diff", ["diff", path, path], {0} if accept else {3} if outside else {0, 1, 3}, None))
        runs.append(("convert", ["convert", path, dst], {0} if accept else {3}, None if accept else dst))
    else:
        # `inspect` and `verify` take checkpoints only; `convert --to torch`
        # re-saves the file, reading every tensor.
        resaved = os.path.join(out_dir, base + ".resaved.pt")
        runs.append(("diff", ["diff", path, path], {0} if accept else {3}, None))
        runs.append(("convert", ["convert", path, dst], {0} if accept else {3}, None if accept else dst))
        runs.append(("resave", ["convert", "--to", "torch", path, resaved], {0} if accept else {3},
                     None if accept else resaved))
    return runs


def sanitized_environment(limit_mib):
    """The environment of a run under ASan: its allocator refuses what the address-space limit would."""
    env = dict(os.environ)
    limits = "allocator_may_return_null=1:max_allocation_size_mb=%d:soft_rss_limit_mb=%d" % (limit_mib, limit_mib)
    env["ASAN_OPTIONS"] = (env["ASAN_OPTIONS"] + ":" if env.get("ASAN_OPTIONS") else "") + limits
    return env


def run_bounded(argv, address_space, timeout, env=None, cwd=None):
    """Runs argv (address_space None: no address-space limit); returns (exit code or None, signal or None, timed out, its own peak RSS in KiB (from
    wait4), seconds, stdout, stderr)."""

    def limit():
        if address_space is not None:
            resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        os.setsid()

    start = time.monotonic()
    with tempfile.TemporaryFile() as out_file, tempfile.TemporaryFile() as err_file, open(os.devnull, "rb") as devnull:
        child = subprocess.Popen(argv, stdin=devnull, stdout=out_file, stderr=err_file, preexec_fn=limit,
                                 env=env, cwd=cwd)
        timed_out = False
        deadline = start + timeout
        while True:
            pid, status, usage = os.wait4(child.pid, os.WNOHANG)
            if pid == child.pid:
                break
            if time.monotonic() > deadline:
                timed_out = True
                try:
                    os.killpg(child.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                pid, status, usage = os.wait4(child.pid, 0)
                break
            time.sleep(0.02)
        child.returncode = 0  # reaped here; keep Popen from waiting again
        seconds = time.monotonic() - start
        out_file.seek(0)
        err_file.seek(0)
        out = out_file.read().decode(errors="replace")
        err = err_file.read().decode(errors="replace")
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else None
    sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
    return code, sig, timed_out, usage.ru_maxrss, seconds, out, err


def judge(run, allowed, leftover, rss_limit_kib, out_dir=None):
    """The reasons a run failed (empty when it passed)."""
    code, sig, timed_out, rss, _seconds, out, err = run
    problems = []
    text = out + err
    if timed_out:
        problems.append("hang: killed after the timeout")
    elif sig is not None:
        problems.append("crash: signal %d (%s)" % (sig, signal.Signals(sig).name))
    elif code not in allowed:
        problems.append("exit %s, expected %s" % (code, "/".join(str(c) for c in sorted(allowed))))
    if rss > rss_limit_kib:
        problems.append("memory: peak RSS %d MiB over the %d MiB bound" % (rss // 1024, rss_limit_kib // 1024))
    if any(m in text for m in MEMORY_MARKS):
        problems.append("memory: hit the address-space limit")
    for mark in FORBIDDEN:
        if mark in text:
            problems.append("output carries '%s'" % mark)
    if code not in (None, 0) and not err.lstrip().startswith("h5dcp") and not (code == 1 and out.strip()):
        problems.append("no h5dcp message on stderr")
    if leftover and os.path.lexists(leftover):
        problems.append("left its output '%s' behind" % os.path.basename(leftover))
    if leftover and out_dir and not timed_out and sig is None:
        partial = sorted(n for n in os.listdir(out_dir) if PARTIAL_MARK in n)
        if partial:
            problems.append("left its temporary output '%s' behind" % partial[0])
    return problems


def first_line(text):
    """The message's first line, with the next one when it ends in ':' (a list follows)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return ""
    head = lines[0] + (" " + lines[1] if lines[0].endswith(":") and len(lines) > 1 else "")
    return head[:300]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--h5dcp", required=True, help="the h5dcp command-line tool")
    p.add_argument("--python", default=sys.executable, help="runs the generators")
    p.add_argument("--generator", action="append", default=[], help="a make_hostile_*.py script (repeatable)")
    p.add_argument("--inputs", action="append", default=[], help="a directory of ready-made files (repeatable)")
    p.add_argument("--workdir", required=True)
    p.add_argument("--address-space-mib", type=int, default=4096)
    p.add_argument("--rss-limit-mib", type=int, default=512)
    p.add_argument("--timeout", type=float, default=60.0)
    p.add_argument("--sanitized", action="store_true", help="the tool is built with AddressSanitizer")
    p.add_argument("--json", help="write every run and the totals here")
    args = p.parse_args()

    # The commands run in the inputs directory: a tool named by a relative path is found from here.
    h5dcp = os.path.abspath(args.h5dcp) if os.sep in args.h5dcp else args.h5dcp
    workdir = os.path.abspath(args.workdir)
    shutil.rmtree(workdir, ignore_errors=True)
    inputs_dir = os.path.join(workdir, "inputs")
    out_dir = os.path.join(workdir, "out")
    os.makedirs(inputs_dir)
    os.makedirs(out_dir)
    described = {}  # file -> what it is, from its generator's "<file>: <what>" lines
    for generator in args.generator:
        done = subprocess.run([args.python, generator, inputs_dir], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        if done.returncode != 0:
            sys.exit("run_hostile: %s failed:\n%s" % (generator, done.stdout.decode(errors="replace")))
        for line in done.stdout.decode(errors="replace").splitlines():
            name, sep, what = line.partition(": ")
            if sep:
                described[name.strip()] = what.strip()
    for directory in args.inputs:
        for name in sorted(os.listdir(directory)):
            copy_input(os.path.join(directory, name), os.path.join(inputs_dir, name))
    files = sorted(f for f in os.listdir(inputs_dir) if kind_of(f) is not None)
    if not files:
        sys.exit("run_hostile: no refuse-*/accept-* inputs (%s) were generated" %
                 ", ".join(suffix for suffix, _ in KINDS))
    kinds = {f: kind_of(f) for f in files}
    sizes = {f: total_size(os.path.join(inputs_dir, f)) for f in files}

    address_space = None if args.sanitized else args.address_space_mib << 20
    env = sanitized_environment(args.address_space_mib) if args.sanitized else None
    rss_limit_mib = args.rss_limit_mib * (3 if args.sanitized else 1)
    rss_limit_kib = rss_limit_mib << 10
    runs = []
    failures = 0
    for name in files:
        path = os.path.join(inputs_dir, name)
        for command, argv, allowed, leftover in commands_for(path, out_dir):
            result = run_bounded([h5dcp, "-q"] + argv, address_space, args.timeout, env, cwd=inputs_dir)
            problems = judge(result, allowed, leftover, rss_limit_kib, out_dir)
            code, sig, timed_out, rss, seconds, out, err = result
            runs.append({"file": name, "kind": kinds[name], "command": command, "exit": code, "signal": sig,
                         "timed_out": timed_out, "peak_rss_kib": rss, "seconds": round(seconds, 3),
                         "bytes": sizes[name],
                         "message": (first_line(err) or first_line(out)).replace(inputs_dir + "/", "").replace(
                             out_dir + "/", ""), "problems": problems})
            status = "ok  " if not problems else "FAIL"
            print("%s %-8s %-44s exit %-4s %6.1f MiB %6.2f s  %s" %
                  (status, command, name, code if sig is None else "sig%d" % sig, rss / 1024, seconds,
                   "; ".join(problems) if problems else first_line(err) or first_line(out)))
            if problems:
                # What the tool said, so that a failure in CI can be understood from the log alone.
                for line in (err.strip() or out.strip()).splitlines()[-5:]:
                    print("     | " + line[:200])
            failures += bool(problems)
            # Outputs of accepted files are not needed past their run.
            for f in os.listdir(out_dir):
                remove_entry(os.path.join(out_dir, f))

    refused = sum(1 for r in runs if not r["problems"] and r["exit"] not in (0,))
    totals = {
        "inputs": len(files),
        "inputs_refuse": sum(1 for f in files if f.startswith("refuse-")),
        "inputs_accept": sum(1 for f in files if f.startswith("accept-")),
        "inputs_by_kind": {kind: sum(1 for f in files if kinds[f] == kind) for _, kind in KINDS},
        "runs": len(runs),
        "passed": len(runs) - failures,
        "refused_cleanly": refused,
        "crashes": sum(1 for r in runs if r["signal"] is not None and not r["timed_out"]),
        "hangs": sum(1 for r in runs if r["timed_out"]),
        "over_memory": sum(1 for r in runs if any(p.startswith("memory") for p in r["problems"])),
        "peak_rss_mib_max": round(max(r["peak_rss_kib"] for r in runs) / 1024, 1),
        "largest_input_bytes": max(r["bytes"] for r in runs),
        "seconds_max": max(r["seconds"] for r in runs),
        "rss_limit_mib": rss_limit_mib,
        "sanitized": args.sanitized,
        "address_space_mib": args.address_space_mib,
        "timeout_s": args.timeout,
    }
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"totals": totals, "files": {f: described.get(f, "") for f in files}, "runs": runs}, f,
                      indent=1)
    print("hostile inputs: %(inputs)d files, %(runs)d runs: %(refused_cleanly)d refused cleanly, crashes "
          "%(crashes)d, hangs %(hangs)d, over memory %(over_memory)d, peak RSS %(peak_rss_mib_max)s MiB" % totals)
    print("%d passed, %d failed" % (len(runs) - failures, failures))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
