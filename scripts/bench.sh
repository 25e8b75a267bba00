#!/usr/bin/env bash
# The whole speed comparison in one command; writes docs/PERFORMANCE.md and
# docs/performance.png. Runs, on the same data and disk, in one go:
#   h5dcp-bench under ROMIO (the project default): raw MPI-IO write, the POSIX
#     limits (pwrite with h5dcp's tricks, O_DIRECT, reads), h5dcp save / load /
#     resharded load (loads warm and cold) / async save / staging in the
#     background / 5,000 small tensors saved and loaded; the memory each of a
#     save, an async save, a load and a resharded load adds, each in a process
#     of its own;
#   the raw MPI-IO write under OMPIO too (the faster component, for reference);
#   the peer benchmark, PyTorch's own DCP (bench/dcp_peer_bench.py, in the
#     project's virtual environment: not h5dcp, run for comparison);
#   torch.save of the whole (gathered) state from one process;
#   h5dcp-plan-bench: a save's and a resharded load's planning at 1,024 ranks;
#   h5dcp convert in every direction on twice the memory of a cgroup it runs in;
#   the node-local tier (issue 50, bench/local_tier_bench.py driving h5dcp-train
#     on fake nodes, local directories in /dev/shm): the per-step cost of a local
#     checkpoint every step, recovery from the tier against the shared directory
#     (cold), the bytes the shared directory gets; its JSON is also kept in
#     docs/local-tier-run/ (the report falls back on it).
# Every side times fsync'd saves from a settled disk; the report states each
# side's warm-up and refuses a ratio for a side whose own check failed.
# Loads are timed warm and, as root, cold (the page cache dropped just before).
# Knobs (environment): GIB (1), REPS (5), RANKS (2), BENCH_DIR (/tmp/h5dcp-bench),
# COLD=0 for warm loads only, DCP_THREADS (auto: the peer's FileSystemWriter
# thread_count in the main run, tried 1, 2, 4; the alternated rounds time every
# count and take the best), AB_ROUNDS (3) and AB_REPS (2): the transformer
# case run by h5dcp-bench and the peer alternately, AB_ROUNDS times each with
# AB_REPS timed repetitions after a warm-up (the report's transformer figures;
# each round also runs h5dcp-bench's case with early write-back off, with the
# loads' read-ahead hints off, and its
# --transformer-layouts: the same bytes by POSIX calls in three file layouts and
# as a direct-I/O writer would write them (O_DIRECT, a file per rank),
# and, as root in a virtual machine with free page reporting, both sides' case
# once more with that reporting paused (bench/page_reporting.sh; restored
# right after, and on exit));
# SAVE_AB_ROUNDS (5): the same for the 1 GiB save, with the save's baselines (raw MPI-IO and POSIX
# writes) as a third side (the save targets);
# ASYNC_SAMPLES (3): h5dcp-bench's bare copies and async cases, per repetition;
# LOAD_AB_ROUNDS (3): the same for the 1 GiB loads (warm and cold, same and resharded sharding),
# each repetition reading the file its own side just saved, untimed (h5dcp-bench's also reads the
# same bytes cold with POSIX calls, the cold loads' baseline);
# DURABLE_ROUNDS (5): rounds of saves until durable, each right after a settled disk (the sync
# save, h5dcp's async saves with 3 staging sizes, the peer's async save), AB_REPS each; as many
# rounds as sides, so that each side goes first once and holds every position once.
set -euo pipefail
cd "$(dirname "$0")/.."
GIB=${GIB:-1}
REPS=${REPS:-5}
RANKS=${RANKS:-2}
DIR=${BENCH_DIR:-/tmp/h5dcp-bench}
DCP_THREADS=${DCP_THREADS:-auto}
AB_ROUNDS=${AB_ROUNDS:-3}
SAVE_AB_ROUNDS=${SAVE_AB_ROUNDS:-5}
DURABLE_ROUNDS=${DURABLE_ROUNDS:-5}
LOAD_AB_ROUNDS=${LOAD_AB_ROUNDS:-3}
AB_REPS=${AB_REPS:-2}
ASYNC_SAMPLES=${ASYNC_SAMPLES:-3}
cold=()
[ "${COLD:-1}" = 0 ] && cold=(--no-cold)

