#!/usr/bin/env bash
# h5dcp against PyTorch's DCP on GPU tensors, same GPU, same data, same run
# (issue 20), for each rank count in GPU_BENCH_RANKS (default "1": one rank
# per GPU; "1 2" adds two ranks sharing it):
#   h5dcp-gpu-bench           h5dcp, and the bare device <-> pinned host copies
#   dcp_peer_bench.py --device cuda
#                             PyTorch's DCP (sync save, async_save both ways it
#                             offers for GPUs: one reused cached writer, and a
#                             DefaultStager staging in the background, fresh per
#                             save on torch <= 2.12; load, resharded load)
# then bench/gpu_report.py renders the table docs/PERFORMANCE.md records.
#   scripts/gpu-bench.sh OUT_DIR    (H5DCP_BUILD_DIR: the build with h5dcp-gpu-bench;
#                                    H5DCP_BENCH_PYTHON: python with the CUDA torch)
# Knobs: GIB (4), REPS (3), GPU_BENCH_DIR (scratch, default /tmp/h5dcp-gpu-bench).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/gpu-bench.sh OUT_DIR}
build=${H5DCP_BUILD_DIR:-build-gpu}
py=${H5DCP_BENCH_PYTHON:-python3}
GIB=${GIB:-4}
REPS=${REPS:-3}
DIR=${GPU_BENCH_DIR:-/tmp/h5dcp-gpu-bench}
mkdir -p "$out" "$DIR"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >"$out/gpu.txt"
{
  echo "gpu: $(cat "$out/gpu.txt")"
  echo "cores: $(nproc)"
  echo "memory: $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo)"
  echo "disk: $(df -h "$DIR" | awk 'NR == 2 {print $2 " (" $1 ")"}')"
  echo "torch: $("$py" -c 'import torch; print(torch.__version__)')"
} >"$out/machine.txt"
status=0
start=$(date +%s)
for ranks in ${GPU_BENCH_RANKS:-1}; do
  echo "== h5dcp on the GPU, $ranks rank(s) [$(( $(date +%s) - start )) s]"
  OMPI_MCA_io=romio321 mpiexec -n "$ranks" "$build/bench/h5dcp-gpu-bench" --gib "$GIB" --reps "$REPS" \
    --dir "$DIR" --json "$out/h5dcp-np$ranks.json" || status=1
  echo "== peer: PyTorch DCP on the GPU, $ranks rank(s) [$(( $(date +%s) - start )) s]"
  mpiexec -n "$ranks" "$py" bench/dcp_peer_bench.py --device cuda --dir "$DIR/dcp" --gib "$GIB" --reps "$REPS" \
    --trial-reps 1 --small-count 0 --transformer-layers 0 --json "$out/dcp-np$ranks.json" || status=1
done
"$py" bench/gpu_report.py "$out" "$out/gpu-table.md" || status=1
cat "$out/gpu-table.md"
echo "gpu-bench.sh: $(( $(date +%s) - start )) s"
exit $status
