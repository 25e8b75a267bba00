#!/usr/bin/env python3
"""The reliability figures of docs/RELIABILITY.md, measured with fault_trial.

  reliability.py --trial BIN --mpiexec MPIEXEC --workdir DIR [--quick]
                 [--kills N] [--flips M] [--json OUT] [--report MD --fuzz-stats JSON]
  reliability.py --report-from OUT --report MD [--fuzz-stats JSON] [--hostile-json JSON]

1. The fault matrix: every phase of a save and of a load x every failing rank
   x {throw, kill -9, stall past the deadline}, at 2 and 4 ranks (--quick: 2
   ranks, stalls in two phases). Counted: hangs (the job outlives its limit),
   published partial files (the path holds something that does not load),
   lost previous checkpoints (the path holds neither the old nor the new
   save), ranks whose error differs from the others' or does not name the
   failing rank and phase, and files left behind after the next save.
2. kill -9 of a random rank at a random moment of a loop of saves.
3. Random byte flips in data and in metadata: silent wrong loads.
Exits 1 when any count that must be 0 is not.
The report records the hash of the sources the run measured (see
report_current.py, which CI runs to find a report older than its sources).
Deadlines and time limits are multiplied by H5DCP_TEST_TIME_SCALE (default 1).
"""

import argparse
import itertools
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
SOURCE_ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
from child_output import hdf5_diag  # noqa: E402
from hostile_report import hostile_section  # noqa: E402
from report_current import sources_hash, sources_line  # noqa: E402

SAVE_PHASES = ["save:plan", "save:create", "save:reserve", "save:block", "save:write", "save:checksums",
               "save:sync", "save:commit"]
LOAD_PHASES = ["load:metadata", "load:plan", "load:open", "load:read", "load:close"]
# A stall while resolving a block of a collectively written tensor happens
# inside HDF5's collective write, where no deadline reaches: the save may
# complete late. Only tensors whose blocks are scattered through the file
# ("columns" layout) are written collectively (README, IoMode::Collective);
# in the "rows" layout every block is written independently and the deadline
# must catch the stall like any other.
STALL_INSIDE_HDF5 = {"save:block"}
COLLECTIVE_LAYOUTS = {"columns"}
# A stall around the rename: the coordinator may publish after others gave up.
STALL_AT_COMMIT = {"save:commit"}
# Broadcast steps: only the coordinator (rank 0) works in them.
COORDINATOR_ONLY = {"save:reserve", "save:commit", "load:metadata"}
MIB = 8          # data per trial (the kill trials use more)
# Deadlines follow the build: under ASan+UBSan, or with other tests beside
# this one on 2 cores, a rank can fall a second behind the others without
# any stall and trip a 1 s deadline. CTest sets the scale (2; 4 under
# H5DCP_SANITIZE: cmake/H5dcpMpiTest.cmake); scripts/reliability.sh runs
# alone, at 1. Every limit on a child process below is scaled too, so that
# only a real stall reads as a hang.
TIME_SCALE = float(os.environ.get("H5DCP_TEST_TIME_SCALE") or 1)
TIMEOUT = 30.0   # the deadline of throw and kill trials: never reached by a slow (shared) machine
STALL_TIMEOUT = 1.0 * TIME_SCALE  # the deadline of stall trials
# Past every deadline: a waiting rank gives up within 2 * STALL_TIMEOUT + 1 s.
STALL = 2 * STALL_TIMEOUT + 2
KILL_ATTEMPTS = 4  # tries of one random kill trial before it counts as "no kill delivered"
# mpiexec's (OpenMPI's) line for a rank that died by a signal.
KILLED_BY = re.compile(r"process rank (\d+) with PID \d+ on node \S+ exited on signal (\d+)")


# What children printed of HDF5's own error stack (h5dcp must turn every
# HDF5 error into an exception): scripts/test.sh greps CTest's log, which
# never sees the output captured here, so the driver counts it itself.
DIAG = []


def note_diag(out, cmd):
    found = hdf5_diag(out, " ".join(str(c) for c in cmd))
    if found:
        DIAG.append(found)
        print("FAIL " + found, flush=True)


