"""PEER benchmark: PyTorch's own torch.distributed.checkpoint (DCP), run for
comparison. This is NOT h5dcp: nothing of the project is imported or timed
here. scripts/bench.sh runs it beside bench/h5dcp-bench, on the same data and
the same disk, and bench/performance_report.py compares the two.

    mpiexec -n RANKS python bench/dcp_peer_bench.py --dir DIR --gib GIB --reps REPS \
        --json OUT.json [--threads auto|each|N] [--no-cold] [--small-count N --small-kib K] [--port P]
        [--save-only | --load-only | --transformer-only | --async-only]

The data is h5dcp-bench's: 4 float32 tensors [rows, 4096] totalling GIB GiB,
row-sharded over the ranks (here as DTensors, Shard(0)), value row + i * 1e6
in tensor i, so that every load is checked bit for bit. Cases:
  save           dcp.save with FileSystemWriter(thread_count=N, sync_files=True,
                 single_file_per_rank=True), until every rank has returned
  load           dcp.load into zeroed DTensors of the same sharding
  reshard        dcp.load with every rank loading another rank's rows (rank r
                 gets rank (r + 1) % world's: h5dcp-bench's "rank shift")
  load_cold, reshard_cold
                 the same with the page cache dropped just before (root; not
                 with --no-cold)
  small_save, small_load, small_load_cold
                 h5dcp-bench's small-tensor case: N plain tensors of K KiB
                 (float32, tensor i filled with i), the same on every rank
                 (replicated: DCP's planner writes each once), saved, then
                 loaded on every rank, warm and cold
  transformer_save, transformer_load, transformer_load_cold
                 h5dcp-bench's real model shape (bench/bench_transformer.hpp): a
                 GPT-like transformer's state dict with AdamW state, every
                 parameter and moment a DTensor Shard(0), each step a replicated
                 0-d tensor; saved, then loaded warm and cold
  async_blocking dcp.async_save, until the call returns (slowest rank)
  async_total    dcp.async_save, until every rank's future has its result
With --device cuda the tensors live on each rank's GPU (ranks may share one;
the process group stays gloo), only the cases save, load, reshard (warm and
cold) and the async ones run, and async_save runs both ways DCP offers for
GPUs, as its users run them:
  async_blocking, async_total
                 FileSystemWriter(cache_staged_state_dict=True), ONE writer
                 for every save (its pinned staging memory is cached in the
                 writer object): staging in the call, as h5dcp's async_save
  async_bg_blocking, async_bg_staged, async_bg_total
                 a DefaultStager with pinned memory, non-blocking copies and
                 staging in the background (PyTorch's "zero-overhead"
                 checkpointing), as h5dcp's async_stage_and_save: the call,
                 from the call until the staging copy is done, until durable
                 (slowest rank each)
On torch <= 2.12 every async save gets a fresh DefaultStager: one reused
across async_save calls fails on 2.11 (pytorch/pytorch#183413); from 2.13 on
one stager serves every save. Each case records in the JSON what kind of event it
times ("event"), so that a report compares only events of the same kind.
Every case runs once untimed first (the warm-up repetition, in these same
processes), then REPS timed repetitions. Before every timed case, untimed:
the old output is removed and every rank calls os.sync() (a settled disk, as
h5dcp-bench gives its own cases); before each cold load rank 0 also drops
the page cache. With --threads auto the writer's thread_count
is chosen by a short trial of 1, 2 and 4 threads first (recorded in the JSON).
With --async-only only the async save staged in the call runs (async_blocking,
async_total), each read back, without the wait for free page reporting that
the main run makes before it: bench.sh's rounds of saves until durable time it
in the position of h5dcp-bench --async-only and --save-only, right after a
settled disk.
With --save-only --threads each, every repetition saves once with each of
1, 2 and 4 threads instead (cases save@1, save@2, save@4, in an order that
turns from one repetition to the next, each save read back): bench.sh runs
that in every round of its alternated saves, so that the peer is tuned on
as many samples as it is timed on, and the report takes the best count.
"""
import argparse
import json
import os
import re
import resource
import shutil
import statistics
import sys
import time

for ours, ompi in (("RANK", "OMPI_COMM_WORLD_RANK"), ("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE"),
                   ("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK")):
    if ours not in os.environ and ompi in os.environ:
        os.environ[ours] = os.environ[ompi]

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.distributed.checkpoint as dcp  # noqa: E402
from torch.distributed.checkpoint import FileSystemReader, FileSystemWriter  # noqa: E402
from torch.distributed.checkpoint.default_planner import DefaultSavePlanner  # noqa: E402
from torch.distributed.checkpoint.staging import DefaultStager, StagingOptions  # noqa: E402
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh  # noqa: E402
from torch.distributed.tensor import DTensor, Shard  # noqa: E402

