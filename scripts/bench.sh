#!/usr/bin/env bash
# The whole speed comparison in one command; writes docs/PERFORMANCE.md and
# docs/performance.png. Runs, on the same data and disk, in one go:
#   h5dcp-bench under ROMIO (the project default): raw MPI-IO write, h5dcp
#     save / load / resharded load / async save / 5,000 small tensors, memory;
#   the raw MPI-IO write under OMPIO too (the faster component, for reference);
#   PyTorch DCP (../shared/peers/torch_dcp_bench.py, beside the project: this
#     script, and only it, depends on ../shared);
#   torch.save of the whole (gathered) state from one process.
# Knobs (environment): GIB (1), REPS (5), RANKS (2), BENCH_DIR (/tmp/h5dcp-bench),
# DROP_CACHES=1 to drop the page cache before loads (root only).
set -euo pipefail
cd "$(dirname "$0")/.."
GIB=${GIB:-1}
REPS=${REPS:-5}
RANKS=${RANKS:-2}
DIR=${BENCH_DIR:-/tmp/h5dcp-bench}
PEERS=${PEERS:-../shared/peers}
drop=()
[ "${DROP_CACHES:-0}" = 1 ] && drop=(--drop-caches)

scripts/install-deps.sh
if ! /usr/bin/python3 -c "import matplotlib" 2>/dev/null; then
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo=sudo
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends python3-matplotlib >/dev/null
fi
scripts/build.sh
build=${H5DCP_BUILD_DIR:-build}
out=$(mktemp -d)
mkdir -p "$DIR"
export OMPI_MCA_mpi_yield_when_idle=1
if [ "$(id -u)" -eq 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi

echo "== h5dcp-bench (ROMIO), $RANKS ranks, $GIB GiB, $REPS reps"
OMPI_MCA_io=romio321 mpiexec -n "$RANKS" "$build/apps/h5dcp-bench" --gib "$GIB" --reps "$REPS" --dir "$DIR" \
  --json "$out/h5dcp.json" "${drop[@]}"
echo "== knobs: early write-back off; ROMIO data sieving and collective buffering off (hints file)"
H5DCP_WRITEBACK_MIB=0 OMPI_MCA_io=romio321 mpiexec -n "$RANKS" -x H5DCP_WRITEBACK_MIB "$build/apps/h5dcp-bench" \
  --gib "$GIB" --reps "$REPS" --dir "$DIR" --save-only --json "$out/no-writeback.json" | grep "h5dcp save"
printf 'romio_ds_write disable\nromio_cb_write disable\n' > "$out/romio-hints"
ROMIO_HINTS="$out/romio-hints" OMPI_MCA_io=romio321 mpiexec -n "$RANKS" -x ROMIO_HINTS "$build/apps/h5dcp-bench" \
  --gib "$GIB" --reps "$REPS" --dir "$DIR" --save-only --json "$out/hints.json" | grep "h5dcp save"
echo "== where the time goes: one traced run of 2 repetitions (H5DCP_TRACE=1; the report shows the second)"
H5DCP_TRACE=1 OMPI_MCA_io=romio321 mpiexec -n "$RANKS" -x H5DCP_TRACE "$build/apps/h5dcp-bench" --gib "$GIB" \
  --reps 2 --dir "$DIR" 2> "$out/trace.txt" | tail -3
echo "== raw MPI-IO write under OMPIO"
OMPI_MCA_io=ompio mpiexec -n "$RANKS" "$build/apps/h5dcp-bench" --gib "$GIB" --reps "$REPS" --dir "$DIR" --raw-only \
  --json "$out/ompio.json" | tail -1
echo "== PyTorch DCP ($PEERS/torch_dcp_bench.py), $REPS runs"
for _ in $(seq "$REPS"); do
  mpiexec -n "$RANKS" /usr/bin/python3 "$PEERS/torch_dcp_bench.py" "$DIR/dcp" "$GIB" "${drop[@]}" | tee -a "$out/dcp.txt"
done
echo "== torch.save of the whole state from one process"
/usr/bin/python3 scripts/torch_save_bench.py "$DIR/torch.pt" "$GIB" "$REPS" | tee "$out/torch_save.json"
/usr/bin/python3 scripts/performance_report.py "$out" docs/PERFORMANCE.md docs/performance.png
rm -rf "$DIR"
echo "wrote docs/PERFORMANCE.md and docs/performance.png"
