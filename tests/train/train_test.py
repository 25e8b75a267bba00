#!/usr/bin/env python3
"""h5dcp-train end to end: crashes, resumes on other rank counts, bit for bit.

  train_test.py --mpiexec M --train BIN --workdir DIR reference
      1 rank, uninterrupted: DIR/reference.txt holds its 'step <n> loss <hex>' lines.
  train_test.py ... resume FROM TO CRASH
      FROM ranks, every rank SIGKILLed right after step CRASH (--crash-after-step),
      then --resume on TO ranks.
  train_test.py ... local-tier FROM TO CRASH MODE
      FROM ranks (one node) with a local checkpoint every step (--local-dir, the drain
      every 4 steps), written in the background (MODE async) or in the save call (MODE
      sync: --local-sync), every rank SIGKILLed right after step CRASH; then --resume
      on TO ranks recovers from the newest local step (newer than the shared one).
  train_test.py ... kill-during-save FROM TO
      FROM ranks; as soon as a checkpoint's partial file appears in the checkpoint
      directory, the whole job (mpiexec and every rank) gets SIGKILL from outside;
      then --resume on TO ranks.

Every 'step' line any run prints must equal the reference's line for that step,
exactly (the losses are hex floats), and the steps must be covered up to the last;
the resumed run must start from the newest published checkpoint and never from
a partial file, and it must remove the partial file a killed save left behind.
"""
import argparse
import os
import re
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from child_output import hdf5_diag  # noqa: E402

STEPS = 12
SKIP = 77  # ctest's SKIP_RETURN_CODE for these tests
# The training everyone runs; checkpoint frequency and throttling do not
# change the losses, so runs add their own --checkpoint-every / --throttle-ms.
# H5DCP_TRAIN_DEVICE (scripts/gpu-check.sh: cuda) says where every run trains.
TRAIN = ["--steps", str(STEPS), "--seed", "7", "--device", os.environ.get("H5DCP_TRAIN_DEVICE", "auto")]
STEP_LINE = re.compile(r"^step (\d+) loss (\S+)$")
PARTIAL = re.compile(r"^\.step-(\d+)\.h5\.h5dcp-partial\.")
CHECKPOINT = re.compile(r"^step-(\d+)\.h5$")


def fail(message):
    print("FAIL: " + message, flush=True)
    sys.exit(1)


def refuse_hdf5_diag(text, what):
    """h5dcp must never let HDF5 print its error stack, even in a job killed
    mid-save (CTest's log, which scripts/test.sh checks, sees only part of it)."""
    found = hdf5_diag(text, what)
    if found:
        fail(found)


def step_lines(text):
    lines = {}
    for line in text.splitlines():
        m = STEP_LINE.match(line)
        if m:
            step = int(m.group(1))
            if step in lines and lines[step] != line:
                fail(f"step {step} printed twice with different losses: {lines[step]!r} vs {line!r}")
            lines[step] = line
    return lines


def checkpoints(directory):
    return sorted(int(m.group(1)) for m in (CHECKPOINT.match(n) for n in os.listdir(directory)) if m)


def partials(directory):
    return sorted(n for n in os.listdir(directory) if PARTIAL.match(n))