TENSORS, COLS = 4, 4096
THREAD_CANDIDATES = (1, 2, 4)

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--dir", required=True, help="scratch directory for the checkpoints (removed at the end)")
parser.add_argument("--gib", type=float, default=1.0)
parser.add_argument("--reps", type=int, default=5)
parser.add_argument("--json", required=True)
parser.add_argument("--threads", default="auto",
                    help="FileSystemWriter thread_count, 'auto' (trial of 1, 2, 4) or, with --save-only, "
                         "'each' (every count in every repetition)")
parser.add_argument("--trial-reps", type=int, default=2, help="timed saves per thread_count in the auto trial")
parser.add_argument("--no-cold", action="store_true", help="no cold loads (they drop the page cache: root)")
parser.add_argument("--small-count", type=int, default=5000, help="tensors of the small-tensor case (0: none)")
parser.add_argument("--small-kib", type=int, default=16)
parser.add_argument("--transformer-layers", type=int, default=24, help="0: no transformer case")
parser.add_argument("--transformer-hidden", type=int, default=1024)
parser.add_argument("--transformer-vocab", type=int, default=16384)
parser.add_argument("--transformer-only", action="store_true",
                    help="only the transformer case (bench.sh alternates it with h5dcp-bench's)")
parser.add_argument("--save-only", action="store_true",
                    help="only the save, read back and checked after each repetition, untimed (bench.sh "
                         "alternates it with h5dcp-bench --save-only)")
parser.add_argument("--load-only", action="store_true",
                    help="only the loads (warm and cold, same and resharded), each repetition after an untimed "
                         "save (bench.sh alternates them with h5dcp-bench --load-only)")
parser.add_argument("--async-only", action="store_true",
                    help="only the async save, staged in the call (bench.sh times it against h5dcp's saves until "
                         "durable)")
parser.add_argument("--port", default=os.environ.get("MASTER_PORT", "29517"))
parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"), help="where the tensors live")
args = parser.parse_args()
if args.reps < 1:
    parser.error("--reps must be at least 1")
each_count = args.threads == "each"
if each_count and not args.save_only:
    parser.error("--threads each goes with --save-only")
if sum(map(bool, (args.async_only, args.save_only, args.load_only, args.transformer_only))) > 1:
    parser.error("--save-only, --load-only, --transformer-only and --async-only go alone")
on_gpu = args.device == "cuda"
if on_gpu and (args.small_count or args.transformer_layers):
    parser.error("--device cuda runs the large-tensor cases only: pass --small-count 0 --transformer-layers 0")
os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ["MASTER_PORT"] = str(args.port)

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
# h5dcp-bench pins one ATen thread per rank; so does its peer.
torch.set_num_threads(1)
# Cold loads where the page cache can be dropped (rank 0's answer, for all).
can_drop = torch.tensor([1 if os.access("/proc/sys/vm/drop_caches", os.W_OK) else 0])
dist.broadcast(can_drop, 0)
cold = not args.no_cold and bool(can_drop.item())

if on_gpu:
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
device = torch.device("cuda", torch.cuda.current_device()) if on_gpu else torch.device("cpu")

rows = int(args.gib * 2**30 / 4 / TENSORS / COLS)
rows -= rows % world
if rows == 0:
    sys.exit("dcp_peer_bench: --gib too small for this many ranks")
per_rank = rows // world
nbytes = TENSORS * rows * COLS * 4

mesh = init_device_mesh(device.type, (world,))
# Rank r holds block (r + 1) % world: mesh position c belongs to rank (c - 1) % world.
shifted_mesh = DeviceMesh(device.type, torch.tensor([(c - 1) % world for c in range(world)])) if world > 1 else mesh
# async_save runs its collectives from a background thread; PyTorch's async
# checkpointing recipe gives them a process group of their own (gloo: on CPU)
# so that they cannot interleave with the caller's.
async_group = dist.new_group(backend="gloo")


def block(owner, i, fill):
    """Tensor i's rows held by mesh position `owner`, h5dcp-bench's values (row + i * 1e6)."""
    if not fill:
        return torch.zeros(per_rank, COLS, dtype=torch.float32, device=device)
    return (torch.arange(per_rank, dtype=torch.float32, device=device).unsqueeze(1) + owner * per_rank
            + i * 1e6).expand(per_rank, COLS).contiguous()


