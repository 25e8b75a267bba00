#!/usr/bin/env python3
"""Runs every `h5dcp` subcommand on hostile files and checks that each ends
cleanly: no signal, no hang, bounded memory, a clear message.

The files come from generator scripts (tests/hostile/make_hostile_*.py), each
called as `PYTHON GENERATOR OUTDIR`. A file's name says what must happen:

  refuse-<case>.h5  a damaged or hostile checkpoint: `verify` reports a
                    problem (exit 1) or refuses it (exit 3); `convert`
                    refuses it (exit 3) and leaves no DST behind; `inspect`
                    and `diff F F` may show what they can (exit 0 or 1) or
                    refuse (exit 3).
  refuse-<case>.pt  a hostile torch.save file: `diff F F`, `convert` and
                    `convert --to torch` (a re-save) refuse it (exit 3),
                    leaving no DST.
  accept-<case>.*   nasty but legitimate: every command succeeds (exit 0).

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
import subprocess
import sys
import tempfile
import time

# Marks of output that must never reach a user (see the module's docstring).
FORBIDDEN = ("HDF5-DIAG", "Exception raised from", "frame #", "terminate called", "AddressSanitizer",
             "runtime error:")
MEMORY_MARKS = ("bad_alloc", "Cannot allocate memory", "out of memory")


def commands_for(path, out_dir):
    """(name, argv, allowed exit codes, output that must not exist afterwards) for one file."""
    base = os.path.basename(path)
    accept = base.startswith("accept-")
    is_h5 = base.endswith(".h5")
    dst = os.path.join(out_dir, base + (".pt" if is_h5 else ".h5"))
    runs = []
    if is_h5:
        runs.append(("inspect", ["inspect", path], {0} if accept else {0, 3}, None))
        runs.append(("verify", ["verify", path], {0} if accept else {1, 3}, None))
        runs.append(("diff", ["diff", path, path], {0} if accept else {0, 1, 3}, None))
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


def run_bounded(argv, address_space, timeout, env=None):
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
                                 env=env)
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


def judge(run, allowed, leftover, rss_limit_kib):
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
    if leftover and os.path.exists(leftover):
        problems.append("left its output '%s' behind" % os.path.basename(leftover))
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

    shutil.rmtree(args.workdir, ignore_errors=True)
    inputs_dir = os.path.join(args.workdir, "inputs")
    out_dir = os.path.join(args.workdir, "out")
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
            shutil.copy(os.path.join(directory, name), inputs_dir)
    files = sorted(f for f in os.listdir(inputs_dir)
                   if (f.startswith("refuse-") or f.startswith("accept-")) and f.endswith((".h5", ".pt")))
    if not files:
        sys.exit("run_hostile: no refuse-*/accept-* .h5/.pt files were generated")

    address_space = None if args.sanitized else args.address_space_mib << 20
    env = sanitized_environment(args.address_space_mib) if args.sanitized else None
    rss_limit_mib = args.rss_limit_mib * (3 if args.sanitized else 1)
    rss_limit_kib = rss_limit_mib << 10
    runs = []
    failures = 0
    for name in files:
        path = os.path.join(inputs_dir, name)
        for command, argv, allowed, leftover in commands_for(path, out_dir):
            result = run_bounded([args.h5dcp, "-q"] + argv, address_space, args.timeout, env)
            problems = judge(result, allowed, leftover, rss_limit_kib)
            code, sig, timed_out, rss, seconds, out, err = result
            runs.append({"file": name, "command": command, "exit": code, "signal": sig, "timed_out": timed_out,
                         "peak_rss_kib": rss, "seconds": round(seconds, 3), "bytes": os.path.getsize(path),
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
                os.remove(os.path.join(out_dir, f))

    refused = sum(1 for r in runs if not r["problems"] and r["exit"] not in (0,))
    totals = {
        "inputs": len(files),
        "inputs_refuse": sum(1 for f in files if f.startswith("refuse-")),
        "inputs_accept": sum(1 for f in files if f.startswith("accept-")),
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
