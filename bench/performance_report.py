"""Writes docs/PERFORMANCE.md (and a PNG) from one run of scripts/bench.sh.
usage: performance_report.py RESULTS_DIR OUT.md OUT.png   (OUT.png "-": no chart, no matplotlib)

RESULTS_DIR holds what bench.sh wrote: h5dcp.json (+ h5dcp.txt, its
stdout), ompio.json, no-writeback.json, hints.json, trace.txt, dcp.json (the
peer, bench/dcp_peer_bench.py), torch_save.json, disk.txt, plan.txt
(h5dcp-plan-bench's output), memory-{save,async,load,reshard}.json (h5dcp-bench
--memory-only, each a process of its own), ab/ (the alternated rounds, the save's
baselines among them), local-tier.json (bench/local_tier_bench.py, the node-local tier; else
docs/local-tier-run/local-tier.json beside the report); the GPU section comes from docs/gpu-run/
(bench/gpu_report.py). The prose is performance_report.md.in's blocks, filled in with
the run's figures here. Every number in the generated text comes from those
files; the only literals are the targets' thresholds and PROSE_FIGURES below
(bench/check_figures.py checks, in bench.smoke). A side whose own correctness check failed gets no ratio."""
import json
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import time

import dcp_thread_choice
import report_template

results, md_path, png_path = sys.argv[1], sys.argv[2], sys.argv[3]

# The project's targets (set by issue TARGETS_ISSUE): requirements, not measurements.
TARGETS_ISSUE = 6
SAVE_VS_RAW = 0.9          # save speed ≥ this × the faster raw ROMIO write
LOAD_VS_DCP = 2.0          # load speed ≥ this × DCP's
RESHARD_VS_DCP = 1.5       # resharded load speed ≥ this × DCP's
RESHARD_VS_LOAD = 1.2      # resharded load time ≤ this × same-sharding load time
SMALL_VS_LARGE = 1.5       # many small tensors' save time ≤ this × the same bytes in few tensors
ASYNC_BLOCKING = 0.03      # async blocking time ≤ this × the sync save
MEMORY_ADDED = 0.10        # memory a save adds ≤ this × (shard + staging)
# Issue 18's (speed against today's DCP), where they go beyond issue 6's.
TARGETS_ISSUE_NEXT = 18
SAVE_VS_POSIX = 0.9        # save speed ≥ this × the POSIX write that does h5dcp's work (tricks, XXH3, publish)
SAVE_VS_DCP = 1.5          # save speed ≥ this × DCP's
COLD_VS_DCP = 1.5          # cold load speed ≥ this × DCP's cold load (same sharding and resharded)
COLD_VS_READ = 1.2         # cold load time ≤ this × a cold POSIX read of the same bytes
SMALL_VS_DCP = 1.0         # many small tensors: save and load speed ≥ this × DCP's
ASYNC_VS_COPY = 1.1        # async blocking time ≤ this × the bare copy into touched memory
STAGED_WAITED = 0.01       # background staging: time training waits ≤ this × the sync save
LOAD_MEMORY = 0.10         # memory a load adds (its targets held) ≤ this × the rank's shard
PLAN_SECONDS = 1.0         # save and resharded-load planning, 1,024 ranks × 1,000 tensors, one core
# Issue 50's (the node-local tier, bench/local_tier_bench.py).
TARGETS_ISSUE_LOCAL = 50
LOCAL_STEP_COST = 1.03        # a step with a local checkpoint ≤ this × a step without
LOCAL_RECOVERY_SPEEDUP = 5.0  # recovery from the local tier ≥ this × as fast as from the shared directory, cold
# Issue 51's (the format at the disk's speed), where measured.
TARGETS_ISSUE_DISK = 51
DURABLE_VS_SYNC = 1.1         # an async save until durable ≤ this × the sync save, timed in the same position
DURABLE_VS_DCP = 1.3          # an async save until durable ≥ this × as fast as DCP's async save
SMALL_PER_BYTE = 2.0          # many small tensors: save and load time per byte ≤ this × the same bytes in few tensors
TRANSFORMER_SAVE_VS_DCP = 1.5  # the transformer with AdamW state: save speed ≥ this × DCP's
# Not targets: where the conditions table explains a case (its slowest repetition at least this × its fastest).
SLOW_VS_FAST = 1.3
# Figures in the prose that no run measures: settings of the code it describes. Every other figure
# in the report comes from the run's results (bench/check_figures.py checks, in bench.smoke).
PROSE_FIGURES = ("sleep 200 µs", "sleeps 50 µs, doubling up to 200 µs")