def state(m, fill):
    owner = m.get_coordinate()[0]
    return {f"layer{i}.weight": DTensor.from_local(block(owner, i, fill), m, [Shard(0)], run_check=False,
                                                  shape=torch.Size((rows, COLS)), stride=(COLS, 1))
            for i in range(TENSORS)}


def reduced(value, op=dist.ReduceOp.SUM):
    """`value` reduced over the ranks with `op`."""
    t = torch.tensor([value], dtype=torch.float64)
    dist.all_reduce(t, op=op)
    return t.item()


def all_ok(ok):
    return reduced(1 if ok else 0, dist.ReduceOp.MIN) == 1


def slowest(seconds):
    return reduced(seconds, dist.ReduceOp.MAX)


def check(sd, m):
    owner = m.get_coordinate()[0]
    return all_ok(all(torch.equal(sd[f"layer{i}.weight"].to_local(), block(owner, i, True)) for i in range(TENSORS)))


def settle(path=None):
    """Untimed, before every timed case: old output gone, the disk idle."""
    dist.barrier()
    if path and rank == 0:
        shutil.rmtree(path, ignore_errors=True)
    dist.barrier()
    os.sync()
    dist.barrier()


def drop_caches():
    dist.barrier()
    if rank == 0:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
    dist.barrier()


def timed(fn):
    """Wall time from a barrier until every rank has returned (and its GPU
    work is done)."""
    dist.barrier()
    t0 = time.perf_counter()
    fn()
    if on_gpu:
        torch.cuda.synchronize()
    dist.barrier()
    return time.perf_counter() - t0


def read_or_none(path, parse):
    """parse(the text of `path`), or None where this kernel has no such file or it reads otherwise."""
    try:
        with open(path) as f:
            return parse(f.read())
    except (OSError, IndexError, ValueError, StopIteration):
        return None


def psi_total(text, kind):
    """The total stall time (seconds) of the `kind` line ("some" or "full") of a /proc/pressure file."""
    words = next(line.split() for line in text.splitlines() if line.split()[:1] == [kind])
    return int(next(w for w in words if w.startswith("total="))[6:]) / 1e6


def disk_counters(text):
    """The block device's write counters from its stat file (sectors of 512 bytes, ticks in ms)."""
    d = [int(x) for x in text.split()]
    return {"disk_write_bytes": d[6] * 512, "disk_writes": d[4], "disk_write_seconds": d[7] / 1e3}


PAGE_REPORTING = "/sys/module/page_reporting/parameters/"


def reported_kib():
    """The free memory this kernel has reported to its host so far, KiB; None where it does not count it."""
    return read_or_none(PAGE_REPORTING + "reported_kib", int)


def machine_counters(device_stat):
    """The system's counters now, as h5dcp-bench reads them (bench/bench_conditions.hpp): steal
    (/proc/stat), pressure stall totals (/proc/pressure), the block device's writes, the free memory
    reported to the host (free page reporting); None where this kernel has no such counter."""
    kib = reported_kib()
    return {"steal": read_or_none("/proc/stat", lambda t: int(t.split()[8]) / os.sysconf("SC_CLK_TCK")),
            "cpu_some": read_or_none("/proc/pressure/cpu", lambda t: psi_total(t, "some")),
            "io_full": read_or_none("/proc/pressure/io", lambda t: psi_total(t, "full")),
            **(read_or_none(device_stat, disk_counters)
               or dict.fromkeys(("disk_write_bytes", "disk_writes", "disk_write_seconds"))),
            "host_reported_bytes": None if kib is None else kib * 1024}


# As h5dcp-bench's settle_page_reporting: quiet 2.5 s and limit 45 s unless
# H5DCP_BENCH_SETTLE_LIMIT sets the limit (the quiet time then at most the limit);
# at most SETTLE_ALLOWANCE_MIB handed to the host within the quiet time counts as quiet.
SETTLE_LIMIT = float(os.environ.get("H5DCP_BENCH_SETTLE_LIMIT", "45"))
SETTLE_QUIET = min(2.5, SETTLE_LIMIT)
SETTLE_ALLOWANCE_MIB = 32