def stacks_of_group(pgid):
    """Every thread's stack of every process in the group, by gdb where it is
    installed: what a hung trial was waiting in, for its report ("" without gdb)."""
    gdb = shutil.which("gdb")
    if not gdb:
        return ""
    text = ""
    for pid in sorted(int(p) for p in os.listdir("/proc") if p.isdigit()):
        try:
            if os.getpgid(pid) != pgid:
                continue
            with open("/proc/%d/comm" % pid) as f:
                comm = f.read().strip()
            bt = subprocess.run([gdb, "-p", str(pid), "-batch", "-nx", "-ex", "thread apply all bt 30"],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, timeout=60).stdout
        except (OSError, subprocess.TimeoutExpired):
            continue
        frames = [line for line in bt.splitlines() if line.startswith(("#", "Thread "))]
        text += "\n--- stacks of pid %d (%s), taken at the time limit\n%s\n" % (pid, comm, "\n".join(frames))
    return text


def scaled(seconds):
    return seconds * TIME_SCALE


def run(cmd, limit, env=None):
    """Runs cmd in its own process group; (returncode or None on a hang, stdout)."""
    # errors="replace": a message may quote bytes of a damaged file that are not UTF-8.
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace", env=env,
                         start_new_session=True)
    try:
        out, _ = p.communicate(timeout=limit)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        stacks = stacks_of_group(p.pid)
        os.killpg(p.pid, signal.SIGKILL)
        out, _ = p.communicate()
        out += stacks
        rc = None
    note_diag(out, cmd)
    return rc, out


def killed_ranks(out):
    """{rank: signal} of the ranks mpiexec saw die by a signal."""
    return {int(m.group(1)): int(m.group(2)) for m in KILLED_BY.finditer(out)}


def json_lines(text):
    rows = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                pass
    return rows


class Lab:
    def __init__(self, args):
        self.args = args
        self.env = dict(os.environ, OMPI_MCA_io=os.environ.get("OMPI_MCA_io", "romio321"),
                        OMPI_MCA_mpi_yield_when_idle="1", OMPI_MCA_rmaps_base_oversubscribe="1")
        if os.geteuid() == 0:
            self.env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        self.env.pop("H5DCP_INJECT_FAULT", None)
        self.count = 0

    def fresh_dir(self):
        self.count += 1
        d = os.path.join(self.args.workdir, "t%04d" % self.count)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        return d

    def mpi(self, n, *trial_args):
        return [self.args.mpiexec, "-n", str(n), self.args.trial, *trial_args]

    def check(self, d, mib):
        rc, out = run([self.args.trial, "check", d, str(mib)], scaled(120), self.env)
        rows = json_lines(out)
        if rc != 0 or not rows:
            return {"generation": -2, "error": "check failed: " + out[-500:], "leftovers": [], "after_next_save": ["?"]}
        return rows[-1]