def load_json(name):
    try:
        with open(os.path.join(results, name)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def read_text(name):
    try:
        with open(os.path.join(results, name)) as f:
            return f.read()
    except OSError:
        return ""


def num(x, digits=3):
    return f"{x:.{digits}f}"


def sig(x, digits=3):
    """`x` to `digits` significant digits, never in exponent form (193, 25.6, 0.503)."""
    if not x:
        return "0"
    return f"{x:.{max(digits - 1 - int(math.floor(math.log10(abs(x)))), 0)}f}"


def plural(n, word):
    return f"{n} {word}" + ("" if n == 1 else "s")


def spread(values):
    return f"{min(values):.3f}-{max(values):.3f}" if values else ""


# The report's prose: the template beside this file (performance_report.md.in).
fill = report_template.filler(__file__)


def equal(ok):
    return "equal" if ok else "NOT EQUAL"


h = load_json("h5dcp.json")
if h is None:
    sys.exit(f"performance_report: no h5dcp.json in {results}")
h_ok = bool(h.get("correct"))
# Every timed async and staged save read back, untimed, after its sample (absent in older JSON).
async_checked = {True: "equal (read back)", False: "**check failed**", None: "not read back"}[h.get("async_correct")]
s = h["median_seconds"]
gb = h["gb"]
bw = lambda seconds, size=gb: size / seconds  # noqa: E731

# What h5dcp-bench printed: the layout, the page-cache treatment and the
# small-tensor case's size (its JSON does not carry them).
h_out = read_text("h5dcp.txt")
m = re.search(r"(\d+) ranks, (\d+) x \[(\d+), (\d+)\] float32", h_out)
layout = dict(zip(("ranks", "tensors", "rows", "cols"), map(int, m.groups()))) if m else {}
cold = bool(h.get("cold"))
h_cache = "loads warm and cold (page cache dropped just before, as root)" if cold else "loads warm only"
m = re.search(r"^(\d+) small tensors save", h_out, re.M)
small_count = int(m.group(1)) if m else None
small_kib = h["small_gb"] * 1e9 / small_count / 1024 if small_count else None
m = re.search(r"HDF5 alone, (\d+) attributes", h_out)
floor_attrs = int(m.group(1)) if m else None

ompio = load_json("ompio.json")
peer = load_json("dcp.json")
ts = load_json("torch_save.json")
disk = read_text("disk.txt").split()

if peer:
    v = re.match(r"(\d+)\.(\d+)", peer.get("torch_version", ""))
    PEER = f"PyTorch {v.group(1)}.{v.group(2)} DCP" if v else "PyTorch DCP"
    pc = peer["cases"]
    p_med = {c: statistics.median(pc[c]["seconds"]) for c in pc if pc[c]["seconds"]}
    # Seconds are compared only for the same bytes (h5dcp-bench's JSON rounds its GB).
    same_data = abs(peer["gb"] - gb) <= 1e-4 * gb
    p_ok = {c: bool(pc[c]["ok"]) for c in pc}
else:
    PEER, pc, p_med, p_ok, same_data = "PyTorch DCP", {}, {}, {}, True
ts_ok = bool(ts and ts.get("ok"))

# The transformer case run alternately by both sides (bench.sh's ab/: rounds
# of h5dcp-bench --transformer-only and the peer's --transformer-only): where
# present, its medians over every round replace the main runs' transformer
# figures, which stay in the prose (main_tf_h, main_tf_p).
TF_KEYS = ("transformer_save", "transformer_load", "transformer_load_cold")
main_tf_h = {k: s[k] for k in TF_KEYS if k in s}
main_tf_p = {k: p_med[k] for k in TF_KEYS if k in p_med}


def alternated_rounds(prefix):
    """bench.sh's alternated rounds ab/{prefix}h5dcp-N.json and ab/{prefix}dcp-N.json, N = 1, 2, ...
    up to the first round that lacks either side: (h5dcp-bench's JSONs, the peer's)."""
    h_runs, p_runs = [], []
    while True:
        n = len(h_runs) + 1
        hj, pj = load_json(f"ab/{prefix}h5dcp-{n}.json"), load_json(f"ab/{prefix}dcp-{n}.json")
        if not hj or not pj:
            return h_runs, p_runs
        h_runs.append(hj)
        p_runs.append(pj)


ab_h, ab_p = alternated_rounds("")
ab_rounds = len(ab_h)
ab_samples = {}
if ab_rounds:
    # Every repetition of every round, as for the peer below (an h5dcp-bench
    # JSON without its repetitions gives its per-round median instead).
    for k in TF_KEYS:
        values = [t for j in ab_h for t in (j.get("seconds", {}).get(k) or
                                            ([j["median_seconds"][k]] if k in j["median_seconds"] else []))]
        if values:
            s[k] = statistics.median(values)
            ab_samples[k] = values
    h_ok = h_ok and all(j.get("correct") for j in ab_h)
    if peer:
        for k in TF_KEYS:
            values = [t for j in ab_p for t in j["cases"].get(k, {}).get("seconds", [])]
            if values:
                p_med[k] = statistics.median(values)
                pc[k] = {"seconds": values, "ok": all(j["cases"][k]["ok"] for j in ab_p if k in j["cases"]),
                         "bytes": ab_p[0]["cases"][k]["bytes"]}
                p_ok[k] = pc[k]["ok"]
ab_reps = ab_h[0].get("reps") if ab_rounds else None
# The same rounds' h5dcp-bench runs of the case with early write-back off
# (bench.sh's ab/no-writeback-h5dcp-N.json, right after each round's default run).
tf_no_wb = [j for j in (load_json(f"ab/no-writeback-h5dcp-{n}.json") for n in range(1, ab_rounds + 1)) if j]
tf_no_wb_times = [t for j in tf_no_wb for t in j.get("seconds", {}).get("transformer_save", [])]
tf_no_wb_ok = bool(tf_no_wb) and all(j.get("correct") for j in tf_no_wb)
tf_no_wb_med = statistics.median(tf_no_wb_times) if tf_no_wb_times else None
# ... and with the loads' read-ahead hints off (ab/no-readahead-h5dcp-N.json: its cold loads are
# the transformer's "cold, no read-ahead hints" figure; earlier JSONs timed it inside the case).
tf_no_ra = [j for j in (load_json(f"ab/no-readahead-h5dcp-{n}.json") for n in range(1, ab_rounds + 1)) if j]
tf_no_ra_times = [t for j in tf_no_ra for t in j.get("seconds", {}).get("transformer_load_cold", [])]
if tf_no_ra_times:
    s["transformer_load_cold_no_readahead"] = statistics.median(tf_no_ra_times)
    ab_samples["transformer_load_cold_no_readahead"] = tf_no_ra_times
    h_ok = h_ok and all(j.get("correct") for j in tf_no_ra)

# The transformer's bytes written by POSIX calls in three file layouts (bench.sh's rounds run
# h5dcp-bench --transformer-layouts: ab/layouts-h5dcp-N.json).
LAYOUT_KEYS = ("transformer_posix_shared", "transformer_posix_regions", "transformer_posix_per_rank",
               "transformer_direct_per_rank")
layout_runs = [j for j in (load_json(f"ab/layouts-h5dcp-{n}.json") for n in range(1, ab_rounds + 1)) if j]
layout_samples = {k: [t for j in layout_runs for t in j.get("seconds", {}).get(k, [])] for k in LAYOUT_KEYS}
layout_med = {k: statistics.median(v) for k, v in layout_samples.items() if v}
# The direct writes are read back by h5dcp-bench (its "correct").
direct_ok = bool(layout_runs) and all(j.get("correct") for j in layout_runs)



def reporting_paused(j):
    """Whether a bench's JSON records the VM's free page reporting paused during its run (its
    order above the page allocator's largest: bench/page_reporting.sh)."""
    order, largest = j.get("page_reporting_order", -1), j.get("largest_page_order", -1)
    return 0 <= largest < order


# The transformer case once more on both sides with the VM's free page reporting paused
# (bench.sh's ab/unreported-*, in each round after its other runs), only rounds whose JSONs on
# both sides record it paused; the default rounds beside them record it on (reporting_on).
UR_KEYS = ("transformer_save", "transformer_load_cold")
ur_pairs = [(a, b) for a, b in zip(*alternated_rounds("unreported-")) if reporting_paused(a) and reporting_paused(b)]
ur_h_samples = {k: [t for a, _ in ur_pairs for t in a.get("seconds", {}).get(k, [])] for k in UR_KEYS}
ur_p_samples = {k: [t for _, b in ur_pairs for t in b["cases"].get(k, {}).get("seconds", [])] for k in UR_KEYS}
ur_h_med = {k: statistics.median(v) for k, v in ur_h_samples.items() if v}
ur_p_med = {k: statistics.median(v) for k, v in ur_p_samples.items() if v}
# Each side's read-back checks of the paused rounds, made once for the rows and the ratios.
ur_h_ok = all(a.get("correct") for a, _ in ur_pairs)
ur_p_ok = {k: all(b["cases"][k]["ok"] for _, b in ur_pairs if k in b["cases"]) for k in UR_KEYS}
ur_ok = bool(ur_pairs) and ur_h_ok and all(ur_p_ok.values())
reporting_on = bool(ab_h) and all(j.get("page_reporting_order", -1) >= 0 and not reporting_paused(j) for j in ab_h)

# The 1 GiB save run alternately by both sides (bench.sh's ab/save-*: rounds of
# h5dcp-bench --save-only --no-raw and the peer's --save-only, each save read
# back after its round): where present, the save-vs-peer targets take the
# medians over every round's repetitions (the main runs' saves, seconds apart
# and after different cases on each side, stay in the table and the prose).
save_ab_h, save_ab_p = alternated_rounds("save-")
save_ab_rounds = len(save_ab_h)
# The peer's rounds time every thread_count (save@N, bench/dcp_thread_choice.py): its figure is the
# count whose saves over every round have the lowest median; older runs timed one count ("save").
save_ab_p_by_count = dcp_thread_choice.pooled_by_count(save_ab_p) if save_ab_p else {}
save_ab_p_threads = dcp_thread_choice.best_count(save_ab_p) if save_ab_p else None
SAVE_AB_P_CASE = f"save@{save_ab_p_threads}" if save_ab_p_threads else "save"
save_ab_h_times = [t for j in save_ab_h for t in j.get("seconds", {}).get("save", [])]
save_ab_p_times = [t for j in save_ab_p for t in j["cases"].get(SAVE_AB_P_CASE, {}).get("seconds", [])]
save_ab = bool(save_ab_rounds and save_ab_h_times and save_ab_p_times) and \
    all(abs(j["gb"] - gb) <= 1e-4 * gb for j in save_ab_h + save_ab_p)
save_ab_reps = save_ab_h[0].get("reps") if save_ab else None
save_ab_h_ok = save_ab and all(j.get("correct") for j in save_ab_h)
save_ab_p_ok = save_ab and all(j["cases"][SAVE_AB_P_CASE]["ok"] for j in save_ab_p)
save_ab_h_med = statistics.median(save_ab_h_times) if save_ab else None
save_ab_p_med = statistics.median(save_ab_p_times) if save_ab else None
# The save's baselines, timed in the same rounds as a process of their own (bench.sh:
# ab/save-baselines-N.json, h5dcp-bench --baselines-only; the three processes of a round take
# turns going first): the save targets against raw and POSIX writes take these, not the main
# run's, whose baselines follow other cases than the save does.
BASE_KEYS = ("raw", "raw_independent", "posix_write", "posix_checkpoint")
save_ab_b = [j for j in (load_json(f"ab/save-baselines-{n}.json") for n in range(1, save_ab_rounds + 1)) if j] \
    if save_ab else []
base_times = {k: [t for j in save_ab_b for t in j.get("seconds", {}).get(k, [])] for k in BASE_KEYS}
base_ab = bool(save_ab_b) and len(save_ab_b) == save_ab_rounds and all(base_times.values()) and \
    all(abs(j["gb"] - gb) <= 1e-4 * gb for j in save_ab_b)
base_med = {k: statistics.median(v) for k, v in base_times.items()} if base_ab else {}
# The 1 GiB loads run alternately by both sides (bench.sh's ab/load-*: rounds of h5dcp-bench
# --load-only and the peer's --load-only, each repetition loading the file its side just saved): where
# present, the load-vs-peer targets take the medians over every round's repetitions, case by case.
LOAD_KEYS = ("load", "reshard", "load_cold", "reshard_cold")
load_ab_h, load_ab_p = alternated_rounds("load-")
load_ab = bool(load_ab_h) and all(abs(j["gb"] - gb) <= 1e-4 * gb for j in load_ab_h + load_ab_p)
load_ab_h_ok = load_ab and all(j.get("correct") for j in load_ab_h)
load_ab_med, load_ab_times = {}, {}  # case -> (h5dcp's, the peer's, the peer's check); their repetitions
for k in LOAD_KEYS if load_ab else ():
    hs = [t for j in load_ab_h for t in j.get("seconds", {}).get(k, [])]
    ps = [t for j in load_ab_p for t in j["cases"].get(k, {}).get("seconds", [])]
    if hs and ps:
        load_ab_med[k] = (statistics.median(hs), statistics.median(ps),
                          all(j["cases"][k]["ok"] for j in load_ab_p))
        load_ab_times[k] = (hs, ps)
# The cold POSIX read each of h5dcp-bench's load rounds timed beside its loads (absent in older
# rounds): used only where every round has it.
load_ab_read_cold = [t for j in load_ab_h for t in j.get("seconds", {}).get("posix_read_cold", [])] \
    if load_ab and all(j.get("seconds", {}).get("posix_read_cold") for j in load_ab_h) else []
tensors = layout.get("tensors") or (peer or {}).get("tensors")
few = f"{tensors} tensors" if tensors else "the large-tensor layout"
small_name = f"{small_count:,} tensors of {small_kib:g} KiB" if small_count else "many small tensors"
small_short = f"{small_count:,} small tensors" if small_count else "many small tensors"


def h_spread(key):
    """min-max of h5dcp-bench's repetitions of `key` (older JSON without them: none)."""
    return spread(h.get("seconds", {}).get(key, []))


def h_rate(key, size=gb):
    return bw(s[key], size) if key in s else None


def check_cell(flag):
    return "equal" if flag else "**check failed**"


def h_row(name, key, checked):
    """A row of h5dcp-bench's main run: the median of `key`, its GB/s (none for a call that need not
    move the bytes), its repetitions."""
    return name, s.get(key), None if key in ("async_blocking", "staged_training_waited") else h_rate(key), \
        h_spread(key), checked


# (name, seconds, GB/s, min-max of the repetitions, checked)
H_CHECKED, NOT_READ = check_cell(h_ok), "not read back"
rows = [h_row(*row) for row in (
    ("raw MPI-IO write + fsync (ROMIO, the default; MPI_File_write_at_all)", "raw", NOT_READ),
    ("raw MPI-IO write + fsync (ROMIO, independent MPI_File_write_at)", "raw_independent", NOT_READ))]
if ompio:
    rows.append(("raw MPI-IO write + fsync (OMPIO)", ompio["median_seconds"]["raw"], bw(ompio["median_seconds"]["raw"]),
                 spread(ompio.get("seconds", {}).get("raw", [])), NOT_READ))
rows += [h_row(*row) for row in (
    ("h5dcp save", "save", H_CHECKED + " (through the loads)"),
    ("POSIX pwrite + fsync, h5dcp's tricks (space reserved, early write-back)", "posix_write", NOT_READ),
    ("POSIX pwrite + fsync, h5dcp's tricks, XXH3 of every byte, published (rename, directory fsync)",
     "posix_checkpoint", NOT_READ),
    ("O_DIRECT write + fsync (dd oflag=direct)", "direct_write", NOT_READ),
    ("h5dcp load (same sharding)", "load", H_CHECKED),
    ("h5dcp resharded load", "reshard", H_CHECKED),
    ("POSIX read (pread 16 MiB at a time, dd bs=16M)", "posix_read", ""),
    ("h5dcp load, cold", "load_cold", H_CHECKED),
    ("h5dcp load, cold, no read-ahead hints (H5DCP_READAHEAD_MIB=0)", "load_cold_no_readahead", H_CHECKED),
    ("h5dcp resharded load, cold", "reshard_cold", H_CHECKED),
    ("POSIX read, cold", "posix_read_cold", ""),
    ("O_DIRECT read (dd iflag=direct bs=16M: past the page cache, cold either way)", "direct_read", ""),
    ("h5dcp async save, until durable", "async_total", async_checked),
    ("h5dcp async save, caller blocked", "async_blocking", async_checked),
    ("h5dcp async save, caller blocked: its copy into staging memory (the engine's own timing)", "async_engine_copy",
     ""),
    ("memory copy of the shards into touched memory (floor of the above)", "staging_copy", ""))]
# Rows that older h5dcp-bench runs lack, left out rather than empty.
rows += [h_row(*row) for row in (
    ("the same copy into memory left alone since the previous sample's copy, as the staging memory is between saves",
     "staging_copy_idle", ""),
    ("h5dcp async save staged in the background, until durable", "staged_total", async_checked),
    ("h5dcp async save staged in the background: training waited (the call + the wait on `staged` after the step's"
     " compute)", "staged_training_waited", async_checked),
    ("h5dcp async save staged in the background: its copy into staging memory the async save wrote seconds before"
     " (the engine's own timing)", "staged_engine_copy", "")) if row[1] in s]
PEER_CASES = (("save", "save"), ("load", "load (same sharding)"), ("reshard", "resharded load"),
              ("load_cold", "load, cold"), ("reshard_cold", "resharded load, cold"),
              ("async_total", "async save, until durable"), ("async_blocking", "async save, caller blocked"))
for case, label in PEER_CASES:
    if case.endswith("_cold") and not (peer or {}).get("cold"):
        continue
    if case in p_med:
        rows.append((f"{PEER} {label}", p_med[case], bw(p_med[case], peer["gb"]) if case != "async_blocking" else None,
                     spread(pc[case]["seconds"]), check_cell(p_ok[case]) + (" (read back)" if case == "save" or
                                                                          case.startswith("async") else "")))
    else:
        rows.append((f"{PEER} {label}", None, None, "", "not run"))
if save_ab:
    rows += [
        (f"h5dcp save, alternated with the peer ({plural(save_ab_rounds, 'round')})",
         save_ab_h_med, bw(save_ab_h_med), spread(save_ab_h_times),
         check_cell(save_ab_h_ok) + " (read back)"),
        (f"{PEER} save" + (f", thread_count {save_ab_p_threads} (the best of "
                           f"{', '.join(map(str, save_ab_p_by_count))}, each timed in every round)"
                           if save_ab_p_threads else "")
         + f", alternated with h5dcp ({plural(save_ab_rounds, 'round')})",
         save_ab_p_med, bw(save_ab_p_med, peer["gb"]) if peer else None,
         spread(save_ab_p_times), check_cell(save_ab_p_ok) + " (read back)"),
    ]
for key, label in (("load", "load (same sharding)"), ("reshard", "resharded load"), ("load_cold", "load, cold"),
                   ("reshard_cold", "resharded load, cold")):
    if key in load_ab_med:
        mine, theirs, theirs_ok = load_ab_med[key]
        rounds = plural(len(load_ab_h), "round")
        rows += [(f"h5dcp {label}, alternated with the peer ({rounds})", mine, bw(mine),
                  spread(load_ab_times[key][0]), check_cell(load_ab_h_ok)),
                 (f"{PEER} {label}, alternated with h5dcp ({rounds})", theirs, bw(theirs, peer["gb"]) if peer else None,
                  spread(load_ab_times[key][1]), check_cell(theirs_ok))]
if load_ab_read_cold:
    rows.append((f"POSIX read, cold, in h5dcp's alternated load rounds ({plural(len(load_ab_h), 'round')})",
                 statistics.median(load_ab_read_cold), bw(statistics.median(load_ab_read_cold)),
                 spread(load_ab_read_cold), "not read back"))
if base_ab:
    rows += [(f"{label}, alternated with the saves ({plural(save_ab_rounds, 'round')})", base_med[key],
              bw(base_med[key]), spread(base_times[key]), "not read back")
             for key, label in (("raw", "raw MPI-IO write"), ("raw_independent", "raw MPI-IO write, independent"),
                                ("posix_write", "POSIX pwrite + fsync, h5dcp's tricks"),
                                ("posix_checkpoint",
                                 "POSIX pwrite + fsync, h5dcp's tricks, XXH3 of every byte, published"))]
if ts:
    rows.append(("torch.save, one process", ts["seconds"], bw(ts["seconds"], ts["gb"]), spread(ts.get("times", [])),
                 check_cell(ts_ok) + " (read back)"))
rows += [
    (f"h5dcp save, {small_name}", s["small"], h_rate("small", h["small_gb"]), h_spread("small"), check_cell(h_ok) +
     " (through the loads)" if "small_load" in s else "not read back"),
    (f"h5dcp load, {small_name}, on every rank", s.get("small_load"),
     h_rate("small_load", h["small_gb"] * h["ranks"]), h_spread("small_load"), check_cell(h_ok)),
    (f"h5dcp load, {small_name}, on every rank, cold", s.get("small_load_cold"),
     h_rate("small_load_cold", h["small_gb"] * h["ranks"]), h_spread("small_load_cold"), check_cell(h_ok)),
]
for case, label in (("small_save", "save"), ("small_load", "load, on every rank"),
                    ("small_load_cold", "load, on every rank, cold")):
    if case in p_med:
        rows.append((f"{PEER} {label}, {small_name}", p_med[case], pc[case]["bytes"] / 1e9 / p_med[case],
                     spread(pc[case]["seconds"]), check_cell(p_ok[case]) + (" (read back)" if case == "small_save"
                                                                           else "")))
tf = h.get("transformer")
tf_name = f"transformer ({tf['shape']}; {tf['tensors']:,} tensors)" if tf else None
if tf:
    rows += [(f"h5dcp {label}, {tf_name}", s.get(key), h_rate(key, tf["bytes"] / 1e9),
              spread(ab_samples[key]) if key in ab_samples else h_spread(key), check_cell(h_ok))
             for key, label in (("transformer_save", "save"), ("transformer_load", "load"),
                                ("transformer_load_cold", "load, cold"),
                                ("transformer_load_cold_no_readahead", "load, cold, no read-ahead hints"))
             if key in s]
    if tf_no_wb_med:
        rows.append((f"h5dcp save, {tf_name}, early write-back off (H5DCP_WRITEBACK_MIB=0)", tf_no_wb_med,
                     tf["bytes"] / 1e9 / tf_no_wb_med, spread(tf_no_wb_times), check_cell(tf_no_wb_ok)))
    # The same bytes (less the 0-d steps, 4 bytes for each of the quarter of the tensors that are
    # parameters) written with POSIX calls and h5dcp's tricks, in the three layouts.
    tf_posix_gb = (tf["bytes"] - tf["tensors"]) / 1e9
    rows += [(f"POSIX pwrite + fsync of the transformer's sharded bytes, h5dcp's tricks, {label}", layout_med[key],
              tf_posix_gb / layout_med[key], spread(layout_samples[key]), "not read back")
             for key, label in (("transformer_posix_shared", "one shared file (h5dcp's layout)"),
                                ("transformer_posix_regions", "one shared file, a region per rank"),
                                ("transformer_posix_per_rank", "a file per rank (the peer's layout)"))
             if key in layout_med]
    if "transformer_direct_per_rank" in layout_med:
        rows.append(("O_DIRECT + fsync of the transformer's sharded bytes through two aligned bounce buffers on huge"
                     " pages, XXH3 of"
                     " every byte, a file per rank (a direct-I/O writer)", layout_med["transformer_direct_per_rank"],
                     tf_posix_gb / layout_med["transformer_direct_per_rank"],
                     spread(layout_samples["transformer_direct_per_rank"]), check_cell(direct_ok) + " (read back)"))
    rows += [(f"h5dcp {label}, {tf_name}, the VM's free page reporting paused", ur_h_med[key],
              tf["bytes"] / 1e9 / ur_h_med[key], spread(ur_h_samples[key]),
              check_cell(ur_h_ok))
             for key, label in (("transformer_save", "save"), ("transformer_load_cold", "load, cold"))
             if key in ur_h_med]
for key, label in (("transformer_save", "save"), ("transformer_load", "load"), ("transformer_load_cold", "load, cold")):
    if key in p_med:
        rows.append((f"{PEER} {label}, transformer", p_med[key], pc[key]["bytes"] / 1e9 / p_med[key],
                     spread(pc[key]["seconds"]), check_cell(p_ok[key]) + (" (read back)" if key.endswith("save")
                                                                         else "")))
for key, label in (("transformer_save", "save"), ("transformer_load_cold", "load, cold")):
    if key in ur_p_med:
        rows.append((f"{PEER} {label}, transformer, the VM's free page reporting paused", ur_p_med[key],
                     ur_pairs[0][1]["cases"][key]["bytes"] / 1e9 / ur_p_med[key], spread(ur_p_samples[key]),
                     check_cell(ur_p_ok[key])))
rows += [
    (f"h5dcp save, same bytes in {few}", s["small_as_large"], h_rate("small_as_large", h["small_gb"]),
     h_spread("small_as_large"),
     check_cell(h_ok) + " (through the loads)" if "small_as_large_load" in s else "not read back"),
    (f"h5dcp load, same bytes in {few}, whole on every rank", s.get("small_as_large_load"),
     h_rate("small_as_large_load", h["small_gb"] * h["ranks"]), h_spread("small_as_large_load"), check_cell(h_ok)),
    (f"h5dcp load, same bytes in {few}, whole on every rank, cold", s.get("small_as_large_load_cold"),
     h_rate("small_as_large_load_cold", h["small_gb"] * h["ranks"]), h_spread("small_as_large_load_cold"),
     check_cell(h_ok)),
    (f"HDF5 alone: the {small_short}' datasets, no attributes", s.get("small_hdf5_bare"),
     h_rate("small_hdf5_bare", h["small_gb"]), h_spread("small_hdf5_bare"), ""),
    (f"HDF5 alone: the {small_short}' datasets, "
     + (f"{floor_attrs} attributes each" if floor_attrs else "h5dcp's attributes") + " at creation",
     s.get("small_hdf5_attrs"), h_rate("small_hdf5_attrs", h["small_gb"]), h_spread("small_hdf5_attrs"), ""),
]

# Knobs measured in the same run (save only, medians, each beside its own raw write).
knobs = []
for name, file in (("early write-back off (H5DCP_WRITEBACK_MIB=0)", "no-writeback.json"),
                   ("ROMIO hints romio_ds_write=disable, romio_cb_write=disable", "hints.json")):
    k = load_json(file)
    if k and "save" in k.get("median_seconds", {}):
        ks = k["median_seconds"]
        knobs.append((name, ks["save"], ks["raw"], ks.get("raw_independent"), bool(k.get("correct")),
                      k.get("seconds", {}).get("save", [])))
# Each knob's run is a process that only saves: set against the alternated
# rounds' h5dcp saves (the same kind of process) where bench.sh ran them.
knob_vs_alternated = save_ab and save_ab_h_ok
knob_baseline = save_ab_h_med if knob_vs_alternated else s["save"]

# Where the time goes: rank 0's steps of the traced run, one group per save
# (per repetition, the bench's order: sync save, async save, then the small
# tensors and the same bytes in few tensors, taking turns going first). The
# second repetition's: a process's first save pays for first touches of memory
# and is no typical one.
# h5dcp-bench names each case before its save ("[h5dcp-bench case] NAME rep N";
# rep -1 is the warm-up); the save's step lines follow it.
TRACE_RANK = 0


def traced_saves(name):
    """Rank TRACE_RANK's traced save steps in a trace file of h5dcp-bench: (case, rep, steps) for
    each case line, in the file's order, steps [(step, waited, worked)]."""
    saves = []
    for line in read_text(name).splitlines():
        m = re.match(r"\[h5dcp-bench case\] (.+) rep (-?\d+)$", line)
        if m:
            saves.append((m.group(1), int(m.group(2)), []))
            continue
        m = re.match(rf"\[h5dcp trace\] rank {TRACE_RANK} (save:\w+)\s+waited ([0-9.]+) s, worked ([0-9.]+) s", line)
        if m and saves:
            saves[-1][2].append((m.group(1), float(m.group(2)), float(m.group(3))))
    return saves


by_case = {(name, rep): steps for name, rep, steps in traced_saves("trace.txt")}
traced_reps = sorted({r for _, r in by_case})
traced_rep_index = 1 if 1 in traced_reps else (traced_reps[-1] if traced_reps else None)
traced_rep = {0: "first", 1: "second"}.get(traced_rep_index, f"repetition {traced_rep_index}")
labels = {"small tensors": small_short, "same bytes in few tensors": f"same bytes in {few}"}
traced = {labels.get(name, name): steps for (name, r), steps in by_case.items() if r == traced_rep_index and steps}


def compare(text, *sides, same=True):
    """`text` unless a side's own check failed or a figure is missing.
    sides: (name, ok flag, and the figures the ratio needs); same: whether
    the sides timed the same bytes."""
    if not same:
        return "not compared: the sides measured different amounts of data", None
    for name, ok, *figures in sides:
        if any(f is None for f in figures):
            return f"n/a ({name}: not measured)", None
        if not ok:
            return f"not compared: {name}'s correctness check failed", None
    return text(), True


def near(x, threshold):
    """x to two decimals, or three where two would round it onto the threshold it misses or
    meets (1.4975 against 1.5 reads 1.497, not 1.50 beside "not met")."""
    return f"{x:.3f}" if f"{x:.2f}" == f"{threshold:.2f}" and x != threshold else f"{x:.2f}"


def verdict(ok):
    return "met" if ok else "**not met**"


raw_romio = bw(s["raw"])
raw_independent = h_rate("raw_independent") or 0
raw_best = max(raw_romio, raw_independent)
dsave = p_med.get("save")
H = ("h5dcp", h_ok)
# The save against the peer's: from the alternated rounds where bench.sh ran
# them, else the main runs'.
if save_ab:
    hsave_vs_peer, dsave = save_ab_h_med, save_ab_p_med
    H_SAVE = ("h5dcp's alternated saves", save_ab_h_ok)
    P_SAVE = (f"{PEER}'s alternated saves", save_ab_p_ok, dsave)
    save_ab_note = f" (the alternated rounds; the main runs: {p_med['save'] / s['save']:.2f} ×)" \
        if "save" in p_med else " (the alternated rounds)"
else:
    hsave_vs_peer, H_SAVE, P_SAVE, save_ab_note = s["save"], H, (f"{PEER} save", p_ok.get("save"), dsave), ""
# The save against its baselines: the alternated rounds' medians where bench.sh ran them (the
# save and its baselines in the same rounds), else the main run's.
if base_ab:
    base_save, base, H_BASE = save_ab_h_med, base_med, H_SAVE
    base_where = (f"medians of the {plural(save_ab_rounds, 'round')} in which the save, the peer's save and these"
                  " baselines took turns")
else:
    base_save, base, H_BASE = s["save"], s, H
    base_where = "the main run, the baselines not alternated with the save"
mem_limit = MEMORY_ADDED * (h["shard_bytes"] + h["staging_bytes"])
# What a save, an async save, a load and a resharded load add to the resident memory, each from a
# process of its own (bench.sh: h5dcp-bench --memory-only CASE, one mpiexec each): None where not run.
memory = {c: load_json(f"memory-{c}.json") for c in ("save", "async", "load", "reshard")}
mem_added = {c: j["added_bytes"] if j else None for c, j in memory.items()}
MEM = ("the memory processes", all(j["correct"] for j in memory.values() if j), *mem_added.values())


def mem_method(holds):
    """How the memory figures were taken, for the targets' cells."""
    return (f"each from a process of its own that holds only {holds}, its freed heap handed back (malloc_trim)"
            " first: the peak resident set during the call minus the resident set before it, largest over the ranks")


MEM_SAVE = mem_method("its shards and, for the async save, the staging memory of one async save before it")
targets, targets_next = [], []


def target(name, text, met, *sides, same=None, table=targets):
    same = same_data or not any(PEER in side[0] for side in sides) if same is None else same
    value, compared = compare(text, *sides, same=same)
    table.append((name, value, verdict(met()) if compared else "not judged"))


def base_raw():
    """The faster of the two raw ROMIO writes the save is judged against (seconds)."""
    return min(base["raw"], base.get("raw_independent") or base["raw"])


target(f"save ≥ {SAVE_VS_RAW:g} × raw MPI-IO write (the faster ROMIO write, collective or independent; "
       "OMPIO is shown for reference only)",
       lambda: f"{near(base_raw() / base_save, SAVE_VS_RAW)} × (h5dcp's save {base_save:.3f} s against the faster"
               f" raw write's {base_raw():.3f} s, {base_where}"
               + (f"; the main run: {bw(s['save']) / raw_best:.2f} ×" if base_ab else "") + ")",
       lambda: base_raw() / base_save >= SAVE_VS_RAW, H_BASE)
target(f"save not slower than {PEER}", lambda: f"{near(dsave / hsave_vs_peer, 1)} × {PEER}'s speed" + save_ab_note,
       lambda: hsave_vs_peer <= dsave, H_SAVE, P_SAVE)


def load_vs_peer(case, label):
    """A load case's figures against the peer's: (h5dcp's seconds, the peer's, h5dcp's side, the
    peer's side, a note) from the alternated rounds where bench.sh ran them, else the main runs'."""
    if case in load_ab_med:
        mine, theirs, theirs_ok = load_ab_med[case]
        main = f"; the main runs: {p_med[case] / s[case]:.2f} ×" if case in p_med and case in s else ""
        return mine, theirs, ("h5dcp's alternated loads", load_ab_h_ok), \
            (f"{PEER}'s alternated {label}", theirs_ok, theirs), f" (the alternated rounds{main})"
    return s.get(case), p_med.get(case), H, (f"{PEER} {label}", p_ok.get(case), p_med.get(case)), ""


for case, label, limit in (("load", "load", LOAD_VS_DCP), ("reshard", "resharded load", RESHARD_VS_DCP)):
    mine, theirs, mine_side, theirs_side, note = load_vs_peer(case, label)
    target(f"{label} ≥ {limit:g} × {PEER} {label}",
           lambda mine=mine, theirs=theirs, note=note: f"{theirs / mine:.2f} ×{note}",
           lambda mine=mine, theirs=theirs, limit=limit: theirs / mine >= limit, (*mine_side, mine), theirs_side)
target(f"resharded load time ≤ {RESHARD_VS_LOAD:g} × same-sharding load", lambda: f"{s['reshard'] / s['load']:.2f} ×",
       lambda: s["reshard"] <= RESHARD_VS_LOAD * s["load"], H)
target(f"{small_short} ≤ {SMALL_VS_LARGE:g} × same bytes in {few}",
       lambda: f"{s['small'] / s['small_as_large']:.2f} ×" + (
           f" (HDF5 alone, no attributes: {s['small_hdf5_bare'] / s['small_as_large']:.2f} ×)"
           if "small_hdf5_bare" in s else ""),
       lambda: s["small"] <= SMALL_VS_LARGE * s["small_as_large"], H)
target(f"async blocking ≤ {100 * ASYNC_BLOCKING:g} % of the sync save",
       lambda: f"{100 * s['async_blocking'] / s['save']:.1f} %" + (
           f" (the bare memory copy: {100 * s['staging_copy'] / s['save']:.1f} %)" if "staging_copy" in s else ""),
       lambda: s["async_blocking"] <= ASYNC_BLOCKING * s["save"], H)
target(f"memory a save adds ≤ {100 * MEMORY_ADDED:g} % of shard + staging",
       lambda: f"sync {mem_added['save'] / 1e6:.1f} MB, async {mem_added['async'] / 1e6:.1f} MB "
               f"(limit {mem_limit / 1e6:.0f} MB; {MEM_SAVE})",
       lambda: max(mem_added["save"], mem_added["async"]) <= mem_limit, H, MEM)

def target_next(*args, **kwargs):
    target(*args, table=targets_next, **kwargs)


def layout_ratio():
    """The POSIX write of the transformer's bytes into one shared file, against a file per rank:
    the per-rank files' time over the shared file's (below 1: the shared file is slower); None
    where not measured."""
    shared, own = layout_med.get("transformer_posix_shared"), layout_med.get("transformer_posix_per_rank")
    return own / shared if shared and own else None


def layout_costs_little():
    """Whether the shared file cost no more than a tenth over files per rank (None: not measured)."""
    return layout_ratio() > 1 / 1.1 if layout_ratio() else None


def paused_ratio(case):
    """The peer's time over h5dcp's for `case` in the rounds with free page reporting paused, or None."""
    return ur_p_med[case] / ur_h_med[case] if ur_ok and tf_same and case in ur_h_med and case in ur_p_med else None


def transformer_notes(case):
    """Beside a transformer target's ratio: the same with the VM's free page reporting paused, and
    for the save the knob's and what the layout alone costs."""
    notes = [f"the VM's free page reporting paused on both sides: {paused_ratio(case):.2f} ×"] \
        if paused_ratio(case) else []
    if case != "transformer_save":
        return notes
    if tf_no_wb_med and tf_no_wb_ok:
        notes.append(f"early write-back off: {p_med['transformer_save'] / tf_no_wb_med:.2f} ×")
    if layout_ratio():
        notes.append(f"the same bytes by POSIX calls: one shared file at {layout_ratio():.2f} × the speed of a file"
                     " per rank")
    if direct_ok and "transformer_direct_per_rank" in layout_med:
        notes.append(f"the same bytes as a direct-I/O writer would write them: "
                     f"{p_med['transformer_save'] / layout_med['transformer_direct_per_rank']:.2f} ×")
    return notes


def with_notes(case):
    """' (note; note)' after a ratio, or nothing when the case has no notes."""
    notes = transformer_notes(case)
    return f" ({'; '.join(notes)})" if notes else ""


H_ASYNC = ("h5dcp's async checkpoints", h.get("async_correct") is not False)
# The transformer and small-tensor cases are compared only for the same bytes.
tf_same = bool(tf and peer and peer.get("transformer")) and peer["transformer"]["bytes"] == tf["bytes"]
for case, label in (("transformer_save", "save"), ("transformer_load", "load (warm)"),
                    ("transformer_load_cold", "load (cold)")):
    target_next(f"transformer with AdamW state: {label} ≥ {SMALL_VS_DCP:g} × {PEER}'s speed",
                lambda case=case: f"{p_med[case] / s[case]:.2f} ×" + with_notes(case),
                lambda case=case: p_med[case] / s[case] >= SMALL_VS_DCP, H,
                (f"{PEER} transformer {label}", p_ok.get(case), p_med.get(case), s.get(case)), same=tf_same)
# Issue 51's target 2: the small tensors at the big-tensor rate, per byte (the loads on both sides
# whole on every rank, so each rank reads the same bytes), and the transformer's save against the
# peer's (the alternated rounds' medians, as in the table above).
targets_disk = []
few_gb = h.get("small_as_large_gb", h["small_gb"])  # the same bytes in few tensors (older runs: small_gb)
for mine, few_case, label in (("small", "small_as_large", "save"),
                              ("small_load", "small_as_large_load", "load (warm), whole on every rank"),
                              ("small_load_cold", "small_as_large_load_cold", "load (cold), whole on every rank")):
    per_byte = lambda mine=mine, few_case=few_case: (  # noqa: E731
        s[mine] / h["small_gb"] / (s[few_case] / few_gb))
    target(f"{small_short}: {label}, time per byte ≤ {SMALL_PER_BYTE:g} × the same bytes' in {few}",
           lambda mine=mine, few_case=few_case, per_byte=per_byte:
               f"{near(per_byte(), SMALL_PER_BYTE)} × ({num(s[mine])} s for {sig(h['small_gb'] * 1e3)} MB against "
               f"{num(s[few_case])} s for {sig(few_gb * 1e3)} MB)",
           lambda per_byte=per_byte: per_byte() <= SMALL_PER_BYTE, H,
           (f"h5dcp {label}, same bytes in {few}", h_ok, s.get(mine), s.get(few_case)), table=targets_disk)
target(f"transformer with AdamW state: save ≥ {TRANSFORMER_SAVE_VS_DCP:g} × {PEER}'s speed",
       lambda: f"{near(p_med['transformer_save'] / s['transformer_save'], TRANSFORMER_SAVE_VS_DCP)} ×" +
               with_notes("transformer_save"),
       lambda: p_med["transformer_save"] / s["transformer_save"] >= TRANSFORMER_SAVE_VS_DCP, H,
       (f"{PEER} transformer save", p_ok.get("transformer_save"), p_med.get("transformer_save"),
        s.get("transformer_save")), same=tf_same, table=targets_disk)
small_same_bytes = bool(peer) and peer.get("small_gb") is not None and abs(peer["small_gb"] - h["small_gb"]) <= \
    1e-4 * h["small_gb"]


def posix_target_text():
    """The save against the POSIX write that does its work, and how much slower it is where it is."""
    save, work, bare = base_save, base["posix_checkpoint"], base["posix_write"]
    text = (f"{near(work / save, SAVE_VS_POSIX)} × its speed (h5dcp's save {save:.3f} s against {work:.3f} s,"
            f" {base_where}")
    if save > work:
        text += f"; h5dcp's save is slower: {save / work:.2f} × that write's time, {save - work:.3f} s more"
    text += f"; against the same write without XXH3 and the publish ({bare:.3f} s): {sig(bare / save)} ×"
    if "direct_write" in s:
        text += (f"; O_DIRECT writes, in the main run, at {bw(s['direct_write']) / bw(s['save']):.2f} × h5dcp's"
                 " save speed")
    return text + ")"


target_next(f"save ≥ {SAVE_VS_POSIX:g} × the POSIX write that does h5dcp's work (h5dcp's tricks: space reserved,"
            " early write-back; XXH3 of every byte; the atomic publish; fsync)",
            posix_target_text, lambda: base["posix_checkpoint"] / base_save >= SAVE_VS_POSIX, H_BASE,
            ("the POSIX write", True, base.get("posix_write"), base.get("posix_checkpoint")))
target_next(f"save ≥ {SAVE_VS_DCP:g} × {PEER}'s save", lambda: f"{near(dsave / hsave_vs_peer, SAVE_VS_DCP)} ×" + save_ab_note,
            lambda: dsave / hsave_vs_peer >= SAVE_VS_DCP, H_SAVE, P_SAVE)


def cold_vs_read(case):
    """A cold load against the cold POSIX read of the same bytes: (the load's seconds, the read's,
    h5dcp's side, the read's side, a note) from h5dcp-bench's alternated load rounds where each of
    them timed the read beside its loads (--load-only), both medians over the rounds' repetitions;
    else the main run's load and its one read."""
    mine_ab = [t for j in load_ab_h for t in j.get("seconds", {}).get(case, [])] if load_ab_read_cold else []
    if mine_ab:
        mine, read = statistics.median(mine_ab), statistics.median(load_ab_read_cold)
        main = (f"; the main run: {s[case] / s['posix_read_cold']:.2f} ×"
                if s.get(case) and s.get("posix_read_cold") else "")
        return mine, read, ("h5dcp's alternated loads", load_ab_h_ok), \
            ("the cold POSIX read, in the same rounds", True, read), f" (the alternated rounds{main})"
    return s.get(case), s.get("posix_read_cold"), H, ("the cold POSIX read", True, s.get("posix_read_cold")), ""


for case, label in (("load_cold", "cold load (same sharding)"), ("reshard_cold", "cold resharded load")):
    mine, theirs, mine_side, theirs_side, note = load_vs_peer(case, label)
    target_next(f"{label} ≥ {COLD_VS_DCP:g} × {PEER}'s",
                lambda mine=mine, theirs=theirs, note=note: f"{theirs / mine:.2f} ×{note}",
                lambda mine=mine, theirs=theirs: theirs / mine >= COLD_VS_DCP, (*mine_side, mine), theirs_side)
    mine, read, mine_side, read_side, note = cold_vs_read(case)
    target_next(f"{label} time ≤ {COLD_VS_READ:g} × a cold POSIX read of the same bytes",
                lambda mine=mine, read=read, note=note: f"{mine / read:.2f} ×{note}",
                lambda mine=mine, read=read: mine <= COLD_VS_READ * read, (*mine_side, mine), read_side)
for case, mine, label in (("small_save", "small", "save"), ("small_load", "small_load", "load (warm)"),
                          ("small_load_cold", "small_load_cold", "load (cold)")):
    target_next(f"{small_short}: {label} ≥ {SMALL_VS_DCP:g} × {PEER}'s speed",
                lambda case=case, mine=mine: f"{p_med[case] / s[mine]:.2f} ×",
                lambda case=case, mine=mine: p_med[case] / s[mine] >= SMALL_VS_DCP, H,
                (f"{PEER} {small_short} {label}", p_ok.get(case), p_med.get(case), s.get(mine)),
                same=small_same_bytes)


def engine_copy_split():
    """The blocking time split, sample by sample, into the call's own copy (the engine's
    timing) and the rest of the call (planning, the collective steps): medians of each."""
    blocked, copied = h.get("seconds", {}).get("async_blocking", []), h.get("seconds", {}).get("async_engine_copy", [])
    if not copied or len(copied) != len(blocked):
        return ""
    floors, copy = h["seconds"].get("staging_copy", []), s["staging_copy"]
    paired = ([c / f for c, f in zip(copied, floors)] if len(floors) == len(copied) and all(floors) else [])
    by_sample = fill("engine_copy.by_sample", low=num(min(paired), 2), high=num(max(paired), 2)) if paired else ""
    # The two take turns going first, right after the sample's one settle wait: the medians of
    # each turn show what going first costs either side.
    first = h.get("async_call_first") or []
    if paired and len(first) == len(paired) and len(set(first)) == 2:
        (cb, cf), (fb, ff) = [(statistics.median([b for b, f in zip(blocked, first) if f == call_first]),
                               statistics.median([x for x, f in zip(floors, first) if f == call_first]))
                              for call_first in (True, False)]
        by_sample += fill("engine_copy.turns", call=num(cb), call_floor=num(cf), call_ratio=num(cb / cf, 2),
                          floor=num(fb), floor_floor=num(ff), floor_ratio=num(fb / ff, 2))
    # Beside the bare copy: the same into idle memory, the staging thread's copy, and (once per
    # repetition) the call with the shards left alone since the previous sample, not written just before.
    beside = "".join(fill(f"engine_copy.{key}", seconds=num(s[key]), ratio=num(s[key] / copy, 2))
                     for key in ("staging_copy_idle", "staged_engine_copy", "async_blocking_shards_idle") if key in s)
    return fill("engine_copy", copied=num(statistics.median(copied)), ratio=num(statistics.median(copied) / copy, 2),
                by_sample=by_sample, rest=num(statistics.median([b - c for b, c in zip(blocked, copied)]), 4),
                beside=beside)


target_next(f"async blocking ≤ {ASYNC_VS_COPY:g} × the bare copy of the shards into touched memory",
            lambda: f"{s['async_blocking'] / s['staging_copy']:.2f} ×" + engine_copy_split(),
            lambda: s["async_blocking"] <= ASYNC_VS_COPY * s["staging_copy"], H, H_ASYNC,
            ("the bare copy", True, s.get("staging_copy")))
target_next(f"staged in the background, with a step's compute longer than the copy: training waits ≤ "
            f"{100 * STAGED_WAITED:g} % of a sync save",
            lambda: f"{100 * s['staged_training_waited'] / s['save']:.2f} % (the call {s['staged_blocking']:.4f} s"
                    + (f" ({min(h['seconds']['staged_blocking']):.4f}-{max(h['seconds']['staged_blocking']):.4f} s"
                       " over the samples)" if h.get("seconds", {}).get("staged_blocking") else "") + ","
                    f" the wait on `staged` {s['staged_wait']:.4f} s, after {s['staged_compute']:.3f} s of compute)",
            lambda: s["staged_training_waited"] <= STAGED_WAITED * s["save"], H, H_ASYNC,
            ("the staged case", True, s.get("staged_training_waited")))

target_next(f"memory a load adds ≤ {100 * LOAD_MEMORY:g} % of the rank's shard (same sharding and resharded)",
            lambda: f"same sharding {mem_added['load'] / 1e6:.1f} MB, resharded {mem_added['reshard'] / 1e6:.1f}"
                    f" MB (limit {LOAD_MEMORY * h['shard_bytes'] / 1e6:.0f} MB; {mem_method('the targets')})",
            lambda: max(mem_added["load"], mem_added["reshard"]) <= LOAD_MEMORY * h["shard_bytes"], H, MEM)
target_next(f"memory a save adds ≤ {100 * MEMORY_ADDED:g} % of shard + staging",
            lambda: f"sync {mem_added['save'] / 1e6:.1f} MB, async {mem_added['async'] / 1e6:.1f} MB "
                    f"(limit {mem_limit / 1e6:.0f} MB; {MEM_SAVE})",
            lambda: max(mem_added["save"], mem_added["async"]) <= mem_limit, H, MEM)
# The planning bench (h5dcp-plan-bench's output, plan.txt): its slowest load
# case (all ranks' lookups together) and the save's critical path.
plan_out = read_text("plan.txt")
# Load cases: name, ranks, tensors, queries, overlaps, index s, query s, reuse s, plan s (all ranks
# together). A load's planning is index s + plan s, the lookups load_plan.cpp makes.
plan_load_rows = [(m.group(1), float(m.group(6)), float(m.group(8)), float(m.group(9)))
                  for m in re.finditer(r"^(\S.*?)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+([0-9.]+)\s+([0-9.]+)"
                                       r"\s+([0-9.]+)\s+([0-9.]+)\s*$", plan_out, re.M)]
plan_load = [(name, index_s + plan_s) for name, index_s, _, plan_s in plan_load_rows]
slowest_load = max(plan_load, key=lambda x: x[1]) if plan_load else None


def settle_text():
    """How long the benches waited for the VM's free page reporting before the copies they compare."""
    waits = h.get("reporting_settled_seconds") or []
    peer_waits = (peer or {}).get("reporting_settled_seconds") or []
    bounds = h.get("reporting_settle_bounds")
    allowance = h.get("reporting_settle_allowance_mib")
    if not waits or not bounds or allowance is None:
        return ""
    order = h.get("page_reporting_order", -1)
    h_limit, p_limit = (sum(1 for w in ws if w >= bounds[1]) for ws in (waits, peer_waits))
    return fill("settle", allowance=f"{allowance:g}", quiet=f"{bounds[0]:g}", limit=f"{bounds[1]:g}",
                block=f" {2 ** order:,}-page" if order >= 0 else "", h_waits=f"{min(waits):.1f}-{max(waits):.1f}",
                p_waits=fill("settle.peer", waits=f"{min(peer_waits):.1f}-{max(peer_waits):.1f}") if peer_waits else "",
                at_limit=fill("settle.at_limit", h_limit=h_limit, h_waits=len(waits), p_limit=fill(
                    "settle.at_limit.peer", p_limit=p_limit, p_waits=len(peer_waits)) if peer_waits else "")
                if h_limit + p_limit else fill("settle.none_at_limit"))


def plan_lookups_text():
    """What asking for chunk indices instead of intersection boxes saved, in the slowest load case."""
    if not slowest_load:
        return ""
    name, _, reuse_s, plan_s = next(r for r in plan_load_rows if r[0] == slowest_load[0])
    return fill("plan_lookups", name=name, indices=num(plan_s), boxes=num(reuse_s))
m = re.search(r"save planning, (\d+) ranks x (\d+) row-sharded", plan_out)
plan_scale = f"{int(m.group(1)):,} ranks × {int(m.group(2)):,} tensors" if m else None
m = re.search(r"the critical path \(the (?:three|five) above\)\s+([0-9.]+)", plan_out)
plan_save_s = float(m.group(1)) if m else None
# The next save with the same sharding, its plan reused (SavePlanCache).
m = re.search(r"the reused plan's critical path \(the three above\)\s+([0-9.]+)", plan_out)
plan_reuse_s = float(m.group(1)) if m else None
m = re.search(r"bytes per rank: sends (\d+) \(token and values\), receives (\d+) \(the reply\)", plan_out)
plan_reuse_bytes = (int(m.group(1)), int(m.group(2))) if m else None
async_plans = h.get("async_plans") or {}
m = re.search(r"bytes per rank: sends (\d+) \(its local plan\), receives (\d+)", plan_out)
plan_bytes = (int(m.group(1)), int(m.group(2))) if m else None
target_next(f"planning a save for {plan_scale or '1,024 ranks × 1,000 tensors'} < {PLAN_SECONDS:g} s on one core",
            lambda: f"{plan_save_s:.3f} s; per rank {plan_bytes[0]:,} bytes sent, {plan_bytes[1]:,} received",
            lambda: plan_save_s < PLAN_SECONDS, ("h5dcp-plan-bench", True, plan_save_s, plan_bytes))
target_next("a plan reused across saves whose sharding did not change: no plans gathered on the next save",
            lambda: f"{plan_reuse_s:.3f} s at {plan_scale}, per rank {plan_reuse_bytes[0]:,} bytes sent and "
                    f"{plan_reuse_bytes[1]:,} received (a token and the values); h5dcp-bench's async saves planned "
                    f"{async_plans['planned']} time(s) and reused the plan {async_plans['reused']} time(s)",
            lambda: plan_reuse_bytes[0] < plan_bytes[0] and plan_reuse_bytes[1] < plan_bytes[1]
            and async_plans["reused"] > 0 and plan_reuse_s <= plan_save_s,
            ("h5dcp-plan-bench", True, plan_reuse_s, plan_reuse_bytes), ("h5dcp-bench", True, async_plans or None))
target_next(f"planning a resharded load for {plan_scale or '1,024 ranks × 1,000 tensors'} < {PLAN_SECONDS:g} s on one "
            "core (every rank's lookups, simulated one after another)",
            lambda: f"{slowest_load[1]:.3f} s (the slowest case: {slowest_load[0]})",
            lambda: slowest_load[1] < PLAN_SECONDS, ("h5dcp-plan-bench", True, slowest_load))
# h5dcp convert in every direction inside a memory cgroup of half the data
# (tests/convert/larger_than_memory_test.py's output, convert.txt).
convert_out = read_text("convert.txt")
conversions = [(m.group(1).strip(), int(m.group(2)), int(m.group(3)), float(m.group(4)))
               for m in re.finditer(r"^(\S.*?)\s+np(\d+): exit (-?\d+), peak .*? limit, ([0-9.]+) s$",
                                    convert_out, re.M)]
convert_equal = len(re.findall(r"^  \S+: equal bit for bit$", convert_out, re.M))
m = re.search(r"^sources: (\d+) MiB of tensors, the largest (\d+) MiB$", convert_out, re.M)
convert_sizes = (int(m.group(1)), int(m.group(2))) if m else None
m = re.search(r"^memory cgroups: v\d under \S+, limit (\d+) MiB", convert_out, re.M)
convert_limit = int(m.group(1)) if m else None
convert_ok = bool(re.search(r"converted each way in a \d+ MiB cgroup, [0-9.]+ s: OK$", convert_out, re.M))
m = re.search(r"^SKIP: (.*)$", convert_out, re.M)
convert_skip = m.group(1) if m else None
convert_directions = sorted({c[0] for c in conversions})
target_next("a conversion of a checkpoint larger than memory streams: every direction of `h5dcp convert` "
            "(torch.save, safetensors, DCP into h5dcp; h5dcp into the three) in a memory cgroup of half the data, "
            "without swap",
            lambda: f"{sum(1 for c in conversions if c[2] == 0)} of {len(conversions)} conversions "
                    f"({len(convert_directions)} directions, at 1 and 2 ranks; to torch.save one process) exited 0, "
                    f"{convert_equal} outputs equal bit for bit: {convert_sizes[0]} MiB of tensors, the largest "
                    f"{convert_sizes[1]} MiB, through a {convert_limit} MiB cgroup; the slowest "
                    f"{max(c[3] for c in conversions):.1f} s",
            lambda: convert_ok and convert_equal == len(conversions) and len(convert_directions) == 6,
            (f"the conversions ({convert_skip or 'not run'})", True,
             conversions or None, convert_sizes, convert_limit))

# h5dcp against the peer, case by case.
versus = []
for case, label in PEER_CASES:
    if case not in p_med or case not in s:
        continue
    text, _ = compare(lambda: f"{p_med[case] / s[case]:.2f} ×", H, (f"{PEER} {label}", p_ok[case], p_med[case]),
                      same=same_data)
    versus.append((label, s[case], p_med[case], text))
for case, mine, label in (("small_save", "small", "save"), ("small_load", "small_load", "load, on every rank"),
                          ("small_load_cold", "small_load_cold", "load, on every rank, cold"),
                          ("transformer_save", "transformer_save", "save"),
                          ("transformer_load", "transformer_load", "load"),
                          ("transformer_load_cold", "transformer_load_cold", "load, cold")):
    same_bytes = tf_same if case.startswith("transformer") else small_same_bytes
    name = "transformer" if case.startswith("transformer") else small_name
    if case in p_med and mine in s:
        text, _ = compare(lambda: f"{p_med[case] / s[mine]:.2f} ×", H,
                          (f"{PEER} {name} {label}", p_ok[case], p_med[case]), same=same_bytes)
        versus.append((f"{name}: {label}", s[mine], p_med[case], text))


def warmup_text():
    w = h.get("warmup_reps", 0)
    return "; ".join(x for x in (
        fill("warmup", reps=plural(w, "untimed repetition")) if w else fill("warmup.none", reps=h["reps"]),
        peer and fill("warmup.peer", peer=PEER, warmups=plural(peer["warmup_reps"], "time"), reps=peer["reps"]),
        ts and fill("warmup.torch_save", warmups=plural(ts.get("warmup_reps", 0), "untimed save"),
                    reps=ts["reps"])) if x)


cpu = subprocess.run(["nproc"], capture_output=True, text=True).stdout.strip()
shape = (f"{layout['tensors']} tensors [{layout['rows']}, {layout['cols']}]" if layout
         else f"{peer['tensors']} tensors [{peer['rows']}, {peer['cols']}]" if peer else "tensors")
fs = f"{disk[1]} on {disk[0]}, mounted {disk[2]}" if len(disk) >= 3 else None
discard = len(disk) >= 3 and "discard" in disk[2].split(",")
caches = [f"h5dcp-bench: {h_cache}" if h_cache else None,
          f"{PEER}: {'loads warm and cold' if peer.get('cold') else 'loads warm only'}" if peer else None]
lines = []  # the tables, between the report's header and its prose
for name, sec, rate, rng, checked in rows:
    # GB/s to 4 significant digits: a small run's rates are hundredths.
    lines.append(f"| {name} | {num(sec) if sec is not None else 'n/a'} | {sig(rate, 4) if rate else ''} | {rng} | "
                 f"{checked} |")
if peer:
    trial = peer.get("thread_count_trial")
    a = peer.get("async", {})
    lines += ["", f"## The peer: {PEER} (torch {peer['torch_version']})", "",
              f"`FileSystemWriter(thread_count={peer['thread_count']}, sync_files=True, single_file_per_rank=True)`"
              + (f", the thread count that saved fastest (median) in a trial of {trial['reps']} timed saves each, "
                 f"after {trial['warmup_reps']} warm-up save each: "
                 + ", ".join(f"{plural(int(n), 'thread')} {statistics.median(v):.3f} s"
                             for n, v in trial["seconds"].items())
                 if trial else " (set with --threads)")
              + (" (the main run). In the alternated saves below it saved with every thread count in "
                 f"every repetition of every round, in turns: medians over {plural(save_ab_rounds, 'round')} "
                 + ", ".join(f"{plural(n, 'thread')} {statistics.median(v):.3f} s ({len(v)} saves)"
                             for n, v in save_ab_p_by_count.items())
                 + f"; the save targets take thread_count {save_ab_p_threads}'s saves, the fastest"
                 + (", and the alternated transformer rounds save with it"
                    if ab_p and all(j.get("thread_count") == save_ab_p_threads for j in ab_p) else "")
                 if save_ab and save_ab_p_threads else "")
              + f". Resharded load: {peer['reshard']}. `{a.get('api', 'async_save')}`: "
              + "; ".join(f"{k.replace('_', ' ')}: {v}" for k, v in a.items() if k != "api") + "."]
    lines += ["", f"| case | h5dcp s | {PEER} s | h5dcp's speed / {PEER}'s |", "|---|---:|---:|---|"]
    for label, hs, ps, text in versus:
        lines.append(f"| {label} | {hs:.3f} | {ps:.3f} | {text} |")
lines += ["", f"## Targets (issue {TARGETS_ISSUE})", "", "| target | measured | |", "|---|---|---|"]
for name, value, ok in targets:
    lines.append(f"| {name} | {value} | {ok} |")
lines += ["", f"## Targets (issue {TARGETS_ISSUE_NEXT})", "", "| target | measured | |", "|---|---|---|"]
for name, value, ok in targets_next:
    lines.append(f"| {name} | {value} | {ok} |")
lines += ["", f"## Targets (issue {TARGETS_ISSUE_DISK}: small tensors)", "", "| target | measured | |", "|---|---|---|"]
for name, value, ok in targets_disk:
    lines.append(f"| {name} | {value} | {ok} |")
if knobs:
    default_what = "the alternated rounds' median" if knob_vs_alternated else "the main run's median"
    lines += ["", "## Knobs measured in this run", "",
              f"| h5dcp save with | seconds | vs default save ({default_what}, {knob_baseline:.3f} s) "
              "| raw write in that run, collective / independent |",
              "|---|---:|---:|---:|"]
    for name, sec, raw, raw_ind, kok, _ in knobs:
        ind = f"{raw_ind:.3f}" if raw_ind else "n/a"
        ratio = f"{knob_baseline / sec:.2f} × the speed" if kok else "not compared: check failed"
        lines.append(f"| {name} | {sec:.3f} | {ratio} | {raw:.3f} / {ind} |")
if plan_out.strip():
    lines += ["", "## Planning at scale (h5dcp-plan-bench, one process, its output)", "", "```",
              *plan_out.strip().splitlines(), "```"]
if traced:
    steps = list(dict.fromkeys(st for g in traced.values() for st, _, _ in g))
    lines += ["", f"## Where the time goes (rank {TRACE_RANK}, {traced_rep} repetition of a traced run, seconds "
              "worked per step)", "",
              "| step | " + " | ".join(traced) + " |", "|---|" + "---:|" * len(traced)]
    for st in steps:
        cells = []
        for g in traced.values():
            worked = sum(w for name, _, w in g if name == st)
            cells.append(f"{worked:.3f}" if any(name == st for name, _, _ in g) else "")
        lines.append(f"| {st} | " + " | ".join(cells) + " |")

# What the machine did during the watched cases' repetitions (the benches'
# "conditions": bench/bench_conditions.hpp, the peer's machine_counters): each
# case's fastest and slowest repetitions, and which counter accounts for the
# time between them.
def conditions_of(runs, key):
    """Every repetition's conditions of case `key` over `runs` (JSONs of one side), in order."""
    return [c for j in runs if j for c in (j.get("conditions") or {}).get(key, [])]


CORES = int(cpu) if cpu.isdigit() else os.cpu_count() or 1
watched_cases = [
    (f"h5dcp save ({gb:.3f} GB), main run", conditions_of([h], "save")),
    ("h5dcp save, alternated rounds", conditions_of(save_ab_h, "save")),
    (f"{PEER} save, main run", conditions_of([peer], "save")),
    (f"{PEER} save, alternated rounds", conditions_of(save_ab_p, SAVE_AB_P_CASE)),
    ("raw MPI-IO write (collective)", conditions_of([h], "raw")),
    ("POSIX pwrite with h5dcp's tricks", conditions_of([h], "posix_write")),
    ("the same with XXH3 and the atomic publish", conditions_of([h], "posix_checkpoint")),
    ("O_DIRECT write", conditions_of([h], "direct_write")),
    ("h5dcp async save, the call (rank 0's counters)", conditions_of([h], "async_blocking")),
    ("h5dcp async save, the call with the shards left alone (rank 0's counters)",
     conditions_of([h], "async_blocking_shards_idle")),
    ("memory copy of the shards (the floor under it)", conditions_of([h], "staging_copy")),
    ("h5dcp load, cold", conditions_of([h], "load_cold")),
    ("POSIX read, cold", conditions_of([h], "posix_read_cold")),
    ("h5dcp save, transformer, alternated rounds", conditions_of(ab_h, "transformer_save")),
    ("transformer's bytes by POSIX calls, one shared file", conditions_of(layout_runs, "transformer_posix_shared")),
    ("the same, one file with a region per rank", conditions_of(layout_runs, "transformer_posix_regions")),
    ("the same, a file per rank", conditions_of(layout_runs, "transformer_posix_per_rank")),
    (f"{PEER} save, transformer, alternated rounds", conditions_of(ab_p, "transformer_save")),
    ("h5dcp save, transformer, free page reporting paused", conditions_of([a for a, _ in ur_pairs], "transformer_save")),
    (f"{PEER} save, transformer, free page reporting paused",
     conditions_of([b for _, b in ur_pairs], "transformer_save")),
]
watched_cases = [(name, reps) for name, reps in watched_cases if len(reps) >= 2]


def cond(c, key, scale=1.0, digits=3):
    v = c.get(key)
    return "" if v is None or v < 0 else f"{v / scale:.{digits}f}"


def disk_seconds_per_gb(c):
    """The time the disk's write requests took (issue to completion, added up) per GB written,
    or None: the same bytes taking longer per GB is the disk (or the host under it) slowing."""
    took, wrote = c.get("disk_write_seconds"), c.get("disk_write_bytes")
    return took / (wrote / 1e9) if took is not None and wrote and took >= 0 and wrote > 0 else None


def accounts_for(slow, fast):
    """The counters' differences between a slow and a fast repetition, in seconds of wall time
    each could account for, largest first: [(seconds, what)]."""
    extra = []
    for key, what, per in (("steal", "the host took the CPUs (steal)", CORES),
                           ("ranks_cpu", "the ranks used more CPU time", h.get("ranks", 2)),
                           ("cpu_some", "tasks waited longer for a CPU", 1),
                           ("io_full", "every task waited longer for I/O", 1)):
        a, b = slow.get(key), fast.get(key)
        if a is not None and b is not None and a >= 0 and b >= 0:
            extra.append(((a - b) / per, what))
    return sorted(extra, reverse=True)


def conditions_text():
    """For each watched case whose slowest repetition took markedly longer than its fastest: what
    changed between the two, from this run's counters."""
    out = []
    for name, reps in watched_cases:
        fast, slow = min(reps, key=lambda c: c["seconds"]), max(reps, key=lambda c: c["seconds"])
        gap = slow["seconds"] - fast["seconds"]
        if fast["seconds"] <= 0 or slow["seconds"] < SLOW_VS_FAST * fast["seconds"] or gap < 0.02:
            continue
        text = f"{name}: {slow['seconds']:.3f} s against {fast['seconds']:.3f} s"
        per_s, per_f = disk_seconds_per_gb(slow), disk_seconds_per_gb(fast)
        if per_s and per_f and slow["disk_write_bytes"] >= 0.1e9:
            text += (f"; the disk wrote {slow['disk_write_bytes'] / 1e9:.2f} GB and"
                     f" {fast['disk_write_bytes'] / 1e9:.2f} GB, its requests taking {per_s:.2f} and {per_f:.2f}"
                     f" s per GB ({per_s / per_f:.2f} ×)")
        handed_s, handed_f = slow.get("host_reported_bytes"), fast.get("host_reported_bytes")
        if handed_s is not None and handed_f is not None and handed_f >= 0 and handed_s >= 1e7:
            text += (f"; the VM handed {handed_s / 1e9:.2f} GB of free memory to its host during the slow one"
                     f" ({handed_f / 1e9:.2f} GB during the fast one)")
        ranked = accounts_for(slow, fast)
        if ranked and ranked[0][0] >= 0.5 * gap:
            text += f". Of the {gap:.3f} s between them, {ranked[0][1]}: {ranked[0][0]:.3f} s"
            if len(ranked) > 1 and ranked[1][0] >= 0.25 * gap:
                text += f"; {ranked[1][1]}: {ranked[1][0]:.3f} s"
        else:
            text += (f". None of the CPU or pressure counters accounts for half of the {gap:.3f} s between"
                     " them" + (f" (the largest: {ranked[0][1]}, {ranked[0][0]:.3f} s)" if ranked else ""))
        out.append(text + ".")
    return out


if watched_cases:
    lines += ["", "## What the machine did during the fastest and slowest repetitions", "",
              "Read around each timed repetition by the benches themselves, outside the timed region: the CPU"
              " time every rank used (this job's alone), and, system-wide (every process on the machine counts),"
              " the host's steal time, the kernel's pressure stall totals (time some task waited for a CPU, time"
              " every task waited for I/O), and what the benchmark directory's block device did: bytes written,"
              " write requests, the time those requests took per GB written (issue to completion, added up),"
              " and the free memory the kernel handed back to the host (a virtual machine's free"
              " page reporting; blank where the kernel does not count it).", "",
              "| case | repetition | seconds | ranks' CPU s | steal s | some task waited for a CPU s "
              "| every task waited for I/O s | disk wrote GB | disk write requests | disk request s per GB "
              "| memory handed to the host GB |",
              "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, reps in watched_cases:
        for which, c in (("fastest", min(reps, key=lambda c: c["seconds"])),
                         ("slowest", max(reps, key=lambda c: c["seconds"]))):
            per_gb = disk_seconds_per_gb(c)
            lines.append(f"| {name} | {which} of {len(reps)} | {c['seconds']:.3f} | {cond(c, 'ranks_cpu')} "
                         f"| {cond(c, 'steal')} | {cond(c, 'cpu_some')} | {cond(c, 'io_full')} "
                         f"| {cond(c, 'disk_write_bytes', 1e9, 2)} | {cond(c, 'disk_writes', 1, 0)} "
                         f"| {'' if per_gb is None else f'{per_gb:.2f}'} "
                         f"| {cond(c, 'host_reported_bytes', 1e9, 2)} |")
    explained = conditions_text()
    if explained:
        lines += ["", f"Where a case's slowest repetition took at least {SLOW_VS_FAST} × its fastest's time, what changed between"
                  " the two (a counter's difference, in seconds of wall time it could account for: steal over the"
                  f" {CORES} cores, the ranks' CPU time over the ranks):", ""]
        lines += [f"- {t}" for t in explained]

# Figures for the prose below, all from this run.


def limits_text():
    """The physical limits, in this run's figures (empty where one is missing)."""
    if not all(k in s for k in ("posix_write", "direct_write")) or not h_ok:
        return ""
    posix, direct, save = s["posix_write"], s["direct_write"], s["save"]
    text = fill("limits", where=fill("limits.alternated") if base_ab else "", posix=num(posix), direct=num(direct),
                save=num(save), ratio=num(bw(save) / bw(posix), 2))
    if "posix_checkpoint" not in s:
        return text
    checked = s["posix_checkpoint"]
    text += fill("limits.checked", checked=num(checked), ratio=num(checked / posix, 2))
    if checked < posix:
        text += fill("limits.bare_slower", bare_cpu=cpu_spread([h], "posix_write"),
                     checked_cpu=cpu_spread([h], "posix_checkpoint"))
    if save > checked > posix:
        text += fill("limits.split", gap=num(save - posix), checks=num(checked - posix), rest=num(save - checked))
    elif save <= checked:
        text += fill("limits.save_faster", ratio=num(save / checked, 2))
    return text


def cold_text():
    """Where the cold loads stand against the disk, in this run's figures."""
    if not cold or "posix_read_cold" not in s or not h_ok:
        return ""
    text = fill("cold", read=num(s["posix_read_cold"]), load=num(s["load_cold"]), reshard=num(s["reshard_cold"]))
    if "direct_read" in s:
        direct = s["direct_read"] / s["posix_read_cold"]
        text += fill("cold.direct", seconds=num(s["direct_read"]), ratio=num(direct, 2),
                     verdict=fill("cold.direct.disk" if direct >= 1 else "cold.direct.faster"))
    if "load_cold" in p_med and p_ok.get("load_cold") and same_data:
        # The disk's figure: the faster of the cold reads, through the page cache or past it.
        disk = p_med["load_cold"] / min(s["posix_read_cold"], s.get("direct_read", s["posix_read_cold"]))
        text += fill("cold.peer", peer=PEER, seconds=num(p_med["load_cold"]), speed=num(1 / disk, 2),
                     which="the faster cold read's" if "direct_read" in s else "the cold read's",
                     target=f"{COLD_VS_DCP:g}", ratio=num(COLD_VS_DCP / disk, 2),
                     end=", faster than the disk." if COLD_VS_DCP / disk > 1 else ".")
    if "load_cold_no_readahead" in s:
        with_hints = h.get("seconds", {}).get("load_cold", [])
        without = h.get("seconds", {}).get("load_cold_no_readahead", [])
        text += fill("cold.no_readahead", seconds=num(s["load_cold_no_readahead"]))
        if with_hints and without:
            overlap = max(min(with_hints), min(without)) <= min(max(with_hints), max(without))
            text += fill("cold.overlap") if overlap else fill(
                "cold.apart", with_hints=f"{min(with_hints):.3f}–{max(with_hints):.3f}",
                without=f"{min(without):.3f}–{max(without):.3f}")
    return text


def layout_text():
    """The transformer's bytes written by POSIX calls in h5dcp's layout, in one file with a region
    per rank, and in the peer's layout (a file per rank), this run; what the gap between the first
    and the last comes from."""
    if not layout_ratio():
        return ""
    shared, own = layout_med["transformer_posix_shared"], layout_med["transformer_posix_per_rank"]
    regions = layout_med.get("transformer_posix_regions")
    text = fill("layout", rounds=len(layout_runs), after=fill(
                "layout.after_drop" if all(j.get("cold") for j in layout_runs) else "layout.in_turn"),
                shared=num(shared), shared_spread=spread(layout_samples["transformer_posix_shared"]),
                regions=fill("layout.regions", seconds=num(regions),
                             spread=spread(layout_samples["transformer_posix_regions"])) if regions else "",
                own=num(own), own_spread=spread(layout_samples["transformer_posix_per_rank"]))
    if layout_costs_little():
        return text + fill("layout.little")
    text += fill("layout.costs", ratio=num(shared / own, 2))
    if regions:
        text += fill("layout.interleaved" if regions - own <= (shared - own) / 2 else "layout.one_file",
                     ratio=num(regions / own, 2))
    return text


def direct_text():
    """The transformer's bytes written as a direct-I/O writer would write them (bench.sh's layout
    rounds), against the buffered writes and the peer's save; what that says of the save's path."""
    d = layout_med.get("transformer_direct_per_rank")
    own = layout_med.get("transformer_posix_per_rank")
    if not (d and own and direct_ok):
        return ""
    text = fill("direct", seconds=num(d), spread=spread(layout_samples["transformer_direct_per_rank"]),
                speed=num(own / d, 2), direct_cpu=cpu_spread(layout_runs, "transformer_direct_per_rank"),
                buffered_cpu=cpu_spread(layout_runs, "transformer_posix_per_rank"))
    if not ("transformer_save" in p_med and tf_same):
        return text + "."
    ratio = p_med["transformer_save"] / d
    return text + fill("direct.peer", ratio=num(ratio, 2), peer=PEER) + fill(
        "direct.worth_it" if ratio >= SMALL_VS_DCP else "direct.not_enough")


def transformer_text():
    if not tf or "transformer_save" not in s or not h_ok:
        return ""
    text = fill("transformer", save=num(s["transformer_save"]), load=num(s["transformer_load"]), cold=fill(
        "transformer.cold", seconds=num(s["transformer_load_cold"]),
        no_hints=fill("transformer.no_hints", seconds=num(s["transformer_load_cold_no_readahead"]))
        if "transformer_load_cold_no_readahead" in s else "") if "transformer_load_cold" in s else "")
    if "transformer_save" in p_med and tf_same:
        text += fill("transformer.peer", peer=PEER, save=num(p_med["transformer_save"]),
                     load=num(p_med["transformer_load"]),
                     cold=fill("transformer.peer.cold", seconds=num(p_med["transformer_load_cold"]))
                     if "transformer_load_cold" in p_med else "")
    if ab_rounds:
        text += fill("transformer.rounds", rounds=plural(ab_rounds, "round"), reps=plural(ab_reps, "timed repetition"),
                     h_spread=spread(ab_samples.get("transformer_save", [])), peer=PEER,
                     p_spread=spread(pc.get("transformer_save", {}).get("seconds", [])))
        if "transformer_save" in main_tf_h and "transformer_save" in main_tf_p:
            text += fill("transformer.main_runs", h_save=num(main_tf_h["transformer_save"]),
                         p_save=num(main_tf_p["transformer_save"]), peer=PEER)
    text += fill("transformer.layout") + layout_text() + fill("transformer.after_cold_load") + after_cold_load_text()
    text += tf_no_wb_text() + direct_text()
    if direct_text():
        return text
    return text + fill("transformer.files_no_help" if layout_costs_little() else "transformer.files_help")


def cpu_spread(runs, key):
    """min-max of the ranks' CPU seconds over the watched repetitions of `key`."""
    cpu = [c["ranks_cpu"] for c in conditions_of(runs, key) if c.get("ranks_cpu", -1) >= 0]
    return spread(cpu)


def after_cold_load_text():
    """The transformer's saves after cold loads against the POSIX writes of the same bytes after a
    page-cache drop alone, from this run's conditions; then what a profile outside the run found."""
    h_cpu, p_cpu = cpu_spread(ab_h, "transformer_save"), cpu_spread(layout_runs, "transformer_posix_shared")
    if not (layout_ratio() and h_cpu and p_cpu):
        return ""
    return fill("after_cold_load", ratio=num(s["transformer_save"] / layout_med["transformer_posix_shared"], 2),
                h_cpu=h_cpu, p_cpu=p_cpu, why=page_reporting_text() or fill("after_cold_load.unexplained"))


def page_reporting_text():
    """What the VM's free page reporting costs the transformer case, from this run's rounds with it
    paused on both sides (empty where they were not run)."""
    if not (paused_ratio("transformer_save") and reporting_on and "transformer_save" in p_med):
        return ""
    hs, ps = ur_h_med["transformer_save"], ur_p_med["transformer_save"]
    h_on, p_on = s["transformer_save"], p_med["transformer_save"]
    load = paused_ratio("transformer_load_cold")
    return fill("page_reporting", h_spread=spread(ur_h_samples["transformer_save"]), h_paused=num(hs), h_on=num(h_on),
                h_gain=num(h_on / hs, 2), peer=PEER, p_spread=spread(ur_p_samples["transformer_save"]),
                p_paused=num(ps), p_on=num(p_on), p_gain=num(p_on / ps, 2), ratio=num(ps / hs, 2),
                load=fill("page_reporting.load", ratio=num(load, 2), peer=PEER) if load else "")


def tf_no_wb_text():
    """The transformer save with early write-back off, in the same alternated rounds, against the
    default and the peer, and what that says of the knob beside its row for the main case."""
    if not (tf_no_wb_med and tf_no_wb_ok and ab_rounds):
        return ""
    default = s["transformer_save"]
    text = fill("tf_no_wb", spread=spread(tf_no_wb_times), median=num(tf_no_wb_med),
                ratio=num(default / tf_no_wb_med, 2),
                peer=fill("tf_no_wb.peer", ratio=num(p_med["transformer_save"] / tf_no_wb_med, 2), peer=PEER)
                if "transformer_save" in p_med and tf_same else "")
    if tf_no_wb_med >= default:
        return text + fill("tf_no_wb.no_cost")
    text += fill("tf_no_wb.costs", after=" after cold loads" if all(j.get("cold") for j in tf_no_wb) else "")
    if no_wb_measured and no_wb[1] > knob_baseline:
        return text + fill("tf_no_wb.trade", ratio=num(no_wb[1] / knob_baseline, 2))
    return text + (fill("tf_no_wb.main_no_gain") if no_wb_measured else ".")


no_wb = next((k for k in knobs if k[0].startswith("early write-back")), None)
# The main case's save with early write-back off was measured and checked (its knob row).
no_wb_measured = bool(no_wb and no_wb[4] and h_ok)


def save_vs_peer_text():
    """How the save-vs-peer targets were measured: alternated rounds where bench.sh ran them."""
    if not save_ab:
        return fill("save_vs_peer.main")
    text = fill("save_vs_peer.rounds", gb=f"{gb:.3f}", rounds=plural(save_ab_rounds, "round"),
                reps=plural(save_ab_reps, "timed repetition"),
                warmups=plural(save_ab_h[0].get("warmup_reps", 1), "warm-up save"), h_spread=spread(save_ab_h_times),
                p_spread=spread(save_ab_p_times), peer=PEER, h_med=num(save_ab_h_med), p_med=num(save_ab_p_med),
                peer_counts=fill("save_vs_peer.counts") if save_ab_p_threads else "")
    if base_ab:
        text += fill("save_vs_peer.baselines")
    if "save" in p_med:
        h_alt, p_alt = save_ab_h_med, save_ab_p_med
        text += fill("save_vs_peer.main_runs", h_main=num(s["save"]), h_spread=h_spread("save"),
                     p_main=num(p_med["save"]), peer=PEER, p_spread=spread(pc["save"]["seconds"]),
                     h_ratio=num(s["save"] / h_alt, 2), p_ratio=num(p_med["save"] / p_alt, 2))
        if s["save"] / h_alt > 1.5 and p_med["save"] / p_alt < 1.5:
            text += fill("save_vs_peer.slower_inside")
    return text


def load_vs_peer_text():
    """How the load-vs-peer targets were measured, where bench.sh ran the alternated load rounds."""
    if not load_ab_med:
        return ""
    labels = {"load": "load", "reshard": "resharded load", "load_cold": "cold load", "reshard_cold": "cold resharded load"}
    return "\n" + fill("load_vs_peer.rounds", rounds=plural(len(load_ab_h), "round"),
                reps=plural(load_ab_h[0].get("reps", 1), "timed repetition"), peer=PEER,
                warmups=plural(load_ab_h[0].get("warmup_reps", 1), "warm-up"),
                cases="; ".join(f"{labels[k]} {num(mine)} s against {num(theirs)} s"
                                for k, (mine, theirs, _) in load_ab_med.items()))


def fastest_raw(raw, raw_independent):
    """The faster of a run's two raw MPI-IO writes (the save's target is taken against it)."""
    return min(t for t in (raw, raw_independent) if t)


def early_writeback_measured():
    """What this run's knob row says of early write-back, in the direction it points: the knob
    has helped on this disk and hurt on it, and a fixed sentence would claim one of the two.
    The knob's run is a process that only saves; where bench.sh ran the alternated rounds
    (processes that only save too, with the knob at its default) their median is what it is
    set against, else the main save, beside the faster raw write of each run, so that a disk
    that was slower or faster for one of the two runs does not pass for the knob's effect."""
    if not no_wb_measured:
        return ""
    off, on = no_wb[1], knob_baseline
    if knob_vs_alternated:
        against, beside = fill("early_writeback.alternated", spread=spread(save_ab_h_times)), ""
    else:
        off_raw, on_raw = fastest_raw(no_wb[2], no_wb[3]), fastest_raw(s["raw"], s.get("raw_independent"))
        against = " with it"
        beside = fill("early_writeback.beside", off=num(off / off_raw, 2), on=num(on / on_raw, 2))
    knob_spread = spread(no_wb[5])
    return fill("early_writeback.paid" if off >= on else "early_writeback.did_not_pay", off=num(off), on=num(on),
                against=against, ratio=num(off / on, 2),
                uneven=fill("early_writeback.uneven", spread=knob_spread) if knob_spread else "") + beside
plan = next((w for st, _, w in traced.get("sync save", []) if st == "save:plan"), None)
sync_worked = sum(w for _, _, w in traced.get("sync save", []))
write_sync = sum(w for st, _, w in traced.get("sync save", []) if st in ("save:write", "save:sync"))
values = dict(
    peer=PEER, ranks=h["ranks"], gb=f"{gb:.3f}", shape=shape,
    medians=", ".join(x for x in (f"{h['reps']} repetitions (h5dcp-bench"
                                  + (f"; its bare copies and async cases {h['async_samples']} times in each,"
                                     f" medians of {h['reps'] * h['async_samples']}" if h.get("async_samples", 1) > 1
                                     else "") + ")",
                                  f"{peer['reps']} ({PEER})" if peer else None,
                                  f"{ts['reps']} (torch.save)" if ts else None) if x),
    machine=f"{platform.node()}, {cpu} cores, {time.strftime('%Y-%m-%d')}" + (f"; file system: {fs}" if fs else "")
    + ". " + "; ".join(c for c in caches if c),
    warmup=warmup_text(), discard=fill("discard") if discard else "", h_equal=equal(h_ok),
    async_checked=fill("async_not_checked") if h.get("async_correct") is None
    else fill("async_checked", equal=equal(h["async_correct"])),
    peer_checked=fill("peer_checked", peer=PEER, equal=equal(peer["ok"])) if peer else fill("peer_not_run", peer=PEER),
    ts_checked=fill("ts_checked", equal=equal(ts_ok)) if ts else "",
    spread_note=fill("spread_note") if peer or ts else "",
    tables="\n".join(lines),
    write_share=fill("write_share", percent=f"{100 * write_sync / sync_worked:.1f}") if sync_worked else "",
    save_vs_peer=save_vs_peer_text() + load_vs_peer_text(), early_writeback=early_writeback_measured(),
    small_floor=fill("small_floor", ratio=f"{s['small_hdf5_bare'] / s['small_as_large']:.2f}", few=few,
                     packed=f"{s['small'] / s['small_as_large']:.2f}") if "small_hdf5_bare" in s and h_ok else "",
    floor_attrs=f"{floor_attrs} attributes" if floor_attrs else "several attributes",
    few=few,
    async_vs_copy=fill("async_vs_copy", blocking=f"{s['async_blocking'] / s['staging_copy']:.2f}",
                       target=f"{100 * ASYNC_BLOCKING:g}", disk=f"{s['staging_copy'] / s['save']:.2g}",
                       percent=f"{100 * s['staging_copy'] / s['save']:.0f}") if "staging_copy" in s and h_ok else "",
    staging_idle=fill("staging_idle", idle=f"{s['staging_copy_idle']:.3f}",
                      idle_vs_touched=f"{s['staging_copy_idle'] / s['staging_copy']:.2f}",
                      call_vs_idle=num(statistics.median(h["seconds"]["async_engine_copy"])
                                       / s["staging_copy_idle"], 2))
    if "staging_copy_idle" in s and h.get("seconds", {}).get("async_engine_copy") else "",
    settle=settle_text(), limits=limits_text(), cold=cold_text(),
    transformer_name=tf_name[0].upper() + tf_name[1:] if tf_name else "A transformer",
    transformer=transformer_text(), plan_lookups=plan_lookups_text(),
    plan_save=fill("plan_save", scale=plan_scale, seconds=f"{plan_save_s:.3f}", received=f"{plan_bytes[1] / 1e6:.1f}",
                   sent=f"{plan_bytes[0] / 1e3:.0f}") if plan_save_s is not None and plan_bytes else "",
    plan_reuse=fill("plan_reuse", seconds=f"{plan_reuse_s:.3f}", sent=f"{plan_reuse_bytes[0]:,}",
                    received=f"{plan_reuse_bytes[1]:,}") if plan_reuse_s is not None and plan_reuse_bytes else "",
    plan_share=fill("plan_share", plan=f"{plan:.4f}", worked=f"{sync_worked:.3f}") if plan is not None else ".",
)
lines = [fill("report", **values), ""]


def local_tier_lines():
    """The node-local tier's section, from bench/local_tier_bench.py's JSON: RESULTS_DIR/local-tier.json,
    else the one kept beside the report (docs/local-tier-run/local-tier.json; bench.sh copies each run's
    there), so that a report made from a run without it keeps the last one. [] where neither exists."""
    lt = load_json("local-tier.json")
    if lt is None:
        try:
            with open(os.path.join(os.path.dirname(os.path.abspath(md_path)), "local-tier-run", "local-tier.json")) as f:
                lt = json.load(f)
        except (OSError, ValueError):
            return []
    failures = lt.get("failures", [])
    failed = lambda what: any(f.startswith(what) for f in failures)  # noqa: E731
    sc, rc, sb = lt["step_cost"], lt["recovery"], lt["shared_bytes"]
    out = [fill("local_tier", shared=f"`{lt['shared_fs']}`" if lt.get("shared_fs") else "a directory on this disk",
                checked=fill("local_tier.checked", equal=equal(not failed("step cost")))
                + (fill("local_tier.failed", failures="; ".join(failures)) if failures else "")), ""]
    runs = sc["runs"]
    means = {k: [r["mean_ms"] for r in v] for k, v in runs.items()}
    # The median steps (the driver's timing), where the JSON has them; else the means stand in.
    steps = {k: [r.get("interval_median_ms", r["mean_ms"]) for r in v] for k, v in runs.items()}
    med_mean = sc["median_ms"]
    med = sc.get("median_interval_ms", sc["median_ms"])
    a, b, a_mean, b_mean = med["none"], med["tier"], med_mean["none"], med_mean["tier"]
    step_ok = not failed("step cost")
    # C (written in the call) where the run measured it.
    has_sync = "sync" in runs
    c = med["sync"] if has_sync else None
    c_mean = med_mean["sync"] if has_sync else None
    mb = None
    if sb["runs"]["none"]["files"]:
        mb = sb["runs"]["none"]["bytes"] / sb["runs"]["none"]["files"] / 1e6
    out += [fill("local_tier.step_cost", ranks=lt["ranks"], steps=sc["steps"], hidden=sc["hidden"],
                 batch=sc["global_batch"], micro=sc["micro_batches"], mb=num(mb, 1) if mb else "?",
                 rounds=plural(sc["rounds"], "round"), none=num(a, 2), none_spread=spread_2(steps["none"]),
                 tier=num(b, 2), tier_spread=spread_2(steps["tier"]), target=f"{LOCAL_STEP_COST:g}",
                 none_mean=num(a_mean, 2), none_mean_spread=spread_2(means["none"]), tier_mean=num(b_mean, 2),
                 tier_mean_spread=spread_2(means["tier"]),
                 ratio_mean=near(b_mean / a_mean, LOCAL_STEP_COST) if step_ok else "–", cores=cpu,
                 ratio=near(b / a, LOCAL_STEP_COST) if step_ok else "not compared: a read-back failed",
                 verdict=verdict(b / a <= LOCAL_STEP_COST) if step_ok else "not judged",
                 sync=num(c, 2) if has_sync else "not measured", sync_spread=spread_2(steps.get("sync", [])),
                 sync_mean=num(c_mean, 2) if has_sync else "", sync_mean_spread=spread_2(means.get("sync", [])),
                 ratio_sync=near(c / a, LOCAL_STEP_COST) if has_sync and step_ok else "–",
                 verdict_sync=verdict(c / a <= LOCAL_STEP_COST) if has_sync and step_ok else "not judged",
                 ratio_sync_mean=near(c_mean / a_mean, LOCAL_STEP_COST) if has_sync and step_ok else "–",
                 trace=trace_text("local_tier.step_trace", sc.get("traced_seconds"), 1e3, "ms", 1)), ""]
    sh, lo = rc["samples"]["shared"], rc["samples"]["local"]
    ta, tb = rc["median_seconds"]["shared"], rc["median_seconds"]["local"]
    rc_gb = rc["checkpoint_bytes"] / 1e9
    rec_ok = not failed("recovery")
    cached = [x["cached_checkpoint_bytes"] for x in sh if x.get("cached_checkpoint_bytes") is not None]
    # Megabytes to three significant digits: a smoke run's tiny checkpoint still shows what it measured.
    out += [fill("local_tier.recovery", step=rc["step"], mb=sig(rc_gb * 1e3), hidden=rc["hidden"],
                 save_ranks=rc["save_ranks"], nodes=rc["nodes"], load_ranks=rc["load_ranks"],
                 cache="" if rc["cold"] else " (its pages evicted; the page cache not dropped: not root)",
                 shared=num(ta), shared_spread=spread([x["seconds"] for x in sh]), shared_rate=sig(rc_gb * 1e3 / ta),
                 local=num(tb), local_spread=spread([x["seconds"] for x in lo]), local_rate=sig(rc_gb * 1e3 / tb),
                 target=f"{LOCAL_RECOVERY_SPEEDUP:g}",
                 ratio=near(ta / tb, LOCAL_RECOVERY_SPEEDUP) if rec_ok else "not compared: a check failed",
                 verdict=verdict(ta / tb >= LOCAL_RECOVERY_SPEEDUP) if rec_ok else "not judged",
                 drop=fill("local_tier.recovery.drop" if rc["cold"] else "local_tier.recovery.no_drop"),
                 fincore=fill("local_tier.recovery.fincore", cached=f"{max(cached):,}") if cached
                 else fill("local_tier.recovery.no_fincore"), equal=equal(rec_ok),
                 trace=trace_text("local_tier.recovery_trace", rc.get("traced_seconds"), 1, "s", 3)), ""]
    per = 100
    wn, wt = sb["runs"]["none"], sb["runs"]["tier"]
    scale = per / sb["steps"]
    out += [fill("local_tier.bytes", per=per, drain=wt["checkpoint_every"], ranks=lt["ranks"], steps=sb["steps"],
                 none=num(wn["bytes"] * scale / 1e6, 1), none_files=wn["files"],
                 tier=num(wt["bytes"] * scale / 1e6, 1), tier_files=wt["files"],
                 ratio=num(wn["bytes"] / wt["bytes"], 1) if wt["bytes"] else "–",
                 none_ms=num(wn["steps_ms"], 2), tier_ms=num(wt["steps_ms"], 2)), ""]
    return out


DURABLE_SIDES = ("sync", "shard", "default", "small")


def durable_lines():
    """Saves until durable, each right after a settled disk (bench.sh's ab/durable-SIDE-N.json: the
    sync save, h5dcp's async saves with three staging sizes, the peer's async save, the sides taking
    turns going first in each round), with issue 51's targets and where the time goes (rank 0's
    traced steps, ab/durable-SIDE-N-trace.txt). [] where the run has no such rounds."""
    rounds = []
    for n in range(1, 100):
        found = {side: load_json(f"ab/durable-{side}-{n}.json") for side in DURABLE_SIDES + ("dcp",)}
        if not all(found.values()):
            break
        rounds.append(found)
    if not rounds:
        return []
    key = {"sync": "save"}
    times = {side: [t for r in rounds for t in r[side].get("seconds", {}).get(key.get(side, "async_total"), [])]
             for side in DURABLE_SIDES}
    times["dcp"] = [t for r in rounds for t in r["dcp"]["cases"]["async_total"]["seconds"]]
    ok = {side: all(r[side].get("correct") and (side == "sync" or r[side].get("async_correct")) for r in rounds)
          for side in DURABLE_SIDES}
    ok["dcp"] = all(r["dcp"]["cases"]["async_total"]["ok"] for r in rounds)
    if not all(times.values()):
        return []
    med = {side: statistics.median(v) for side, v in times.items()}
    first = rounds[0]
    shard = first["shard"]["shard_bytes"]
    staging = {side: first[side]["staging_bytes"] for side in ("shard", "default", "small")}
    mb = lambda b: sig(b / 1e6)  # noqa: E731
    names = {"sync": "h5dcp `save` (A)",
             "shard": f"h5dcp `async_save`, staging memory of the shard's size ({mb(staging['shard'])} MB)",
             "default": f"h5dcp `async_save`, the default staging memory ({mb(staging['default'])} MB)",
             "small": f"h5dcp `async_save`, a smaller staging memory ({mb(staging['small'])} MB)",
             "dcp": f"{PEER} `async_save` (thread_count {first['dcp']['thread_count']}, staged in the call)"}
    out = [fill("durable", rounds=plural(len(rounds), "round"), reps=first["sync"]["reps"], shard=mb(shard),
                ranks=first["sync"]["ranks"], gb=num(first["sync"]["gb"])), "",
           "| save until durable, each right after a settled disk, the sides taking turns going first "
           "(the sync save A against each async save) | seconds (median) | min-max seconds | × A's time | checked |",
           "|---|---:|---:|---:|---|"]
    for side in DURABLE_SIDES + ("dcp",):
        ratio = "" if side == "sync" else f"{med[side] / med['sync']:.2f}" if ok[side] and ok["sync"] else "n/a"
        out.append(f"| {names[side]} | {num(med[side])} | {spread(times[side])} | {ratio} | "
                   f"{check_cell(ok[side])} (read back) |")
    staged = {"default": "the default staging", "small": "a smaller staging", "shard": "staging of the shard's size"}
    figures_of = lambda name: (names[name], ok[name], med[name])  # noqa: E731
    rows = []
    for name in ("default", "small", "shard"):
        target(f"async save until durable ≤ {DURABLE_VS_SYNC:g} × the sync save, {staged[name]} "
               f"({mb(staging[name])} MB; the shard {mb(shard)} MB)",
               lambda name=name: f"{near(med[name] / med['sync'], DURABLE_VS_SYNC)} × (h5dcp's async save "
                                 f"{num(med[name])} s against its sync save {num(med['sync'])} s, medians of the "
                                 "rounds above)",
               lambda name=name: med[name] <= DURABLE_VS_SYNC * med["sync"], figures_of(name), figures_of("sync"),
               same=True, table=rows)
    target(f"async save until durable ≥ {DURABLE_VS_DCP:g} × {PEER}'s async save (the default staging)",
           lambda: f"{near(med['dcp'] / med['default'], DURABLE_VS_DCP)} × its speed (h5dcp {num(med['default'])} s "
                   f"against {num(med['dcp'])} s, medians of the rounds above)",
           lambda: med["dcp"] >= DURABLE_VS_DCP * med["default"], figures_of("default"), figures_of("dcp"),
           same=True, table=rows)
    out += ["", f"Targets of issue {TARGETS_ISSUE_DISK}:", "", "| target | measured | |", "|---|---|---|"]
    out += [f"| {name} | {value} | {judged} |" for name, value, judged in rows]
    # Where the time goes: rank 0's worked seconds per step, the median over the timed saves.
    steps = {}
    for side in DURABLE_SIDES:
        per_save = []
        for n in range(1, len(rounds) + 1):
            for _, rep, traced_steps in traced_saves(f"ab/durable-{side}-{n}-trace.txt"):
                if rep >= 0:
                    worked = {}
                    for step, _, w in traced_steps:
                        worked[step] = worked.get(step, 0) + w
                    per_save.append(worked)
        steps[side] = per_save
    if all(steps.values()):
        order = list(dict.fromkeys(st for side in DURABLE_SIDES for save in steps[side] for st in save))
        out += ["", fill("durable.steps", rank=TRACE_RANK, saves=len(steps["sync"])), "",
                "| step | `save` | " + " | ".join(f"`async_save`, {mb(staging[side])} MB of staging"
                                                 for side in DURABLE_SIDES[1:]) + " |",
                "|---|" + "---:|" * len(DURABLE_SIDES)]
        for st in order:
            out.append(f"| {st} | " + " | ".join(
                num(statistics.median([save.get(st, 0.0) for save in steps[side]])) for side in DURABLE_SIDES) + " |")
    return out + [""]


def trace_text(block, traced, scale, unit, digits):
    """The traced steps (H5DCP_TRACE) of a local-tier run, the largest first, those under a hundredth of
    the whole left out; "" where the JSON has none."""
    if not traced:
        return ""
    total = sum(traced.values())
    shown = sorted(((v, k) for k, v in traced.items() if v >= total / 100), reverse=True)
    return fill(block, list=", ".join(f"`{k}` {num(v * scale, digits)} {unit}" for v, k in shown),
                total=num(total * scale, digits))


def spread_2(values):
    return f"{min(values):.2f}-{max(values):.2f}" if values else ""


lines += durable_lines()
lines += local_tier_lines()
# The GPU run (issue 20) is recorded apart, on a lent GPU machine
# (scripts/gpu-check.sh), its results kept beside the report in gpu-run/.
gpu_run = os.path.join(os.path.dirname(os.path.abspath(md_path)), "gpu-run")
if os.path.isdir(gpu_run):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import gpu_report  # noqa: E402
    lines += gpu_report.render(gpu_run) + [""]
with open(md_path, "w") as f:
    f.write("\n".join(lines) + "\n")

if png_path == "-":
    sys.exit(0)
import matplotlib  # noqa: E402
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
# Only sides whose check passed (or that are not read back: the raw baselines) are drawn.
drawn = [(n, rate) for n, sec, rate, _, checked in rows if rate and "failed" not in checked]
names = [n for n, _ in drawn]
rates = [r for _, r in drawn]
# A bar per row, tall enough for its label.
fig, ax = plt.subplots(figsize=(12, 1.5 + 0.28 * len(names)))
ax.barh(names[::-1], rates[::-1], color=["#4c72b0" if n.startswith("h5dcp") else "#999999" for n in names[::-1]])
ax.set_xlabel("GB/s (higher is better)")
ax.set_title(f"h5dcp vs {PEER} and baselines\n{h['ranks']} ranks, {gb:.2f} GB, fsync on")
fig.tight_layout()
fig.savefig(png_path, dpi=90)