def settle_page_reporting(quiet=SETTLE_QUIET, limit=SETTLE_LIMIT):
    """Untimed, before the async call, as h5dcp-bench does before its bare copy and its call: rank 0
    waits until this VM's kernel has stopped handing freed memory to its host (its counter grown by
    at most SETTLE_ALLOWANCE_MIB over the last `quiet` seconds, at most `limit` seconds in all),
    every rank waits for it. Returns the seconds waited."""
    waited = 0.0
    first = reported_kib() if rank == 0 else None
    if first is not None:
        start = time.perf_counter()
        samples = [(0.0, first)]  # (seconds since start, counter) every 100 ms
        while True:
            at = time.perf_counter() - start
            if at >= limit:
                break
            if at >= quiet:
                old = next((s for s in reversed(samples) if s[0] <= at - quiet), None)
                if old is not None and samples[-1][1] - old[1] <= SETTLE_ALLOWANCE_MIB * 1024:
                    break
            time.sleep(0.1)
            samples.append((time.perf_counter() - start, reported_kib()))
        waited = time.perf_counter() - start
    dist.barrier()
    return waited


def page_reporting_orders():
    """(the smallest order of the free blocks this kernel reports to its host, the largest order
    its page allocator has), as h5dcp-bench records them; -1 where unknown. Reporting is paused
    while the first is above the second."""
    order = read_or_none(PAGE_REPORTING + "page_reporting_order", int)
    largest = read_or_none("/proc/buddyinfo", lambda t: len(t.split("\n")[0].split()) - 5)
    return -1 if order is None else order, -1 if largest is None else largest


def device_stat_path(directory):
    st = os.stat(directory)
    return f"/sys/dev/block/{os.major(st.st_dev)}:{os.minor(st.st_dev)}/stat"


def cpu_seconds():
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


def watched(fn):
    """timed(fn), and what the machine did meanwhile (rank 0's reading of the system's counters,
    the CPU time every rank used, summed), as h5dcp-bench records it: (seconds, conditions)."""
    dist.barrier()
    cpu0 = cpu_seconds()
    before = machine_counters(device_stat) if rank == 0 else None
    t = timed(fn)
    after = machine_counters(device_stat) if rank == 0 else None
    c = {"seconds": t, "ranks_cpu": reduced(cpu_seconds() - cpu0)}
    if rank == 0:
        c.update({k: None if before[k] is None or after[k] is None else after[k] - before[k] for k in before})
    return t, c


def writer(path, threads, **kw):
    return FileSystemWriter(path, thread_count=threads, sync_files=True, single_file_per_rank=True, **kw)


saved = state(mesh, True)
save_path, async_path = os.path.join(args.dir, "dcp"), os.path.join(args.dir, "dcp-async")
if rank == 0:
    os.makedirs(args.dir, exist_ok=True)
dist.barrier()
device_stat = device_stat_path(args.dir)
conditions = {}  # case -> [what the machine did during each timed repetition]

trial = None
if args.threads == "auto":
    trial = {"candidates": list(THREAD_CANDIDATES), "warmup_reps": 1, "reps": args.trial_reps, "seconds": {}}
    for n in THREAD_CANDIDATES:
        times = []
        for rep in range(1 + args.trial_reps):
            settle(save_path)
            t = timed(lambda: dcp.save(saved, storage_writer=writer(save_path, n)))
            if rep > 0:
                times.append(t)
        trial["seconds"][str(n)] = times
    threads = min(THREAD_CANDIDATES, key=lambda n: statistics.median(trial["seconds"][str(n)]))
    trial["chosen"] = threads
elif each_count:
    threads = None  # every candidate, in every repetition
else:
    threads = int(args.threads)

# DCP's DefaultStager caches its staging copy, so DCP's users keep one stager
# for every async save and its memory is allocated once (by the warm-up) and
# reused, as h5dcp's staging memory is; up to torch 2.12 a fresh one per save
# (pytorch/pytorch#183413: the module's docstring). On the CPU it stages in the
# call (pinned memory, a staging thread and non-blocking copies need an
# accelerator); on a GPU in the background, DCP's recipe for overlapping the
# copy with training.
TORCH_MINOR = tuple(int(x) for x in re.match(r"(\d+)\.(\d+)", torch.__version__).groups())
STAGER_PER_SAVE = TORCH_MINOR <= (2, 12)
STAGER_BUG = "https://github.com/pytorch/pytorch/issues/183413"
stager_options = StagingOptions(use_pinned_memory=on_gpu, use_shared_memory=False,
                                use_async_staging=on_gpu, use_non_blocking_copy=on_gpu)