def matrix_cell(lab, op, phase, action, rank, n, layout="rows"):
    """One trial; returns a dict of what happened and which rules it broke."""
    d = lab.fresh_dir()
    suffix = {"throw": "", "kill": "!kill", "stall": "~%g" % STALL}[action]
    spec = "%s@%d%s" % (phase, rank, suffix)
    limit = scaled(120) + (STALL if action == "stall" else 0)
    started = time.time()
    timeout = STALL_TIMEOUT if action == "stall" else TIMEOUT
    rc, out = run(lab.mpi(n, op, d, str(MIB), spec, str(timeout), layout), limit, lab.env)
    seconds = time.time() - started
    rows = [r for r in json_lines(out) if "attempt" in r]
    cell = {"op": op, "phase": phase, "action": action, "rank": rank, "ranks": n, "spec": spec, "layout": layout,
            "seconds": round(seconds, 1), "problems": [], "reports": rows}
    if rc is None:
        cell["problems"].append("hang")
        # What the job printed and where its processes waited, for the report.
        cell["hang_output"] = out[-20000:]
        print("--- hung trial %s %s (%s): its output, then its stacks\n%s\n---" % (op, spec, layout, out[-20000:]),
              flush=True)
    after = lab.check(d, MIB)
    cell["generation"] = after["generation"]
    if after["generation"] == -1:
        cell["problems"].append("published partial file: " + str(after.get("error"))[:200])
    elif after["generation"] not in (1, 2) or (op == "load" and after["generation"] != 1):
        cell["problems"].append("lost the previous checkpoint (holds generation %s)" % after["generation"])
    if after["after_next_save"]:
        cell["problems"].append("left behind after the next save: %s" % after["after_next_save"])
    ignored = action == "throw" and phase in COORDINATOR_ONLY and rank != 0
    step = "save:write" if phase == "save:block" else phase
    if action == "kill":
        # The trial counts only if the kill happened: the failing rank died
        # by SIGKILL (only its fault point at `phase` sends one) before it
        # could report the attempt's outcome.
        killed = killed_ranks(out)
        if rc not in (None, 0) and killed.get(rank) == signal.SIGKILL and all(r["rank"] != rank for r in rows):
            cell["outcome"] = "rank %d killed at %s" % (rank, phase)
        else:
            cell["outcome"] = "no kill"
            cell["problems"].append("rank %d was to die by SIGKILL at %s, but: exit %s, killed %s, it reported %s" % (
                rank, phase, rc, killed or "none", [r for r in rows if r["rank"] == rank][:1] or "nothing"))
    elif rc is not None:
        errors = [r for r in rows if r["error"]]
        if ignored:
            cell["outcome"] = "n/a: no work on this rank in this phase"
            if errors:
                cell["problems"].append("errors where the fault is ignored: %s" % errors[0]["error"][:200])
        elif len(rows) != n:
            cell["problems"].append("%d of %d ranks reported" % (len(rows), n))
        elif action == "stall" and not errors and phase in STALL_INSIDE_HDF5 and layout in COLLECTIVE_LAYOUTS:
            # The stall was inside HDF5's collective write, which has no
            # deadline: everyone waited, and the save went through, late.
            cell["outcome"] = "completed late (no deadline inside HDF5's collective write)"
            if after["generation"] != 2:
                cell["problems"].append("completed, but the path holds generation %s" % after["generation"])
        elif action == "stall" and errors and phase in STALL_AT_COMMIT:
            # The coordinator renamed the file; ranks that gave up waiting
            # for it cannot know whether it did. The path is whole either way.
            cell["outcome"] = "%d of %d ranks got an error (commit outcome unknown to them)" % (len(errors), n)
        elif len(errors) != n:
            cell["problems"].append("%d of %d ranks got an error" % (len(errors), n))
        else:
            cell["outcome"] = "error on every rank"
            named = [r for r in errors if rank in r["failing"]]
            if action == "throw":
                if any(r["step"] != step for r in errors):
                    cell["problems"].append("steps differ: %s" % sorted({r["step"] for r in errors}))
                if len({r["error"] for r in errors}) != 1:
                    cell["problems"].append("ranks got different errors")
                if len(named) != n:
                    cell["problems"].append("the failing rank is not named on every rank")
            else:
                # The others name the stalled rank; the stalled rank, late,
                # names whoever did not answer it.
                others = [r for r in errors if r["rank"] != rank]
                if any(rank not in r["failing"] for r in others):
                    cell["problems"].append("a waiting rank did not name the stalled rank")
            if action == "throw" and op == "save" and after["generation"] != 1:
                cell["problems"].append("a failed save replaced the checkpoint")
    return cell


def run_matrix(lab, quick):
    cells = []
    sizes = [2] if quick else [2, 4]
    for n in sizes:
        for op, phases in (("save", SAVE_PHASES), ("load", LOAD_PHASES)):
            for phase in phases:
                actions = ["throw", "kill"]
                if not quick or phase in ("save:write", "save:block", "load:read"):
                    actions.append("stall")
                for action in actions:
                    # A save:block stall in both write modes: rows (written
                    # independently: the deadline must catch it) and columns
                    # (collectively: it may complete late).
                    layouts = ["rows", "columns"] if (action, phase) == ("stall", "save:block") else ["rows"]
                    for layout in layouts:
                        for rank in range(n):
                            cell = matrix_cell(lab, op, phase, action, rank, n, layout)
                            cells.append(cell)
                            mark = "FAIL " + "; ".join(cell["problems"]) if cell["problems"] else "ok"
                            print("%s %-15s %-5s %-7s rank %d/%d  %5.1fs  %s" % (
                                op, phase, action, layout, rank, n, cell["seconds"], mark), flush=True)
    return cells


def last_save_started(log, rank):
    """The generation `rank` was saving when its output ends (0: none began)."""
    try:
        with open(log) as f:
            rows = json_lines(f.read())
    except OSError:
        return 0
    return max([r["saving"] for r in rows if r.get("rank") == rank and "saving" in r] or [0])


