"""The node-local tier's speed (issue 50), measured by driving h5dcp-train on one machine that
fakes several nodes: each rank's node name (H5DCP_NODE_NAME) comes from its MPI rank through a
wrapper script, and each fake node's local directory is its own directory under /dev/shm (tmpfs).

usage: local_tier_bench.py --train BUILD/apps/h5dcp-train --json OUT.json [options]

Three measurements, written to one JSON (read by bench/performance_report.py):

step_cost  Per-step cost of a local checkpoint at every step. Three kinds of run, in an order that rotates
           from round to round (each goes first as often):
           "none": h5dcp-train without --local-dir and --checkpoint-every beyond --steps, so no
           step saves but the last (h5dcp-train always saves after its last step); its figure is
           the mean of the other steps (h5dcp-train's "otherwise" average), steps without any
           checkpoint. "tier": --local-dir, --local-every 1, --checkpoint-every twice --steps (no
           drain at all: the shared directory gets nothing); every step saves to the tier, the last
           included, and its figure is the mean of all steps; each local step written in the
           background (async_save). "sync": the same with --local-sync, each local step written in
           the save call. The driver also times each step as it sees it, from one "step N loss" line
           to the next (steps 2..N: in "tier" and "sync" each interval holds one local checkpoint, in
           "none" none), and takes their median, which a burst of
           other work on the machine moves less than the mean. After each run its newest checkpoint
           is read back: h5dcp-train --resume one step further, whose loss must equal a reference
           run's (trained straight through, no checkpoint read) bit for bit.
recovery   Recovering the same step, saved by --save-ranks ranks, onto --load-ranks ranks: from the
           local tier (the step's drained file moved out of the shared directory, so the newest
           local step is the one to recover) and from the shared directory (that drained file, in a
           directory of its own, loaded without a tier). Before every sample, both kinds: sync, the
           page cache dropped (as root; the checkpoint file's own pages evicted with
           posix_fadvise DONTNEED either way, and what fincore still finds cached recorded), then
           the program's own files warmed by `h5dcp-train --help`. The time is h5dcp-train's
           "--resume took" (a barrier, then finding and loading, the slowest rank); samples
           alternate local/shared. Each sample trains one step further and its loss must equal a
           reference run's. One more local recovery, traced (H5DCP_TRACE=1), untimed: its steps.
shared_bytes  Bytes written to the shared directory over --bytes-steps steps: without the tier,
           a checkpoint every step (--checkpoint-every 1); with it, a local checkpoint every step and
           the drain every --drain-every steps. Counted as the sizes of the checkpoint files the run
           left (--keep-last 0: every one kept)."""
import argparse
import glob
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
p.add_argument("--train", required=True, help="h5dcp-train")
p.add_argument("--json", required=True)
p.add_argument("--mpiexec", default="mpiexec")
p.add_argument("--dir", default="/tmp/h5dcp-bench/local-tier", help="the 'shared' directories (a disk)")
p.add_argument("--local-root", default="/dev/shm/h5dcp-local-tier-bench", help="the fake nodes' local directories")
p.add_argument("--rounds", type=int, default=6, help="step cost: rounds (each runs every kind once)")
p.add_argument("--ranks", type=int, default=2, help="step cost and bytes: ranks (one fake node each)")
p.add_argument("--steps", type=int, default=30)
p.add_argument("--hidden", type=int, default=1024)
p.add_argument("--global-batch", type=int, default=2048)
p.add_argument("--micro-batches", type=int, default=4)
p.add_argument("--save-ranks", type=int, default=4)
p.add_argument("--load-ranks", type=int, default=3)
p.add_argument("--nodes", type=int, default=2, help="recovery: fake nodes (ranks spread over them in order)")
p.add_argument("--recovery-hidden", type=int, default=3072)
p.add_argument("--recovery-samples", type=int, default=3, help="recovery: samples of each kind")
p.add_argument("--no-drop", action="store_true", help="recovery: never drop the whole page cache (tests)")
p.add_argument("--bytes-steps", type=int, default=100)
p.add_argument("--drain-every", type=int, default=25)
args = p.parse_args()