async_stager = None if STAGER_PER_SAVE else DefaultStager(stager_options)
# DCP's other GPU path: FileSystemWriter stages into pinned memory in the call
# and caches it in the writer object, so ONE writer serves every save (a new
# writer per save would allocate and pin the whole state again each time). It
# makes its directory again on every save (prepare_local_plan).
cached_writer = writer(async_path, threads or 1, cache_staged_state_dict=True) \
    if on_gpu else None

small_elems = args.small_kib * 1024 // 4


def small_state(fill):
    return {f"t{i}": torch.full((small_elems,), float(i)) if fill else torch.zeros(small_elems)
            for i in range(args.small_count)}


def small_check(sd):
    return all_ok(all(torch.equal(v, torch.full((small_elems,), float(k[1:]))) for k, v in sd.items()))


def transformer_parameters():
    """bench/bench_transformer.cpp's parameters, names and global shapes, in its order."""
    h, layers = args.transformer_hidden, args.transformer_layers
    params = [("embed.weight", (args.transformer_vocab, h)), ("pos.weight", (1024, h))]
    for layer in range(layers):
        for name, shape in (("ln1.weight", (h,)), ("ln1.bias", (h,)), ("attn.qkv.weight", (3 * h, h)),
                            ("attn.qkv.bias", (3 * h,)), ("attn.proj.weight", (h, h)), ("attn.proj.bias", (h,)),
                            ("ln2.weight", (h,)), ("ln2.bias", (h,)), ("mlp.fc1.weight", (4 * h, h)),
                            ("mlp.fc1.bias", (4 * h,)), ("mlp.fc2.weight", (h, 4 * h)), ("mlp.fc2.bias", (h,))):
            params.append((f"layers.{layer}.{name}", shape))
    return params + [("ln_f.weight", (h,)), ("ln_f.bias", (h,))]


def transformer_block(shape, k, fill):
    """This rank's dim-0 block of tensor number k: element [r, ...] holds r + k * 16384."""
    rows = shape[0] // world
    local = (rows,) + tuple(shape[1:])
    if not fill:
        return torch.zeros(local)
    values = torch.arange(rows, dtype=torch.float32) + float(rank * rows + k * 16384)
    return values if len(shape) == 1 else values.unsqueeze(1).expand(local).contiguous()


def transformer_state(fill):
    """The model and its AdamW state: parameter n holds tensor 3n, its moments tensors 3n + 1 and 3n + 2."""
    def dt(shape, k):
        return DTensor.from_local(transformer_block(shape, k, fill), mesh, [Shard(0)], run_check=False,
                                  shape=torch.Size(shape), stride=torch.empty(shape, device="meta").stride())
    model, optim = {}, {}
    for n, (name, shape) in enumerate(transformer_parameters()):
        model[name] = dt(shape, 3 * n)
        optim[name] = {"exp_avg": dt(shape, 3 * n + 1), "exp_avg_sq": dt(shape, 3 * n + 2),
                       "step": torch.tensor(100.0 if fill else 0.0)}
    return {"model": model, "optim": {"state": optim}}


def transformer_check(sd):
    good = True
    for n, (name, shape) in enumerate(transformer_parameters()):
        moments = sd["optim"]["state"][name]
        for k, t in enumerate((sd["model"][name], moments["exp_avg"], moments["exp_avg_sq"]), 3 * n):
            good &= torch.equal(t.to_local(), transformer_block(shape, k, True))
        good &= moments["step"].item() == 100.0
    return all_ok(good)


def transformer_bytes():
    return sum(3 * 4 * torch.Size(shape).numel() + 4 for _, shape in transformer_parameters())


small = small_state(True)
small_path = os.path.join(args.dir, "dcp-small")


def timed_load(path, make_target, check_target, cold):
    """A timed dcp.load of `path` into make_target() from a settled disk (the page cache dropped first
    where `cold`), the target checked untimed and freed before the next case: (seconds, whether every
    rank's target holds the values)."""
    target = make_target()
    settle()
    if cold:
        drop_caches()
    t = timed(lambda: dcp.load(target, storage_reader=FileSystemReader(path)))
    return t, check_target(target)


def read_back(path):
    """Whether `path` holds the saved values, on every rank: an untimed load, checked."""
    target = state(mesh, False)
    dcp.load(target, storage_reader=FileSystemReader(path))
    return check(target, mesh)