def kill_attempt(lab, n, mib, victim, delay):
    """One kill -9 of `victim` `delay` s into a loop of saves. Returns what
    happened; "delivered" is False unless the victim died by that SIGKILL
    while a save was in progress (then "saving" is that save's generation)."""
    d = lab.fresh_dir()
    log = d + ".loop.log"  # beside DIR: DIR must hold only what the saves left
    with open(log, "w") as out:
        p = subprocess.Popen(lab.mpi(n, "loop", d, str(mib)), stdout=out, stderr=subprocess.STDOUT, env=lab.env,
                             start_new_session=True)
    pids = {}
    deadline = time.time() + scaled(120)
    while len(pids) < n and time.time() < deadline and p.poll() is None:
        for r in range(n):
            try:
                with open(os.path.join(d, "pid.%d" % r)) as f:
                    pids[r] = int(f.read().split()[0])
            except (OSError, ValueError, IndexError):
                pass
        time.sleep(0.02)
    time.sleep(delay)
    sent = False
    if victim in pids and p.poll() is None:
        try:
            os.kill(pids[victim], signal.SIGKILL)
            sent = True
        except ProcessLookupError:
            pass
    hang = False
    try:
        p.wait(timeout=scaled(60))
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        hang = True
    with open(log) as f:
        out = f.read()
    note_diag(out, lab.mpi(n, "loop", d, str(mib)))
    saving = last_save_started(log, victim)
    # The kill counts only if mpiexec saw this very rank die by SIGKILL, and
    # the rank had begun a save of the loop (generation 2 or later).
    delivered = sent and killed_ranks(out).get(victim) == signal.SIGKILL and saving >= 2
    why = "" if delivered else "sent %s, pids %s, exit %s, killed %s, saving %s" % (
        sent, sorted(pids), p.returncode, killed_ranks(out) or "none", saving)
    return {"dir": d, "sent": sent, "delivered": delivered, "saving": saving, "hang": hang, "why": why}


def run_kills(lab, trials, n, mib):
    results = []
    rng = random.Random(20261122)
    for t in range(trials):
        # A kill that was not delivered (the loop ended or had not begun its
        # saves, the rank was gone) says nothing: try again, a few times.
        attempts = []
        while True:
            victim = rng.randrange(n)
            delay = rng.uniform(0.0, 3.0)
            a = kill_attempt(lab, n, mib, victim, delay)
            attempts.append(a)
            if a["delivered"] or a["hang"] or len(attempts) == KILL_ATTEMPTS:
                break
            print("kill %2d: rank %d after %.2fs not delivered (%s): trying again" % (t, victim, delay, a["why"]),
                  flush=True)
        after = lab.check(a["dir"], mib)
        lost = after["generation"] < 1
        # Killed during save g, the path holds g (renamed before the kill) or g - 1.
        wrong = a["delivered"] and not lost and after["generation"] not in (a["saving"] - 1, a["saving"])
        results.append({"trial": t, "victim": victim, "delay": round(delay, 3), "killed": a["delivered"],
                        "attempts": len(attempts), "saving": a["saving"], "why_not_killed": a["why"],
                        "generation": after["generation"], "lost": lost, "wrong_generation": wrong, "hang": a["hang"],
                        "leftovers": after["leftovers"], "after_next_save": after["after_next_save"]})
        print("kill %2d: rank %d after %.2fs, %s -> holds generation %s, %d leftover(s)%s%s%s" % (
            t, victim, delay, "during save %d" % a["saving"] if a["delivered"] else "NOT KILLED (%s)" % a["why"],
            after["generation"], len(after["leftovers"]), " LOST" if lost else "", " HANG" if a["hang"] else "",
            " WRONG GENERATION" if wrong else ""), flush=True)
    return results


def run_flips(lab, count):
    d = lab.fresh_dir()
    rc, out = run(lab.mpi(1, "save", d, str(MIB), "none@0", str(TIMEOUT)), scaled(120), lab.env)
    original = os.path.join(d, "ckpt.h5")
    results = []
    start = 0
    while start < count:
        rc, out = run([lab.args.trial, "flips", original, str(MIB), "7", str(start), str(count - start)], scaled(600),
                      lab.env)
        rows = [r for r in json_lines(out) if "trial" in r]
        results += rows
        start = (rows[-1]["trial"] + 1) if rows else start
        if rc != 0 or rc is None:
            # The trial after the last reported one crashed or hung the reader.
            results.append({"trial": start, "region": "?", "outcome": "crash" if rc is not None else "hang",
                            "message": out[-300:]})
            start += 1
    return results


NODES = "abc"  # the node-loss trials' faked nodes, one rank each