scripts/install-deps.sh
source bench/page_reporting.sh
trap resume_page_reporting EXIT
source scripts/venv-paths.sh
py="$H5DCP_VENV/bin/python"
# The report's chart; only this script needs it, so it is not in install-deps.sh.
"$py" -c "import matplotlib" 2>/dev/null || "$py" -m pip install -q matplotlib
scripts/build.sh
build=${H5DCP_BUILD_DIR:-build}
out=$(mktemp -d)
mkdir -p "$DIR"
export OMPI_MCA_mpi_yield_when_idle=1
if [ "$(id -u)" -eq 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi

findmnt -no SOURCE,FSTYPE,OPTIONS -T "$DIR" > "$out/disk.txt" 2>/dev/null || true
# A side whose check fails still writes its JSON (and exits non-zero): go on,
# the report says which check failed.
status=0
echo "== h5dcp-bench (ROMIO), $RANKS ranks, $GIB GiB, $REPS reps"
OMPI_MCA_io=romio321 mpiexec -n "$RANKS" "$build/bench/h5dcp-bench" --gib "$GIB" --reps "$REPS" --dir "$DIR" \
  --async-samples "$ASYNC_SAMPLES" --json "$out/h5dcp.json" "${cold[@]}" | tee "$out/h5dcp.txt" || status=1
echo "== memory a save, an async save, a load and a resharded load add: each in a process of its own"
# (in the run above every case's freed buffers stay in glibc's heap and would hide the next one's);
# "save" first: the loads read the file it leaves.
for case in save load reshard async; do
  OMPI_MCA_io=romio321 mpiexec -n "$RANKS" "$build/bench/h5dcp-bench" --gib "$GIB" --dir "$DIR" --memory-only "$case" \
    --json "$out/memory-$case.json" || status=1
done
echo "== knobs: early write-back off; ROMIO data sieving and collective buffering off (hints file)"
H5DCP_WRITEBACK_MIB=0 OMPI_MCA_io=romio321 mpiexec -n "$RANKS" -x H5DCP_WRITEBACK_MIB "$build/bench/h5dcp-bench" \
  --gib "$GIB" --reps "$REPS" --dir "$DIR" --save-only --json "$out/no-writeback.json" | grep "h5dcp save"
printf 'romio_ds_write disable\nromio_cb_write disable\n' > "$out/romio-hints"
ROMIO_HINTS="$out/romio-hints" OMPI_MCA_io=romio321 mpiexec -n "$RANKS" -x ROMIO_HINTS "$build/bench/h5dcp-bench" \
  --gib "$GIB" --reps "$REPS" --dir "$DIR" --save-only --json "$out/hints.json" | grep "h5dcp save"
echo "== where the time goes: one traced run of 2 repetitions (H5DCP_TRACE=1; the report shows the second)"
H5DCP_TRACE=1 OMPI_MCA_io=romio321 mpiexec -n "$RANKS" -x H5DCP_TRACE "$build/bench/h5dcp-bench" --gib "$GIB" --no-cold \
  --reps 2 --dir "$DIR" 2> "$out/trace.txt" | tail -3
echo "== planning at scale: h5dcp-plan-bench (1,024 ranks x 1,000 tensors, one process)"
"$build/bench/h5dcp-plan-bench" | tee "$out/plan.txt" || status=1
echo "== raw MPI-IO write under OMPIO"
OMPI_MCA_io=ompio mpiexec -n "$RANKS" "$build/bench/h5dcp-bench" --gib "$GIB" --reps "$REPS" --dir "$DIR" --raw-only \
  --json "$out/ompio.json" | tail -1
echo "== peer: PyTorch DCP (bench/dcp_peer_bench.py), $REPS reps after one warm-up"
mpiexec -n "$RANKS" "$py" bench/dcp_peer_bench.py --dir "$DIR/dcp" --gib "$GIB" --reps "$REPS" \
  --threads "$DCP_THREADS" --json "$out/dcp.json" "${cold[@]}" || status=1
# The 1 GiB save and the transformer case once more, h5dcp-bench and the peer
# alternately, so that both meet the disk in the same state (in the runs above
# each side's saves follow its own other cases, minutes from the other side's;
# this disk's speed for gigabytes written right after others varies more than
# the two differ). In the save rounds the peer saves with every thread_count
# in every repetition (--threads each; the report takes the count whose saves
# over all rounds have the lowest median: tuned on as many samples as timed);
# the transformer rounds then take that count.
mkdir -p "$out/ab"
threads=$("$py" -c 'import json, sys; print(json.load(open(sys.argv[1]))["thread_count"])' "$out/dcp.json" 2>/dev/null ||
  echo 2)
# The save's baselines (raw MPI-IO writes, the POSIX writes) run in the same rounds, a process of
# their own, so that each save target is judged against a baseline timed where the save sits; the
# three take turns going first.
save_h5dcp() {
  OMPI_MCA_io=romio321 mpiexec -n "$RANKS" "$build/bench/h5dcp-bench" --save-only --no-raw --gib "$GIB" \
    --reps "$AB_REPS" --dir "$DIR" --json "$out/ab/save-h5dcp-$round.json" | grep "h5dcp save" || status=1
}
save_dcp() {
  mpiexec -n "$RANKS" "$py" bench/dcp_peer_bench.py --save-only --small-count 0 --gib "$GIB" --reps "$AB_REPS" \
    --dir "$DIR/dcp" --threads each --json "$out/ab/save-dcp-$round.json" | grep "^save" || status=1
}
save_baselines() {
  OMPI_MCA_io=romio321 mpiexec -n "$RANKS" "$build/bench/h5dcp-bench" --baselines-only --gib "$GIB" \
    --reps "$AB_REPS" --dir "$DIR" --json "$out/ab/save-baselines-$round.json" | grep -E "raw|POSIX|XXH3" || status=1
}
save_sides=(save_h5dcp save_dcp save_baselines)
echo "== the 1 GiB save, h5dcp-bench, the peer and the save's baselines alternately ($SAVE_AB_ROUNDS rounds of $AB_REPS reps)"
for round in $(seq "$SAVE_AB_ROUNDS"); do
  for k in 0 1 2; do "${save_sides[$(((round - 1 + k) % 3))]}"; done
done
# The peer's thread count from here on: the one that saved fastest over every save round (the main
# run's short trial where those did not time every count).
threads=$("$py" bench/dcp_thread_choice.py "$out"/ab/save-dcp-*.json 2>/dev/null || echo "$threads")
# The 1 GiB loads, h5dcp-bench and the peer alternately, taking turns going first: in the main run
# each side's loads follow its own cases, minutes from the other side's, and the ratio of the two
# moved with the peer's side from run to run (issue 51, target 4). Each repetition saves untimed,
# then loads what it saved, as in the main run.
load_h5dcp() {
  OMPI_MCA_io=romio321 mpiexec -n "$RANKS" "$build/bench/h5dcp-bench" --load-only --gib "$GIB" --reps "$AB_REPS" \
    --dir "$DIR" "${cold[@]}" --json "$out/ab/load-h5dcp-$round.json" | grep "h5dcp .*load" || status=1
}
load_dcp() {
  mpiexec -n "$RANKS" "$py" bench/dcp_peer_bench.py --load-only --small-count 0 --transformer-layers 0 --gib "$GIB" \
    --reps "$AB_REPS" --dir "$DIR/dcp" --threads "$threads" "${cold[@]}" --json "$out/ab/load-dcp-$round.json" |
    grep -E "^(load|reshard)" || status=1
}
load_sides=(load_h5dcp load_dcp)
echo "== the 1 GiB loads, h5dcp-bench and the peer alternately ($LOAD_AB_ROUNDS rounds of $AB_REPS reps)"
for round in $(seq "$LOAD_AB_ROUNDS"); do
  for k in 0 1; do "${load_sides[$(((round - 1 + k) % 2))]}"; done
done
# Saves until durable, each right after a settled disk (issue 51): the sync save, h5dcp's async save
# with staging memory of the shard's size, of the library's default size (256 MiB) and of 64 MiB,
# and the peer's async save (staged in the call), in the same rounds, taking turns going first. In
# the main run the async saves follow the bare copies and the waits for free page reporting, where
# the sync save follows other saves: not the same position. h5dcp's sides are traced (H5DCP_TRACE)
# for the report's step table; the trace is a few lines per step.
durable_side() {
  local name=$1
  shift
  H5DCP_TRACE=1 OMPI_MCA_io=romio321 mpiexec -n "$RANKS" -x H5DCP_TRACE "$build/bench/h5dcp-bench" --no-raw \
    --gib "$GIB" --reps "$AB_REPS" --dir "$DIR" "$@" --json "$out/ab/durable-$name-$round.json" \
    2> "$out/ab/durable-$name-$round-trace.txt" | grep "h5dcp" || status=1
}
durable_sync() { durable_side sync --save-only; }
durable_shard() { durable_side shard --async-only; }
durable_default() { durable_side default --async-only --staging-mib default; }
durable_small() { durable_side small --async-only --staging-mib 64; }
durable_dcp() {
  mpiexec -n "$RANKS" "$py" bench/dcp_peer_bench.py --async-only --small-count 0 --gib "$GIB" --reps "$AB_REPS" \
    --dir "$DIR/dcp" --threads "$threads" --json "$out/ab/durable-dcp-$round.json" "${cold[@]}" | grep "^async" ||
    status=1
}
durable_sides=(durable_sync durable_shard durable_default durable_small durable_dcp)
echo "== saves until durable: the sync save, h5dcp's async saves (3 staging sizes) and the peer's, alternately ($DURABLE_ROUNDS rounds of $AB_REPS reps)"
for round in $(seq "$DURABLE_ROUNDS"); do
  for k in "${!durable_sides[@]}"; do
    "${durable_sides[$(((round - 1 + k) % ${#durable_sides[@]}))]}"
  done
done
echo "== the transformer case, h5dcp-bench and the peer (thread_count $threads) alternately ($AB_ROUNDS rounds of $AB_REPS reps)"
for round in $(seq "$AB_ROUNDS"); do
  OMPI_MCA_io=romio321 mpiexec -n "$RANKS" "$build/bench/h5dcp-bench" --transformer-only --gib 0.01 --small-count 0 \
    --reps "$AB_REPS" --dir "$DIR" --json "$out/ab/h5dcp-$round.json" "${cold[@]}" | tail -4 || status=1
  # The same with early write-back off: the knob, measured where it matters most (a save right
  # after cold loads, whose page-cache drop this case's saves follow).
  H5DCP_WRITEBACK_MIB=0 OMPI_MCA_io=romio321 mpiexec -n "$RANKS" -x H5DCP_WRITEBACK_MIB "$build/bench/h5dcp-bench" \
    --transformer-only --gib 0.01 --small-count 0 --reps "$AB_REPS" --dir "$DIR" \
    --json "$out/ab/no-writeback-h5dcp-$round.json" "${cold[@]}" | grep transformer_save || status=1
  # ... and with the loads' read-ahead hints off (the cold load's knob; a run of its own, so that
  # the default run's saves follow the same steps as the peer's).
  H5DCP_READAHEAD_MIB=0 OMPI_MCA_io=romio321 mpiexec -n "$RANKS" -x H5DCP_READAHEAD_MIB "$build/bench/h5dcp-bench" \
    --transformer-only --gib 0.01 --small-count 0 --reps "$AB_REPS" --dir "$DIR" \
    --json "$out/ab/no-readahead-h5dcp-$round.json" "${cold[@]}" | grep transformer_load_cold || status=1
  mpiexec -n "$RANKS" "$py" bench/dcp_peer_bench.py --transformer-only --gib 0.01 --small-count 0 --reps "$AB_REPS" \
    --dir "$DIR/dcp" --threads "$threads" --json "$out/ab/dcp-$round.json" "${cold[@]}" | grep transformer || status=1
  # What the one-file layout alone costs: the same bytes by POSIX calls into one shared file, one
  # file with a region per rank, and a file per rank, each after a page-cache drop.
  OMPI_MCA_io=romio321 mpiexec -n "$RANKS" "$build/bench/h5dcp-bench" --transformer-layouts --gib 0.01 --small-count 0 \
    --reps "$AB_REPS" --dir "$DIR" --json "$out/ab/layouts-h5dcp-$round.json" "${cold[@]}" | grep -E "posix|direct" || status=1
  # Both sides once more with the VM's free page reporting paused: what the host taking freed
  # memory away costs each (the JSONs record the knob as it was).
  if pause_page_reporting; then
    OMPI_MCA_io=romio321 mpiexec -n "$RANKS" "$build/bench/h5dcp-bench" --transformer-only --gib 0.01 --small-count 0 \
      --reps "$AB_REPS" --dir "$DIR" --json "$out/ab/unreported-h5dcp-$round.json" "${cold[@]}" |
      grep transformer_save || status=1
    mpiexec -n "$RANKS" "$py" bench/dcp_peer_bench.py --transformer-only --gib 0.01 --small-count 0 --reps "$AB_REPS" \
      --dir "$DIR/dcp" --threads "$threads" --json "$out/ab/unreported-dcp-$round.json" "${cold[@]}" |
      grep transformer_save || status=1
    resume_page_reporting
  fi
done
echo "== conversions of a checkpoint larger than memory: each direction in a memory cgroup of half the data"
# tests/convert/larger_than_memory_test.py (CTest's convert.larger_than_memory);
# it skips (77) without root or a memory controller, and the report says so.
rc=0
OMPI_MCA_io=romio321 "$py" tests/convert/larger_than_memory_test.py "$build/apps/h5dcp" "$(command -v mpiexec)" \
  "$DIR/convert" > "$out/convert.txt" 2>&1 || rc=$?
tail -n 1 "$out/convert.txt"
[ "$rc" -eq 0 ] || [ "$rc" -eq 77 ] || status=1
echo "== torch.save of the whole state from one process"
"$py" bench/torch_save_bench.py "$DIR/torch.pt" "$GIB" "$REPS" | tee "$out/torch_save.json" || status=1
echo "== the node-local tier (issue 50): bench/local_tier_bench.py, fake nodes on this machine"
"$py" bench/local_tier_bench.py --train "$build/apps/h5dcp-train" --dir "$DIR/local-tier" \
  --json "$out/local-tier.json" || status=1
if [ -f "$out/local-tier.json" ]; then mkdir -p docs/local-tier-run && cp "$out/local-tier.json" docs/local-tier-run/; fi
"$py" bench/performance_report.py "$out" docs/PERFORMANCE.md docs/performance.png
rm -rf "$DIR"
echo "wrote docs/PERFORMANCE.md and docs/performance.png (the run's raw results: $out)"
[ "$status" -eq 0 ] || echo "bench.sh: a side's correctness check failed or it did not finish; see the report" >&2
exit "$status"