def save_then_load(name, state_dict, path, make_target, check_target, keep):
    """Cases NAME_save, then NAME_load and NAME_load_cold (those in `cases`):
    a timed save from a settled disk, then timed loads into fresh targets,
    each checked (a failed load fails the save's check too)."""
    settle(path)
    t, c = watched(lambda: dcp.save(state_dict, storage_writer=writer(path, threads)))
    if keep:
        seconds[f"{name}_save"].append(t)
        conditions.setdefault(f"{name}_save", []).append(c)
    for case in (f"{name}_load", f"{name}_load_cold"):
        if case not in cases:
            continue
        t, good = timed_load(path, lambda: make_target(False), check_target, case.endswith("_cold"))
        ok[case] &= good
        ok[f"{name}_save"] &= good
        if keep:
            seconds[case].append(t)


only = args.transformer_only or args.save_only or args.async_only or args.load_only
cases = [] if args.transformer_only else [f"save@{n}" for n in THREAD_CANDIDATES] if each_count else \
    ["save"] if args.save_only else ["async_blocking", "async_total"] if args.async_only else \
    ["load", "reshard"] + (["load_cold", "reshard_cold"] if cold else []) if args.load_only else \
    ["save", "load", "reshard", "async_blocking", "async_total"] + \
    (["async_bg_blocking", "async_bg_staged", "async_bg_total"] if on_gpu else [])
if cold and not only:
    cases += ["load_cold", "reshard_cold"]
if args.small_count and not only:
    cases += ["small_save", "small_load"] + (["small_load_cold"] if cold else [])
transformer = transformer_state(True) if args.transformer_layers and not (args.save_only or args.async_only or
                                                                          args.load_only) else None
transformer_path = os.path.join(args.dir, "dcp-transformer")
if transformer:
    cases += ["transformer_save", "transformer_load"] + (["transformer_load_cold"] if cold else [])
seconds = {c: [] for c in cases}


def event(case):
    """What a case times, so that a report compares only the same kind of event (the calls: staging
    where the async save's stager, or cached writer, puts it)."""
    return {"async_blocking": "the call, staging in it", "async_bg_blocking": "the call, staging in the background",
            "async_bg_staged": "until staged in the background"}.get(case) or \
        ("until durable" if case.split("@")[0].endswith(("save", "_total")) else "until loaded")


def one_async(background, main_run=True):
    """One async save from a settled disk, timed, then read back untimed: (the call, until
    staged, until durable; slowest rank each), the wait for page reporting, whether it read
    back equal. background: DCP's GPU staging in the background (a DefaultStager); else
    staging in the call (on a GPU the one cached writer, on the CPU the stager). main_run
    False (--async-only): right after the settled disk, as h5dcp-bench --async-only times
    its own, without the wait for page reporting and the shards' writes in place."""
    settle(async_path)
    uses_stager = background or not on_gpu
    # A fresh stager per save where a reused one fails (pytorch/pytorch#183413); made and
    # closed outside the timing, as its constructor only starts a thread pool.
    stager = (DefaultStager(stager_options) if STAGER_PER_SAVE else async_stager) if uses_stager else None
    where = dict(storage_writer=writer(async_path, threads), async_stager=stager) if uses_stager \
        else dict(storage_writer=cached_writer)
    settled = settle_page_reporting() if main_run else 0.0
    # The shards written in place, untimed, as a training step writes them right
    # before a checkpoint (times 1: the same bits), as h5dcp-bench does before its call.
    with torch.no_grad():
        for value in saved.values() if main_run else ():
            value.to_local().mul_(1)
    times = [0.0, 0.0]  # the call, until staged

    def run():
        t0 = time.perf_counter()
        # DCP's plan caching (cached across planners), as h5dcp-bench's async saves reuse their plan.
        planner = DefaultSavePlanner(enable_plan_caching=True)
        response = dcp.async_save(saved, planner=planner, process_group=async_group, **where)
        times[0] = time.perf_counter() - t0
        if hasattr(response, "staging_completion"):  # an AsyncSaveResponse: staging in the background
            response.staging_completion.result()
            times[1] = time.perf_counter() - t0
            response = response.upload_completion
        else:
            times[1] = times[0]
        response.result()

    try:
        total = timed(run)
    finally:
        if stager is not None and STAGER_PER_SAVE:
            stager.close()
    return slowest(times[0]), slowest(times[1]), total, settled, read_back(async_path)


