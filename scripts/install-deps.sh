#!/usr/bin/env bash
# Installs what a fresh Debian 12 machine lacks to build, test and run h5dcp.
# Idempotent and quiet: does nothing when everything is already there.
#  1. Debian packages: compilers, OpenMPI, parallel HDF5, test and CLI libraries,
#     Slurm (the job tests), clang (the sanitizer build), clang-format and
#     clang-tidy (scripts/lint.sh).
#  2. A Python virtual environment with PyTorch 2.13 (CPU; its LibTorch is the
#     one h5dcp builds against) and the Python packages the tests use. It lives
#     outside the checkout, in ${H5DCP_VENV:-~/.cache/h5dcp/venv-torch-2.13.0},
#     so fresh clones (CI) reuse it; it is rebuilt when its stamp of pins differs.
#  3. With --cuda also a second environment with the CUDA build of
#     torch==2.14.1 (${H5DCP_CUDA_VENV:-~/.cache/h5dcp/venv-torch-2.14.1-cuda},
#     about 5 GB), the LibTorch the CUDA configuration compiles against.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=scripts/venv-paths.sh
source "$here/venv-paths.sh"

want_cuda=0
for arg in "$@"; do
  case "$arg" in
    --cuda) want_cuda=1 ;;
    *) echo "install-deps.sh: unknown argument '$arg' (use --cuda)" >&2; exit 2 ;;
  esac
done

packages=(
  cmake g++ ninja-build ccache pkg-config
  libgtest-dev
  openmpi-bin libopenmpi-dev
  libhdf5-openmpi-dev hdf5-tools
  libxxhash-dev libcli11-dev nlohmann-json3-dev zlib1g-dev
  slurm-wlm munge   # the train job's preemption test runs a one-node Slurm
  iproute2 util-linux   # tests/cluster: network namespaces, veths, a bridge (ip), nsenter
  # scripts/sanitize.sh: clang with the ASan/UBSan/libFuzzer runtimes, and
  # llvm-symbolizer (in llvm-14) for readable sanitizer reports
  clang-14 libclang-rt-14-dev llvm-14
  clang-format-14 clang-tidy-14   # scripts/lint.sh
)

missing=()
for p in "${packages[@]}"; do
  if ! grep -q "install ok installed" <<<"$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -ne 0 ]; then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# make_venv DIR STAMP PACKAGES...: a venv with exactly these pins, made once.
make_venv() {
  local dir=$1 stamp=$2; shift 2
  if [ -f "$dir/.h5dcp-stamp" ] && [ "$(cat "$dir/.h5dcp-stamp")" = "$stamp" ]; then return 0; fi
  echo "install-deps: making the Python environment $dir ($stamp)"
  rm -rf "$dir"
  mkdir -p "$(dirname "$dir")"
  "${H5DCP_BASE_PYTHON:-python3}" -m venv "$dir"
  # pip's output only when it fails (its warnings about this machine's
  # package indexes are noise).
  local log
  log=$(mktemp)
  if ! "$dir/bin/python" -m pip install -q --no-cache-dir "$@" >"$log" 2>&1; then
    cat "$log" >&2
    rm -f "$log"
    echo "install-deps: installing $* into $dir failed" >&2
    return 1
  fi
  rm -f "$log"
  echo "$stamp" >"$dir/.h5dcp-stamp"
}

# The pins: torch as the project supports it, the rest as the tests need.
cpu_packages=(torch==2.13.0 numpy==2.3.5 h5py==3.14.0 safetensors==0.8.0 xxhash==4.0.1)
make_venv "$H5DCP_VENV" "${cpu_packages[*]}" "${cpu_packages[@]}"

if [ "$want_cuda" = 1 ]; then
  cuda_packages=(torch==2.14.1 numpy==2.3.5)
  make_venv "$H5DCP_CUDA_VENV" "${cuda_packages[*]}" "${cuda_packages[@]}"
fi