os.makedirs(args.dir, exist_ok=True)
shutil.rmtree(args.local_root, ignore_errors=True)
os.makedirs(args.local_root)
openmpi = re.search(r"Open MPI|OpenRTE", subprocess.run([args.mpiexec, "--version"], capture_output=True,
                                                         text=True).stdout) is not None
wrapper = os.path.join(args.dir, "fake-node.sh")
with open(wrapper, "w") as f:
    f.write('#!/bin/sh\n# Each rank on fake node node<k>: ranks spread over H5DCP_BENCH_NODES nodes in order.\n'
            'r=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}; n=${OMPI_COMM_WORLD_SIZE:-${PMI_SIZE:-1}}\n'
            'H5DCP_NODE_NAME=node$((r * H5DCP_BENCH_NODES / n)); export H5DCP_NODE_NAME\nexec "$@"\n')
os.chmod(wrapper, 0o755)
failures = []


def train(ranks, nodes, *flags, hidden, batch, micro, trace=None, stamps=None):
    """h5dcp-train on `ranks` ranks over `nodes` fake nodes; its stdout (fails the bench on an error).
    trace: a dict that gets H5DCP_TRACE's steps, {step: [seconds worked, per occurrence, the slowest rank]}.
    stamps: a dict that gets {step: when its "step N loss" line arrived (time.monotonic())}."""
    env = dict(os.environ, H5DCP_BENCH_NODES=str(nodes), OMPI_MCA_mpi_yield_when_idle="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")  # Open MPI: more ranks than cores (the recovery's 4)
    fwd = ["-x", "H5DCP_BENCH_NODES"] if openmpi else []
    if trace is not None:
        env["H5DCP_TRACE"] = "1"
        fwd += ["-x", "H5DCP_TRACE"] if openmpi else []
    cmd = [args.mpiexec, "-n", str(ranks), *fwd, wrapper, args.train, "--hidden", str(hidden), "--global-batch",
           str(batch), "--micro-batches", str(micro), "--dataset-size", str(max(1024, batch)), *map(str, flags)]
    if stamps is None:
        r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    else:
        # Each line as it comes (rank 0 flushes after each step's line), stderr to a file.
        with tempfile.TemporaryFile("w+") as err:
            proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=err, text=True, bufsize=1)
            lines = []
            for line in proc.stdout:
                m = re.match(r"step (\d+) loss ", line)
                if m:
                    stamps[int(m.group(1))] = time.monotonic()
                lines.append(line)
            proc.wait()
            err.seek(0)
            r = subprocess.CompletedProcess(cmd, proc.returncode, "".join(lines), err.read())
    if r.returncode != 0:
        sys.exit(f"local_tier_bench: {' '.join(cmd)} failed ({r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    if trace is not None:
        seen = {}  # (rank, step) -> occurrences so far
        for m in re.finditer(r"^\[h5dcp trace\] rank (\d+) (\S+)\s+waited [\d.]+ s, worked ([\d.]+) s", r.stderr, re.M):
            rank, step, worked = int(m.group(1)), m.group(2), float(m.group(3))
            i = seen[(rank, step)] = seen.get((rank, step), -1) + 1
            column = trace.setdefault(step, [])
            column.extend([0.0] * (i + 1 - len(column)))
            column[i] = max(column[i], worked)
    return r.stdout


def losses(out):
    return {int(m.group(1)): m.group(2) for m in re.finditer(r"^step (\d+) loss (\S+)$", out, re.M)}


def field(pattern, out):
    m = re.search(pattern, out, re.M)
    if not m:
        sys.exit(f"local_tier_bench: no '{pattern}' in h5dcp-train's output:\n{out[-3000:]}")
    return m.groups()


def fresh(path):
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path


def checked(what, out, step, reference):
    """Whether the loss of `step` in a resumed run's output equals the reference run's."""
    ok = losses(out).get(step) == reference[step] and step - 1 not in losses(out)
    if not ok:
        failures.append(f"{what}: the loss of step {step} after resuming differs from the reference run's")
    return ok


# --- a. per-step cost --------------------------------------------------------------------------
model = dict(hidden=args.hidden, batch=args.global_batch, micro=args.micro_batches)
n = args.steps
print(f"== local tier, step cost: {args.ranks} ranks on {args.ranks} fake nodes, {n} steps, "
      f"--hidden {args.hidden} --global-batch {args.global_batch}, {args.rounds} rounds", flush=True)
ref_a = losses(train(args.ranks, args.ranks, "--steps", n + 1, "--checkpoint-every", 10 * n,
                     "--checkpoint-dir", fresh(os.path.join(args.dir, "ref-a")), **model))
kinds = ("none", "tier", "sync")
step_runs = {kind: [] for kind in kinds}
for rnd in range(args.rounds):
    for kind in kinds[rnd % 3:] + kinds[:rnd % 3]:
        shared = fresh(os.path.join(args.dir, f"steps-{kind}"))
        local = os.path.join(fresh(os.path.join(args.local_root, "steps")), "{node}")
        tier = ["--local-dir", local, "--local-every", 1, "--local-keep", 2] if kind != "none" else []
        flags = ["--steps", n, "--checkpoint-every", 2 * n, "--checkpoint-dir", shared, *tier]
        if kind == "sync":
            flags.append("--local-sync")
        stamps = {}
        out = train(args.ranks, args.ranks, *flags, **model, stamps=stamps)
        # Steps 2..n as the driver saw them: from one step's loss line to the next's. Each such interval
        # holds the save (if any) of the step before and the next step's compute: in "tier" one local
        # checkpoint each, in "none" none (its one save, after step n's line, falls outside them).
        intervals = [1e3 * (stamps[i] - stamps[i - 1]) for i in range(2, n + 1) if i in stamps and i - 1 in stamps]
        all_ms, saving_ms, other_ms = map(float, field(
            r"steps took ([\d.]+) ms on average: ([\d.]+) ms where a save was called or staging, ([\d.]+) ms", out))
        saves = int(field(r"^h5dcp-train: (\d+) checkpoints saved", out)[0])
        # Read back the newest checkpoint (the tier's: --local-every 2 makes step n + 1 no local step,
        # so the resumed run writes nothing to the tier; its forced last save goes to `shared`).
        back = train(args.ranks, args.ranks, "--resume", "--steps", n + 1, "--checkpoint-every", 2 * n + 2,
                     "--checkpoint-dir", shared, *(tier[:2] + ["--local-every", 2] if tier else []), **model)
        run = dict(round=rnd + 1, mean_ms=all_ms if kind != "none" else other_ms, all_ms=all_ms, saving_ms=saving_ms,
                   interval_median_ms=statistics.median(intervals), intervals_ms=intervals,
                   other_ms=other_ms, saves=saves, read_back=checked(f"step cost, {kind}", back, n + 1, ref_a),
                   resumed_from_local=bool(re.search(r"resumed from local step", back)))
        step_runs[kind].append(run)
        print(f"{kind}: {run['mean_ms']:.2f} ms per step on average, median interval {run['interval_median_ms']:.2f} ms"
              f" ({saves} saves), read back: {run['read_back']}", flush=True)
med = {k: statistics.median(r["mean_ms"] for r in v) for k, v in step_runs.items()}
med_interval = {k: statistics.median(r["interval_median_ms"] for r in v) for k, v in step_runs.items()}
# Where a local checkpoint's time goes: one more tier run, traced (H5DCP_TRACE=1), not timed.
step_trace = {}
train(args.ranks, args.ranks, "--steps", 10, "--checkpoint-every", 20, "--checkpoint-dir",
      fresh(os.path.join(args.dir, "steps-traced")), "--local-dir",
      os.path.join(fresh(os.path.join(args.local_root, "steps")), "{node}"), "--local-every", 1, **model,
      trace=step_trace)
# A local checkpoint's steps: the tier's and its plan step (the run's forced last save, to the shared
# directory, has save:* steps of its own, not a local checkpoint's).
step_trace = {k: statistics.median(v) for k, v in step_trace.items() if k.startswith("local:") or k == "save:plan"}
for kind in ("tier", "sync"):
    print(f"step cost: {kind}/none = {med[kind] / med['none']:.3f} (means), "
          f"{med_interval[kind] / med_interval['none']:.3f} (median intervals)", flush=True)

# --- b. recovery ---------------------------------------------------------------------------------
rm = dict(hidden=args.recovery_hidden, batch=8, micro=4)
k = 2  # the recovered step
print(f"== local tier, recovery: step {k} saved by {args.save_ranks} ranks, recovered by {args.load_ranks} "
      f"on {args.nodes} fake nodes, --hidden {args.recovery_hidden}", flush=True)
ref_b = losses(train(args.load_ranks, args.nodes, "--steps", k + 1, "--checkpoint-every", 10 * k,
                     "--checkpoint-dir", fresh(os.path.join(args.dir, "ref-b")), **rm))
tier_dir, shared_dir = fresh(os.path.join(args.dir, "recover-tier")), fresh(os.path.join(args.dir, "recover-shared"))
local = os.path.join(fresh(os.path.join(args.local_root, "recover")), "{node}")
train(args.save_ranks, args.nodes, "--steps", k, "--checkpoint-every", k, "--checkpoint-dir", tier_dir, "--local-dir",
      local, "--local-every", 1, "--local-keep", 2, **rm)
step_file = os.path.join(shared_dir, os.path.basename(glob.glob(os.path.join(tier_dir, "step-*.h5"))[0]))
shutil.move(glob.glob(os.path.join(tier_dir, "step-*.h5"))[0], step_file)
for f in glob.glob(os.path.join(tier_dir, "latest*")):
    os.remove(f)
tier_keep = set(os.listdir(tier_dir))
local_bytes = sum(os.path.getsize(f) for f in glob.glob(os.path.join(args.local_root, "recover", "*",
                                                                    f"local-step-*{k}", "*")))
cold = os.geteuid() == 0 and not args.no_drop


def evict():
    """sync, the page cache dropped (root), the checkpoint's pages evicted, the program's files warmed;
    the bytes of the checkpoint file still cached (fincore), if it can tell."""
    subprocess.run(["sync"], check=True)
    if cold:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
    fd = os.open(step_file, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
    subprocess.run([args.train, "--help"], capture_output=True)
    r = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES", step_file], capture_output=True,
                       text=True)
    return int(r.stdout.split()[0]) if r.returncode == 0 and r.stdout.split() else None


samples = {"local": [], "shared": []}
for i in range(args.recovery_samples):
    for kind in (("local", "shared") if i % 2 == 0 else ("shared", "local")):
        cached = evict()
        if kind == "local":
            out = train(args.load_ranks, args.nodes, "--resume", "--steps", k + 1, "--checkpoint-dir", tier_dir,
                        "--checkpoint-every", 2 * k + 2, "--local-dir", local, "--local-every", 2 * k + 2, **rm)
            m = re.search(r"resumed from local step (\d+) .* on (\d+) ranks: (\d+) bytes read", out)
            ok = bool(m) and int(m.group(1)) == k
            read = int(m.group(3)) if m else None
        else:
            out = train(args.load_ranks, args.nodes, "--resume", "--steps", k + 1, "--checkpoint-dir", shared_dir,
                        "--checkpoint-every", 2 * k + 2, **rm)
            ok = f"resumed from {step_file} (step {k}, saved by {args.save_ranks} ranks)" in out
            read = None
        if not ok:
            failures.append(f"recovery, {kind}: did not resume from step {k} as expected")
        seconds = float(field(r"--resume took ([\d.]+) s", out)[0])
        samples[kind].append(dict(seconds=seconds, cached_checkpoint_bytes=cached, bytes_read=read, resumed=ok,
                                  read_back=checked(f"recovery, {kind}", out, k + 1, ref_b)))
        print(f"{kind}: {seconds:.3f} s (checkpoint file cached: {cached} bytes)", flush=True)
        # What the sample's one step further left: its forced last save, in the shared directories only.
        for d in (tier_dir, shared_dir):
            for f in os.listdir(d):
                if os.path.join(d, f) != step_file and not (d == tier_dir and f in tier_keep):
                    path = os.path.join(d, f)
                    shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)