reporting_settled = []  # seconds waited for free page reporting to settle, before each timed async call
ok = {c: True for c in cases}
gpu_staging_error = None  # why DCP's background staging could not be measured
for rep in range(1 + args.reps):
    keep = rep > 0  # repetition 0 is the untimed warm-up
    if args.transformer_only:
        save_then_load("transformer", transformer, transformer_path, transformer_state, transformer_check, keep)
        settle(transformer_path)
        continue

    if args.async_only:
        call, _, total, _, good = one_async(background=False, main_run=False)
        ok["async_blocking"] &= good
        ok["async_total"] &= good
        if keep:
            seconds["async_blocking"].append(call)
            seconds["async_total"].append(total)
        settle(async_path)  # not left for the next process of the round
        continue

    if each_count:
        # Every thread count once, the first one turning with the repetition.
        turn = rep % len(THREAD_CANDIDATES)
        for n in THREAD_CANDIDATES[turn:] + THREAD_CANDIDATES[:turn]:
            settle(save_path)
            t, c = watched(lambda: dcp.save(saved, storage_writer=writer(save_path, n)))
            if keep:
                seconds[f"save@{n}"].append(t)
                conditions.setdefault(f"save@{n}", []).append(c)
            ok[f"save@{n}"] &= read_back(save_path)
        continue

    settle(save_path)
    t, c = watched(lambda: dcp.save(saved, storage_writer=writer(save_path, threads)))
    if keep and not args.load_only:  # --load-only: the save only makes what the loads read
        seconds["save"].append(t)
        conditions.setdefault("save", []).append(c)
    if args.save_only:
        # Every save read back untimed, as h5dcp-bench --save-only reads back each of its own.
        ok["save"] &= read_back(save_path)
        continue

    for case, m in (("load", mesh), ("reshard", shifted_mesh), ("load_cold", mesh), ("reshard_cold", shifted_mesh)):
        if case not in cases:
            continue
        t, good = timed_load(save_path, lambda: state(m, False), lambda sd: check(sd, m), case.endswith("_cold"))
        ok[case] &= good
        if case == "load" and "save" in ok:
            ok["save"] &= good  # the save is checked by reading it back
        if keep:
            seconds[case].append(t)
    if args.load_only:
        continue

    if args.small_count:
        save_then_load("small", small, small_path, small_state, small_check, keep)
    if transformer:
        save_then_load("transformer", transformer, transformer_path, transformer_state, transformer_check, keep)
        settle(transformer_path)  # not left for the next case

    if "async_bg_blocking" in cases:
        failed = None
        try:
            result = one_async(background=True)
        except Exception as e:  # noqa: BLE001 -- any failure of DCP's own background staging
            failed = f"{type(e).__name__}: {e}"
        if not all_ok(failed is None):
            # Recorded, and its cases left out: the staging in the call is still measured.
            gpu_staging_error = failed or "failed on another rank"
            cases = [c for c in cases if not c.startswith("async_bg_")]
            settle(async_path)
        elif keep:
            call, staged, total, settled, good = result
            for case, value in (("async_bg_blocking", call), ("async_bg_staged", staged), ("async_bg_total", total)):
                seconds[case].append(value)
                ok[case] &= good
            reporting_settled.append(settled)
    call, _, total, settled, good = one_async(background=False)
    ok["async_blocking"] &= good
    ok["async_total"] &= good
    if keep:
        seconds["async_blocking"].append(call)
        seconds["async_total"].append(total)
        reporting_settled.append(settled)

if async_stager is not None:
    async_stager.close()
on_disk = sum(os.path.getsize(os.path.join(save_path, f)) for f in os.listdir(save_path)) \
    if rank == 0 and os.path.isdir(save_path) else 0
for path in (save_path, async_path, small_path):
    settle(path)