def nodeloss_expected(lost, replicas):
    """Where a node-loss trial must recover from: the local step when every node's
    data keeps a copy (node i's copies are on the nodes i+1..i+replicas by name,
    no groups: plan/replica_placement), else the shared checkpoint."""
    n = len(NODES)
    kept = all(any(NODES[(i + k) % n] not in lost for k in range(replicas + 1)) for i in range(n))
    return ("local", 3) if kept else ("shared", 2)


def run_nodeloss(lab):
    """Every loss pattern of the three nodes, with one and with two replicas."""
    results = []
    for replicas in (1, 2):
        for size in range(len(NODES) + 1):
            for lost in itertools.combinations(NODES, size):
                d = lab.fresh_dir()
                spec = ",".join(lost) or "none"
                t0 = time.time()
                rc, out = run(lab.mpi(len(NODES), "nodeloss", d, "1", spec, str(replicas)), scaled(300), lab.env)
                rows = [r for r in json_lines(out) if "from" in r]
                row = rows[-1] if rows else {"from": "crash" if rc is not None else "hang", "step": -1, "exact": False,
                                              "skipped": 0, "rejected": out[-300:]}
                want = nodeloss_expected(lost, replicas)
                problems = []
                if (row["from"], row["step"]) != want:
                    problems.append("recovered from %s step %s, not %s step %d" % (row["from"], row["step"], *want))
                if not row["exact"]:
                    problems.append("not bit for bit")
                results.append(dict(row, replicas=replicas, lost=spec, expected="%s step %d" % want,
                                    seconds=time.time() - t0, problems=problems))
                print("nodeloss replicas %d lost %s: %s step %s%s" % (replicas, spec, row["from"], row["step"],
                                                                       " PROBLEMS: " + "; ".join(problems)
                                                                       if problems else ""), flush=True)
    return results


def summarize(cells, kills, flips, fuzz, diag=None, nodeloss=()):
    s = {"matrix_trials": len(cells),
         "hangs": sum("hang" in c["problems"] for c in cells),
         "partial": sum(any(p.startswith("published partial") for p in c["problems"]) for c in cells),
         "lost": sum(any(p.startswith("lost") for p in c["problems"]) for c in cells),
         "matrix_problems": sum(bool(c["problems"]) for c in cells),
         "kills": len(kills), "kills_lost": sum(k["lost"] for k in kills), "kills_hang": sum(k["hang"] for k in kills),
         "kills_left_behind": sum(bool(k["after_next_save"]) for k in kills),
         "kills_not_delivered": sum(not k.get("killed") for k in kills),
         "kills_wrong_generation": sum(bool(k.get("wrong_generation")) for k in kills),
         "hdf5_diag": len(DIAG) if diag is None else diag,
         "flips": len(flips),
         "nodeloss": len(nodeloss), "nodeloss_problems": sum(bool(c["problems"]) for c in nodeloss)}
    for region in ("data", "metadata"):
        rows = [f for f in flips if f.get("region") == region]
        s["flips_" + region] = len(rows)
        for outcome in ("error", "identical", "WRONG"):
            s["flips_%s_%s" % (region, outcome)] = sum(f["outcome"] == outcome for f in rows)
    s["flips_crash_or_hang"] = sum(f["outcome"] in ("crash", "hang", "other exception") for f in flips)
    s["silent_wrong"] = sum(f["outcome"] == "WRONG" for f in flips)
    s["fuzz"] = fuzz
    s["ok"] = (s["matrix_problems"] == 0 and s["kills_lost"] == 0 and s["kills_hang"] == 0 and
               s["kills_left_behind"] == 0 and s["kills_not_delivered"] == 0 and s["kills_wrong_generation"] == 0 and
               s["hdf5_diag"] == 0 and s["silent_wrong"] == 0 and s["flips_crash_or_hang"] == 0 and
               s["nodeloss_problems"] == 0)
    return s


def run_info(args):
    """What the report says of the run itself, kept in its JSON so that a
    report rewritten from it (--report-from) states the run's settings and
    the hash of the sources it measured, not those of the day it is rewritten."""
    digest, count = sources_hash(SOURCE_ROOT)
    return {"date": time.strftime("%Y-%m-%d"), "quick": args.quick, "kill_mib": args.kill_mib,
            "kill_ranks": args.kill_ranks, "timeout": TIMEOUT, "stall_timeout": STALL_TIMEOUT, "stall": STALL,
            "time_scale": TIME_SCALE, "sources_sha256": digest, "sources_files": count}


