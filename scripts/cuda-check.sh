#!/usr/bin/env bash
# The CUDA configuration, in CI: h5dcp's library, apps and tests compiled
# against the CUDA build of LibTorch (the torch==2.14.1 wheel, CUDA 13) with
# H5DCP_CUDA=ON and the system's nvcc, in ${H5DCP_CUDA_BUILD_DIR:-build-cuda};
# then, on this machine with or without a GPU, the unit tests, the
# single-process and utility tests (recursive_to, devices, the CUDA fallback)
# the core MPI tests at 2 ranks (save/load of every dtype, resharding,
# async saves, failures) and the GPU tests at 2 ranks (they skip without a
# GPU, and CTest reports them skipped). Without a GPU, every path that asks for pinned memory or a CUDA
# stream must fall back to the CPU. On a machine with a GPU and no MPI,
# scripts/gpu-check.sh runs the GPU checks themselves.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
scripts/install-deps.sh --cuda
source scripts/venv-paths.sh
build_dir=${H5DCP_CUDA_BUILD_DIR:-build-cuda}
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
if ! command -v nvcc >/dev/null && [ ! -x /usr/local/cuda/bin/nvcc ] && [ -z "${CUDA_HOME:-}" ]; then
  echo "cuda-check.sh: no nvcc (the CUDA toolkit): install it or set CUDA_HOME" >&2
  exit 1
fi
# H5DCP_CUDA=ON: CMake stops unless the LibTorch found was built with CUDA.
H5DCP_BUILD_DIR=$build_dir H5DCP_BUILD_PYTHON=$H5DCP_CUDA_VENV/bin/python \
  H5DCP_BUILD_TARGETS="h5dcp h5dcp-cli h5dcp-example h5dcp-train h5dcp-bench h5dcp-gpu-bench h5dcp-plan-bench
    h5dcp_unit_tests h5dcp_single_process_tests h5dcp_utils_tests h5dcp_mpi_tests h5dcp_gpu_tests" \
  scripts/build.sh -DH5DCP_CUDA=ON "$@"
(cd "$build_dir" && ctest --output-on-failure --timeout 600 -R '^(unit|single_process|utils|mpi\.core\.np2|mpi\.gpu\.np2)$') |
  tee "$build_dir/ctest-output.txt"
# mpi.gpu.np2 skips without a GPU, and is reported so; nothing else may skip.
scripts/check-skips.sh "$build_dir" "$build_dir/ctest-output.txt"
echo "cuda-check.sh: the CUDA configuration built and passed in $(( $(date +%s) - start )) s"