rec = {k2: statistics.median(s["seconds"] for s in v) for k2, v in samples.items()}
# Where the local recovery's time goes: one more, traced, not timed (and warm: after the samples).
recovery_trace = {}
train(args.load_ranks, args.nodes, "--resume", "--steps", k, "--checkpoint-dir", tier_dir, "--checkpoint-every",
      2 * k + 2, "--local-dir", local, "--local-every", 2 * k + 2, **rm, trace=recovery_trace)
recovery_trace = {k2: sum(v) for k2, v in recovery_trace.items() if k2.startswith(("local:", "load:"))}
print(f"recovery: shared/local = {rec['shared'] / rec['local']:.2f}", flush=True)

# --- c. bytes written to the shared directory ----------------------------------------------------
print(f"== local tier, shared bytes: {args.bytes_steps} steps", flush=True)
written = {}
for kind in ("none", "tier"):
    shared = fresh(os.path.join(args.dir, f"bytes-{kind}"))
    tier = (["--local-dir", os.path.join(fresh(os.path.join(args.local_root, "bytes")), "{node}"), "--local-every", 1]
            if kind == "tier" else [])
    out = train(args.ranks, args.ranks, "--steps", args.bytes_steps, "--checkpoint-dir", shared, "--keep-last", 0,
                "--checkpoint-every", args.drain_every if kind == "tier" else 1, *tier, **model)
    files = glob.glob(os.path.join(shared, "step-*.h5"))
    written[kind] = dict(bytes=sum(os.path.getsize(f) for f in files), files=len(files),
                         checkpoint_every=args.drain_every if kind == "tier" else 1,
                         steps_ms=float(field(r"steps took ([\d.]+) ms on average", out)[0]))
    print(f"{kind}: {written[kind]['files']} checkpoints, {written[kind]['bytes']} bytes", flush=True)
shutil.rmtree(args.local_root, ignore_errors=True)

fs = subprocess.run(["findmnt", "-no", "SOURCE,FSTYPE", "-T", args.dir], capture_output=True, text=True).stdout.split()
result = dict(
    ok=not failures, failures=failures, ranks=args.ranks, shared_fs=" ".join(fs),
    step_cost=dict(steps=n, hidden=args.hidden, global_batch=args.global_batch, micro_batches=args.micro_batches,
                   rounds=args.rounds, runs=step_runs, median_ms=med, median_interval_ms=med_interval,
                   traced_seconds=step_trace),
    recovery=dict(step=k, save_ranks=args.save_ranks, load_ranks=args.load_ranks, nodes=args.nodes,
                  hidden=args.recovery_hidden, checkpoint_bytes=os.path.getsize(step_file),
                  local_step_bytes=local_bytes, cold=cold, samples=samples, median_seconds=rec,
                  traced_seconds=recovery_trace),
    shared_bytes=dict(steps=args.bytes_steps, runs=written),
)
with open(args.json, "w") as f:
    json.dump(result, f, indent=1)
print(f"wrote {args.json}" + ("" if not failures else f"; FAILED: {failures}"))
sys.exit(1 if failures else 0)