def kill_session(sid):
    """SIGKILL every process of session `sid` (mpiexec and the ranks it started)."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            if int(fields[3]) == sid:  # field 6 of stat: the session id
                os.kill(int(pid), signal.SIGKILL)
        except (OSError, IndexError, ValueError):
            pass


def session_alive(sid):
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                if int(fields[3]) == sid and fields[0] != "Z":
                    return True
            except (OSError, IndexError, ValueError):
                pass
    return False


class Runner:
    def __init__(self, args):
        self.mpiexec = args.mpiexec
        self.train = args.train
        self.workdir = os.path.abspath(args.workdir)

    def command(self, ranks, ckpt, extra):
        return [self.mpiexec, "-n", str(ranks), self.train, *TRAIN, "--checkpoint-dir", ckpt, *extra]

    def run(self, ranks, ckpt, extra, log, expect_ok=True):
        started = time.monotonic()
        with open(log, "w") as out:
            proc = subprocess.run(self.command(ranks, ckpt, extra), stdout=out, stderr=subprocess.STDOUT,
                                  timeout=240, start_new_session=True)
        text = open(log).read()
        print(f"--- {ranks} ranks {' '.join(extra)}: exit {proc.returncode} in {time.monotonic() - started:.1f} s")
        print(text, end="", flush=True)
        refuse_hdf5_diag(text, f"h5dcp-train on {ranks} ranks {' '.join(extra)}")
        if expect_ok and proc.returncode != 0:
            fail(f"h5dcp-train on {ranks} ranks exited with {proc.returncode}")
        return proc.returncode, text

    def reference(self):
        path = os.path.join(self.workdir, "reference.txt")
        if not os.path.exists(path):
            fail(f"{path} is missing: run the 'reference' case first")
        lines = step_lines(open(path).read())
        if sorted(lines) != list(range(1, STEPS + 1)):
            fail(f"{path} does not hold steps 1..{STEPS}")
        return lines

    def fresh(self, name):
        case = os.path.join(self.workdir, name)
        subprocess.run(["rm", "-rf", case], check=True)
        os.makedirs(case)
        return case, os.path.join(case, "ckpt")


def check_against(reference, lines, what):
    for step, line in sorted(lines.items()):
        if reference.get(step) != line:
            fail(f"{what}: {line!r} differs from the uninterrupted run's {reference.get(step)!r}")
    print(f"ok: {what}: steps {min(lines) if lines else '-'}..{max(lines) if lines else '-'} "
          f"({len(lines)} lines) equal the uninterrupted run bit for bit")


def check_resumed(reference, text, ckpt, published, to_ranks):
    """The resumed run started from the newest published checkpoint and finished."""
    expected = f"resumed from {os.path.join(ckpt, f'step-{published:08d}.h5')} (step {published},"
    if published > 0 and expected not in text:
        fail(f"the resumed run did not start from the newest published checkpoint (expected '{expected}')")
    if published == 0 and "no checkpoint" not in text:
        fail("the resumed run should have started from scratch")
    lines = step_lines(text)
    if sorted(lines) != list(range(published + 1, STEPS + 1)):
        fail(f"the resumed run printed steps {sorted(lines)}, expected {published + 1}..{STEPS}")
    check_against(reference, lines, f"resumed on {to_ranks} ranks")
    if lines[STEPS] != reference[STEPS]:
        fail("the final loss differs")
    print(f"ok: final loss {lines[STEPS].split()[-1]} equals the uninterrupted run's")
    left = partials(ckpt)
    if left:
        fail(f"partial files left after the resumed run: {left}")
    if checkpoints(ckpt)[-1] != STEPS:
        fail(f"no checkpoint of step {STEPS} after the resumed run")


def case_reference(r, args):
    case, ckpt = r.fresh("reference")
    _, text = r.run(1, ckpt, ["--checkpoint-every", "3"], os.path.join(case, "run.log"))
    lines = step_lines(text)
    if sorted(lines) != list(range(1, STEPS + 1)):
        fail(f"the reference run printed steps {sorted(lines)}")
    with open(os.path.join(r.workdir, "reference.txt"), "w") as f:
        f.write("".join(lines[s] + "\n" for s in sorted(lines)))
    print(f"ok: reference losses of {STEPS} steps in {os.path.join(r.workdir, 'reference.txt')}")


def case_resume(r, args):
    reference = r.reference()
    case, ckpt = r.fresh(f"resume-{args.from_ranks}to{args.to_ranks}")
    rc, text = r.run(args.from_ranks, ckpt, ["--checkpoint-every", "3", "--crash-after-step", str(args.crash)],
                     os.path.join(case, "crashed.log"), expect_ok=False)
    if rc == 0 or "SIGKILL to every rank" not in text:
        fail(f"the run on {args.from_ranks} ranks was expected to be killed after step {args.crash}")
    lines = step_lines(text)
    if sorted(lines) != list(range(1, args.crash + 1)):
        fail(f"the killed run printed steps {sorted(lines)}, expected 1..{args.crash}")
    check_against(reference, lines, f"{args.from_ranks} ranks before the crash")
    published = checkpoints(ckpt)
    print(f"after the crash: checkpoints {published}, partial files {partials(ckpt)}")
    newest = published[-1] if published else 0
    # --crash-after-step waits for the saves of earlier steps: they are complete.
    completed = (args.crash - 1) // 3 * 3
    if newest < completed or newest > args.crash:
        fail(f"expected the checkpoint of step {completed} (the newest before the crash) to be the newest, not {newest}")
    _, text = r.run(args.to_ranks, ckpt, ["--checkpoint-every", "3", "--resume"], os.path.join(case, "resumed.log"))
    check_resumed(reference, text, ckpt, newest, args.to_ranks)


def case_local_tier(r, args):
    reference = r.reference()
    case, ckpt = r.fresh(f"local-{args.mode}-{args.from_ranks}to{args.to_ranks}")
    tier = ["--checkpoint-every", "4", "--local-dir", os.path.join(case, "local", "{node}"), "--local-every", "1",
            "--local-replicas", "0", *(["--local-sync"] if args.mode == "sync" else [])]
    rc, text = r.run(args.from_ranks, ckpt, [*tier, "--crash-after-step", str(args.crash)],
                     os.path.join(case, "crashed.log"), expect_ok=False)
    if rc == 0 or "SIGKILL to every rank" not in text:
        fail(f"the run on {args.from_ranks} ranks was expected to be killed after step {args.crash}")
    check_against(reference, step_lines(text), f"{args.from_ranks} ranks before the crash")
    _, text = r.run(args.to_ranks, ckpt, [*tier, "--resume"], os.path.join(case, "resumed.log"))
    m = re.search(r"resumed from local step (\d+)", text)
    resumed = int(m.group(1)) if m else None
    # --crash-after-step waits for the saves of earlier steps; a save in the
    # call (sync) is complete before the crash, one in the background may not be.
    least = args.crash if args.mode == "sync" else args.crash - 1
    if resumed is None or not least <= resumed <= args.crash:
        fail(f"the resumed run did not start from local step {least}..{args.crash}")
    if f"none from {ckpt}" not in text:
        fail("the resumed run does not say that it read nothing from the shared directory")
    lines = step_lines(text)
    if sorted(lines) != list(range(resumed + 1, STEPS + 1)):
        fail(f"the resumed run printed steps {sorted(lines)}, expected {resumed + 1}..{STEPS}")
    check_against(reference, lines, f"resumed on {args.to_ranks} ranks from local step {resumed}")


def case_kill_during_save(r, args):
    reference = r.reference()
    case, ckpt = r.fresh(f"kill-during-save-{args.from_ranks}to{args.to_ranks}")
    log = os.path.join(case, "killed.log")
    # Checkpoints every 2 steps, slowed steps: an async save is in flight
    # much of the time. Kill the job the moment one's partial file shows,
    # once an earlier checkpoint is published.
    command = r.command(args.from_ranks, ckpt, ["--checkpoint-every", "2", "--throttle-ms", "40"])
    started = time.monotonic()
    with open(log, "w") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    killed_at = None
    while proc.poll() is None and time.monotonic() - started < 240:
        try:
            seen = [n for n in os.listdir(ckpt) if PARTIAL.match(n) and int(PARTIAL.match(n).group(1)) >= 4]
        except FileNotFoundError:
            seen = []
        if seen:
            kill_session(proc.pid)
            killed_at = seen[0]
            break
        time.sleep(0.0005)
    proc.wait()
    deadline = time.monotonic() + 10
    while session_alive(proc.pid) and time.monotonic() < deadline:
        kill_session(proc.pid)
        time.sleep(0.05)
    text = open(log).read()
    refuse_hdf5_diag(text, f"h5dcp-train on {args.from_ranks} ranks (killed from outside)")
    print(f"--- {args.from_ranks} ranks, killed from outside (exit {proc.returncode}) after "
          f"{time.monotonic() - started:.1f} s")
    print(text, end="", flush=True)
    if killed_at is None:
        fail("the run ended before a checkpoint's partial file was seen: nothing was killed mid-save")
    if session_alive(proc.pid):
        fail("processes of the killed job are still alive")
    print(f"SIGKILL sent while {killed_at} was being written")
    check_against(reference, step_lines(text), f"{args.from_ranks} ranks before the kill")
    left = partials(ckpt)
    published = checkpoints(ckpt)
    print(f"after the kill: checkpoints {published}, partial files {left}")
    killed_step = int(PARTIAL.match(killed_at).group(1))
    newest = published[-1] if published else 0
    if killed_at in left and newest >= killed_step:
        fail("the checkpoint being written when the job was killed exists as a published file")
    if not left:
        print("note: the save finished (renamed) between seeing its partial file and the kill")
    _, text = r.run(args.to_ranks, ckpt, ["--checkpoint-every", "2", "--resume"], os.path.join(case, "resumed.log"))
    for name in left:
        if f"removed {os.path.join(ckpt, name)}" not in text:
            fail(f"the resumed run did not report removing {name}")
    print(f"ok: the resumed run removed the partial files {left} and did not take them for checkpoints")
    check_resumed(reference, text, ckpt, newest, args.to_ranks)


def case_device_refused(r, args):
    """--device cuda where assign_device finds no GPU: every rank stops with
    exit 2 before training, and each says why."""
    case, ckpt = r.fresh("device-refused")
    rc, text = r.run(2, ckpt, ["--device", "cuda"], os.path.join(case, "run.log"), expect_ok=False)
    if "-> cuda:" in text:
        print("SKIP: a GPU is assigned here, so --device cuda is not refused")
        sys.exit(SKIP)
    if rc != 2:
        fail(f"--device cuda without a GPU exited with {rc}, not 2")
    for rank in (0, 1):
        if f"h5dcp-train: rank {rank}: --device cuda, but cpu" not in text:
            fail(f"rank {rank} did not say why it refused --device cuda")
    if step_lines(text):
        fail("--device cuda without a GPU trained")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mpiexec", required=True)
    parser.add_argument("--train", required=True, help="the h5dcp-train program")
    parser.add_argument("--workdir", required=True)
    sub = parser.add_subparsers(dest="case", required=True)
    sub.add_parser("reference")
    p = sub.add_parser("resume")
    p.add_argument("from_ranks", type=int)
    p.add_argument("to_ranks", type=int)
    p.add_argument("crash", type=int)
    sub.add_parser("device-refused")
    p = sub.add_parser("local-tier")
    p.add_argument("from_ranks", type=int)
    p.add_argument("to_ranks", type=int)
    p.add_argument("crash", type=int)
    p.add_argument("mode", choices=["async", "sync"])
    p = sub.add_parser("kill-during-save")
    p.add_argument("from_ranks", type=int)
    p.add_argument("to_ranks", type=int)
    args = parser.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    r = Runner(args)
    {"reference": case_reference, "resume": case_resume, "kill-during-save": case_kill_during_save,
     "local-tier": case_local_tier,
     "device-refused": case_device_refused}[args.case](r, args)
    print("PASS")


if __name__ == "__main__":
    main()
