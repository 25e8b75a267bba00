#!/usr/bin/env bash
# Installs what a fresh Debian 12 machine lacks to build, test and run h5dcp.
# Idempotent and quiet: does nothing when every package is already there.
set -euo pipefail

packages=(
  cmake g++ ninja-build ccache pkg-config
  libgtest-dev
  openmpi-bin libopenmpi-dev
  libhdf5-openmpi-dev hdf5-tools
  libtorch-dev libxxhash-dev
  libcli11-dev nlohmann-json3-dev
  python3-torch python3-h5py-mpi python3-numpy
  slurm-wlm munge   # the train job's preemption test runs a one-node Slurm
  # scripts/sanitize.sh: clang with the ASan/UBSan/libFuzzer runtimes, and
  # llvm-symbolizer (in llvm-14) for readable sanitizer reports
  clang-14 libclang-rt-14-dev llvm-14
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