def fuzz_targets():
    """The libFuzzer targets in tests/fuzz/ (fuzz_NAME.cpp), whose figures the report must show."""
    return sorted(n[len("fuzz_"):-len(".cpp")] for n in os.listdir(os.path.join(SOURCE_ROOT, "tests", "fuzz"))
                  if n.startswith("fuzz_") and n.endswith(".cpp"))


def read_fuzz_stats(path):
    """scripts/sanitize.sh's fuzz-stats.json ({} when absent: the report says no target has figures)."""
    if not path:
        return {}
    if not os.path.exists(path):
        print("reliability.py: no %s (scripts/sanitize.sh writes it): the report shows no fuzzing figures" % path,
              file=sys.stderr)
        return {}
    with open(path) as f:
        return json.load(f)


def write_report(path, s, cells, kills, flips, args, info, nodeloss=()):
    def yes(v):
        return "**%d**" % v if v else "0"
    if info.get("sources_sha256"):
        sources = [sources_line(info["sources_sha256"], info["sources_files"]),
                   "These are the library's save, load and publish paths and the trials, hashed as the run began;",
                   "`tests/reliability/report_current.py` (CTest: docs.reliability_current) fails once they change."]
    else:
        sources = ["Sources: not recorded by this run (it predates source hashes), so",
                   "`tests/reliability/report_current.py` (CTest: docs.reliability_current) fails on this report."]
    lines = ["# Reliability", "",
             "Produced by `scripts/reliability.sh` (tests/reliability/reliability.py driving",
             "tests/reliability/fault_trial under `mpiexec`) on %s; %s." % (info["date"],
                                                                        "quick run" if info["quick"] else "full run"),
             "Every trial first saves generation 1 of a %d MiB state dict (a row-sharded" % MIB,
             "tensor, a replicated one, an int and a string) to `ckpt.h5`, then saves",
             "generation 2 over it (or loads it) with a fault injected through",
             "`H5DCP_INJECT_FAULT` (deadline %g s; %g s in stall trials). A separate" % (info["timeout"],
                                                                                        info["stall_timeout"]),
             "process then loads whatever `ckpt.h5` holds and compares it bit for bit with each generation,",
             "and makes one more save to check that it cleans up what the failure left.", "",
             *sources, "",
             "## Summary", "",
             "| figure | count | must be |", "|---|---:|---:|",
             "| fault-matrix trials | %d | |" % s["matrix_trials"],
             "| hangs | %s | 0 |" % yes(s["hangs"]),
             "| published partial files | %s | 0 |" % yes(s["partial"]),
             "| lost previous checkpoints | %s | 0 |" % yes(s["lost"]),
             "| trials breaking any rule (see below) | %s | 0 |" % yes(s["matrix_problems"]),
             "| kill -9 trials at random moments of a save loop | %d | |" % s["kills"],
             "| ... lost checkpoints | %s | 0 |" % yes(s["kills_lost"]),
             "| ... hangs | %s | 0 |" % yes(s["kills_hang"]),
             "| ... files left after the next save | %s | 0 |" % yes(s["kills_left_behind"]),
             "| ... no kill delivered during a save (after %d tries) | %s | 0 |" % (KILL_ATTEMPTS,
                                                                              yes(s["kills_not_delivered"])),
             "| ... path holding neither the save killed nor the one before | %s | 0 |" % yes(
                 s["kills_wrong_generation"]),
             "| HDF5 error stacks (HDF5-DIAG) printed by any process | %s | 0 |" % yes(s["hdf5_diag"]),
             "| random byte flips | %d | |" % s["flips"],
             "| ... silent wrong loads | %s | 0 |" % yes(s["silent_wrong"]),
             "| ... crashes or hangs of the reader | %s | 0 |" % yes(s["flips_crash_or_hang"]),
             "| node-loss trials of the node-local tier | %d | |" % s.get("nodeloss", 0),
             "| ... not recovered from where they must be, or not bit for bit | %s | 0 |" % yes(
                 s.get("nodeloss_problems", 0)), ""]
    lines += ["## Fault matrix", "",
              "Phases are the collective steps (`save:block` is a failure while a rank",
              "resolves one of its blocks, inside the write). Actions: **throw** (the rank",
              "raises an error; every rank must get the same `CheckpointError` naming the",
              "rank and the phase, and the old checkpoint must stay), **kill** (the rank",
              "dies by SIGKILL; mpiexec ends the job and must report that very rank",
              "killed, before it reported an outcome; the path must hold the old or the",
              "new checkpoint, complete), **stall** (the rank sleeps %g s, past the %g s" % (info["stall"],
                                                                                        info["stall_timeout"]),
              "deadline: the others must fail naming it, nobody may wait forever). A",
              "throw on a non-coordinator rank in a broadcast phase (only rank 0 works",
              "there) has nothing to fail: n/a. Two limits show in the stall rows:",
             "a stall while a rank resolves a block (`save:block`) of a tensor that is",
             "written collectively happens inside HDF5's collective write, where no",
             "deadline reaches, so everyone waits and the save completes late (a rank",
             "stalled there forever would hang the job: MPI collectives cannot be",
             "cancelled). Since h5dcp writes collectively only tensors whose blocks are",
             "scattered through the file (column or grid shards), this trial's",
             "row-sharded and single-writer tensors are written independently and a",
             "`save:block` stall is caught by the deadline like any other (a",
             "`save:block` stall completing late counts as a failure there; the",
             "matrix runs it in both layouts, rows and columns); and ranks",
             "that give up at",
             "`save:commit` cannot know whether the coordinator renamed the file: they",
             "report the timeout, and the path holds the old or the new checkpoint,",
             "whole, either way.", "",
              "| ranks | op | phase | action | layout | failing rank | outcome | path holds | seconds | problems |",
              "|---:|---|---|---|---|---:|---|---:|---:|---|"]
    for c in cells:
        lines.append("| %d | %s | %s | %s | %s | %d | %s | gen %s | %.1f | %s |" % (
            c["ranks"], c["op"], c["phase"], c["action"], c.get("layout", "rows"), c["rank"], c.get("outcome", "?"),
            c["generation"],
            c["seconds"], "; ".join(c["problems"]) or "none"))
    gens = {}
    for k in kills:
        gens[k["generation"]] = gens.get(k["generation"], 0) + 1
    lines += ["", "## kill -9 at random moments", "",
              "`fault_trial loop` saves generations 1, 2, 3, ... of a %d MiB state dict" % info["kill_mib"],
              "over one path at %d ranks; after a random delay (0-3 s) one random rank" % info["kill_ranks"],
              "gets SIGKILL. A trial counts only when mpiexec reports that rank killed by",
              "SIGKILL while it was saving generation g >= 2 (otherwise it is tried again,",
              "up to %d times, then counted as a failure). Then the path must load, bit" % KILL_ATTEMPTS,
              "for bit, as generation g or g - 1.", "",
              "| trials | lost | hangs | left behind after the next save | generations found |",
              "|---:|---:|---:|---:|---|",
              "| %d | %s | %s | %s | %s |" % (s["kills"], yes(s["kills_lost"]), yes(s["kills_hang"]),
                                           yes(s["kills_left_behind"]),
                                           ", ".join("%s: %d" % (g, n) for g, n in sorted(gens.items())))]
    lines += ["", "## Random byte flips", "",
              "One byte of a saved %d MiB checkpoint XORed with a random nonzero mask," % MIB,
              "alternately inside tensor/value data and elsewhere (superblock, object",
              "headers, attributes, heaps, free space), then loaded with the default",
              "options. *identical* means the flip hit bytes that nothing reads (the load",
              "was bit-for-bit right); *error* a clear h5dcp error.", "",
              "| region | flips | error | identical | silent wrong load |", "|---|---:|---:|---:|---:|"]
    for region in ("data", "metadata"):
        lines.append("| %s | %d | %d | %d | %s |" % (region, s["flips_" + region], s["flips_%s_error" % region],
                                                   s["flips_%s_identical" % region],
                                                   yes(s["flips_%s_WRONG" % region])))
    lines += ["", "## Node loss (the node-local tier)", "",
              "`fault_trial nodeloss`: three faked nodes (`H5DCP_NODE_NAME`), one rank each, save generations",
              "1-3 through a `CheckpointManager` with a node-local tier (a local step every step, the shared",
              "directory every second: it holds generation 2, the nodes' local directories 2 and 3); the lost",
              "nodes' local directories are then removed, and a job of three ranks on the surviving nodes and",
              "fresh ones (empty directories) loads. Where it must recover from: the local step 3 when every",
              "node's data kept a copy (a node's copies are on the next `replicas` nodes by name), else the",
              "shared step 2; either way bit for bit, every rank loading the whole state.", "",
              "| replicas | nodes lost | recovered from | expected | bit for bit | copies skipped | why the local step was passed over | problems |",
              "|---:|---|---|---|---|---:|---|---|"]
    for c in nodeloss:
        lines.append("| %d | %s | %s step %s | %s | %s | %d | %s | %s |" % (
            c["replicas"], c["lost"], c["from"], c["step"], c["expected"], "yes" if c["exact"] else "**no**",
            c["skipped"], (c["rejected"] or "").replace("|", "/"), "; ".join(c["problems"]) or "none"))
    if not nodeloss:
        lines.append("| | | no node-loss trials in this run | | | | | |")
    lines += ["", "## Fuzzing", "",
              "libFuzzer targets in tests/fuzz/ (clang, ASan + UBSan), as run by",
              "`scripts/sanitize.sh`. LeakSanitizer checks every target at exit; libFuzzer's",
              "leak check after each input is off for the checkpoint target, whose HDF5 and",
              "MPI keep global state that triggered it after nearly every input."]
    # Every target of tests/fuzz/ has a row: one without figures says so.
    targets = sorted(set(fuzz_targets()) | set(s["fuzz"]))
    missing = [t for t in targets if t not in s["fuzz"]]
    if not s["fuzz"]:
        lines.append("No fuzzing statistics were given to this report (`build-san/fuzz-stats.json`, written by "
                     "`scripts/sanitize.sh`): no target has figures.")
    elif missing:
        lines.append("**%d of %d targets have no figures** in the fuzzing statistics given: %s." % (
            len(missing), len(targets), ", ".join(missing)))
    lines += ["", "| target | seconds | executions | crashes |", "|---|---:|---:|---:|"]
    for name in targets:
        f = s["fuzz"].get(name)
        if f:
            lines.append("| %s | %s | %s | %s |" % (name, f.get("seconds"), f.get("executions"), f.get("crashes")))
        else:
            lines.append("| %s | no figures | | |" % name)
    lines += [""] + hostile_section(getattr(args, "hostile_json", None), SOURCE_ROOT)
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trial")
    ap.add_argument("--mpiexec", default="mpiexec")
    ap.add_argument("--workdir")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--kill-ranks", type=int, default=2)
    ap.add_argument("--kill-mib", type=int, default=64)
    ap.add_argument("--flips", type=int, default=200)
    ap.add_argument("--json")
    ap.add_argument("--hostile-json", help="tests/hostile/run_hostile.py's --json, for the hostile-input section")
    ap.add_argument("--report")
    ap.add_argument("--fuzz-stats")
    ap.add_argument("--report-from", help="rewrite --report from the --json of an earlier run (new fuzz stats)")
    args = ap.parse_args()
    if args.report_from:
        with open(args.report_from) as f:
            saved = json.load(f)
        fuzz = read_fuzz_stats(args.fuzz_stats)
        s = summarize(saved["matrix"], saved["kills"], saved["flips"], fuzz, saved["summary"].get("hdf5_diag", 0),
                      saved.get("nodeloss", []))
        # The run's own settings and sources hash: the figures are the run's.
        # A JSON from before they were recorded: this command's settings
        # (the defaults of that time) and no sources hash.
        info = saved.get("run") or dict(run_info(args), sources_sha256=None)
        if info["sources_sha256"] and info["sources_sha256"] != sources_hash(SOURCE_ROOT)[0]:
            print("reliability.py: the sources changed since the run of %s: the report records the run's hash, and "
                  "tests/reliability/report_current.py will call it stale" % args.report_from, file=sys.stderr)
        write_report(args.report, s, saved["matrix"], saved["kills"], saved["flips"], args, info,
                     saved.get("nodeloss", []))
        return 0 if s["ok"] else 1
    # Hashed before the run: a change to the sources while it runs makes the report stale.
    info = run_info(args)
    shutil.rmtree(args.workdir, ignore_errors=True)
    os.makedirs(args.workdir)
    lab = Lab(args)
    cells = run_matrix(lab, args.quick)
    kills = run_kills(lab, args.kills, args.kill_ranks, args.kill_mib)
    flips = run_flips(lab, args.flips)
    nodeloss = run_nodeloss(lab)
    fuzz = read_fuzz_stats(args.fuzz_stats)
    s = summarize(cells, kills, flips, fuzz, nodeloss=nodeloss)
    print(json.dumps({k: v for k, v in s.items() if k != "fuzz"}, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"run": info, "summary": s, "matrix": cells, "kills": kills, "flips": flips,
                       "nodeloss": nodeloss}, f, indent=1)
    if args.report:
        write_report(args.report, s, cells, kills, flips, args, info, nodeloss)
    shutil.rmtree(args.workdir, ignore_errors=True)
    return 0 if s["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