if rank == 0:
    reporting_order, largest_order = page_reporting_orders()
    result = {
        "benchmark": "peer: PyTorch's torch.distributed.checkpoint (DCP), not h5dcp",
        "script": "bench/dcp_peer_bench.py",
        "torch_version": torch.__version__,
        "device": torch.cuda.get_device_name(device) if on_gpu else "cpu",
        "ranks": world,
        "tensors": TENSORS,
        "rows": rows,
        "cols": COLS,
        "dtype": "float32",
        "bytes": nbytes,
        "gb": nbytes / 1e9,
        "checkpoint_bytes_on_disk": on_disk,
        "reps": args.reps,
        "warmup_reps": 1,
        "warmup": "every case once, untimed, before the timed repetitions, in the same processes",
        "settled_disk": "before every timed case: old output removed and os.sync() on every rank, untimed",
        "cold": cold,
        "page_reporting_order": reporting_order,
        "reporting_settle_bounds": [SETTLE_QUIET, SETTLE_LIMIT],
        "reporting_settle_allowance_mib": SETTLE_ALLOWANCE_MIB,
        "reporting_settled_seconds": reporting_settled,
        "largest_page_order": largest_order,
        "drop_caches": "before each *_cold case only, by rank 0 after os.sync()" if cold else "never",
        "small_count": args.small_count,
        "small_kib": args.small_kib,
        "small_gb": args.small_count * small_elems * 4 / 1e9,
        "transformer": {"shape": f"{args.transformer_layers} layers, hidden {args.transformer_hidden}, "
                                 f"vocab {args.transformer_vocab}",
                        "tensors": 4 * len(transformer_parameters()), "bytes": transformer_bytes()}
        if transformer else None,
        "aten_threads": torch.get_num_threads(),
        "writer": {"class": "FileSystemWriter",
                   "thread_count": threads if threads else f"each of {list(THREAD_CANDIDATES)}", "sync_files": True,
                   "single_file_per_rank": True},
        "thread_count": threads,
        "thread_count_trial": trial,
        "async": {"api": "torch.distributed.checkpoint.async_save",
                  "async_checkpointer_type": "thread (the default)",
                  "process_group": "a gloo group of its own",
                  "planner": "DefaultSavePlanner(enable_plan_caching=True)",
                  "async_stager": ("DefaultStager(StagingOptions(use_pinned_memory, use_async_staging, "
                                   "use_non_blocking_copy: True; use_shared_memory: False))" if on_gpu else
                                   "DefaultStager(StagingOptions(all False))") +
                                  (", a fresh one for every save (made and closed outside the timing), so "
                                   "every save allocates its staging memory anew: the workaround for "
                                   f"pytorch/pytorch#183413 ({STAGER_BUG})" if STAGER_PER_SAVE else
                                   ", one for all saves: staging memory allocated once (warm-up) and reused"),
                  "gpu_staging": {"async_*": "in the call (the cached writer)",
                                  "async_bg_*": "in the background (the DefaultStager)"
                                  if gpu_staging_error is None else "not measured: it failed"} if on_gpu else None,
                  # Only where they apply, so that the CPU run's description (which
                  # bench/performance_report.py prints whole) stays as it was.
                  **({"stager_workaround": {
                      "what": "a fresh DefaultStager for every async_save",
                      "why": "a DefaultStager reused across async_save calls fails on torch 2.11 "
                             "(KeyError: <class 'type'>), a regression fixed later; the peer takes this "
                             "workaround on every torch up to 2.12",
                      "issue": STAGER_BUG}} if STAGER_PER_SAVE else {}),
                  **({"cached_writer": "FileSystemWriter(cache_staged_state_dict=True), one writer for all saves: "
                                      "its pinned staging memory allocated once (warm-up) and reused"}
                     if on_gpu else {}),
                  "background_staging_error": gpu_staging_error},
        "reshard": "rank r loads the rows of rank (r + 1) % world (DTensor Shard(0) on a permuted mesh)"
                   if world > 1 else "one rank: same as load",
        # Marks this peer as the one of issue 47 (DCP run as its users run it, every case's kind of
        # event recorded): bench/gpu_report.py compares DCP with h5dcp only in results from it.
        "peer_revision": 2,
        "cases": {c: {"seconds": seconds[c], "ok": ok[c], "event": event(c),
                      "bytes": transformer_bytes() if c.startswith("transformer") else nbytes
                      if not c.startswith("small") else
                      args.small_count * small_elems * 4 * (world if c.startswith("small_load") else 1)}
                  for c in cases},
        "median_seconds": {c: statistics.median(seconds[c]) for c in cases},
        "conditions": conditions,
        "ok": all(ok.values()),
    }
    with open(args.json, "w") as f:
        json.dump(result, f, indent=2)
    g = nbytes / 1e9
    print(f"dcp_peer_bench (PEER, PyTorch {torch.__version__} DCP): {world} ranks, {TENSORS} x [{rows}, {COLS}] "
          f"float32 = {g:.3f} GB, {args.reps} reps after 1 warm-up, "
          f"thread_count {threads or 'each of ' + str(list(THREAD_CANDIDATES))}, "
          f"{'loads warm and cold (page cache dropped)' if cold else 'loads warm only'}")
    for c in cases:
        med = result["median_seconds"][c]
        size = result["cases"][c]["bytes"] / 1e9
        rate = f"{size / med:10.3f} GB/s" if event(c) in ("until durable", "until loaded") else f"{'':15}"
        print(f"{c:16} {med:10.3f} s {rate}  ok={ok[c]}")
dist.barrier()
dist.destroy_process_group()
sys.exit(0 if all(ok.values()) else 1)
