#!/usr/bin/env bash
# Configures and builds h5dcp (library, apps, tests) in ${H5DCP_BUILD_DIR:-build}.
# Extra arguments go to the CMake configure step; H5DCP_BUILD_PYTHON chooses
# the Python whose LibTorch is used (default: install-deps.sh's environment).
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${H5DCP_BUILD_DIR:-build}
# ccache hits across checkouts (CI builds a fresh clone each time): paths are
# taken relative to the repository, and the directory is not hashed.
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
generator=()
if [ ! -f "$build_dir/CMakeCache.txt" ] && command -v ninja >/dev/null; then generator=(-G Ninja); fi
# H5DCP_DEBUG_INFO: how much debug information the objects carry, at -O2
# either way. "full" (the default): RelWithDebInfo's -g. "lines": -g1,
# function names and line tables, which is all a backtrace or a sanitizer
# report prints; a file that includes LibTorch's headers compiles in about
# two thirds of the time (g++ 12, apps/h5dcp_train.cpp: 37 s -> 26 s) and
# links smaller. .ci/run builds with "lines". Set on every configure, so a
# build directory follows the variable.
case "${H5DCP_DEBUG_INFO:-full}" in
  full) opt_flags="-O2 -g -DNDEBUG" ;;
  lines) opt_flags="-O2 -g1 -DNDEBUG" ;;
  *) echo "build.sh: H5DCP_DEBUG_INFO is 'full' or 'lines', not '${H5DCP_DEBUG_INFO}'" >&2; exit 2 ;;
esac
# LibTorch and the tests' Python: the virtual environment of install-deps.sh.
source scripts/venv-paths.sh
cmake -S . -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$opt_flags" -DCMAKE_C_FLAGS_RELWITHDEBINFO="$opt_flags" \
  -DH5DCP_PYTHON="${H5DCP_BUILD_PYTHON:-$H5DCP_VENV/bin/python}" \
  "$@" >/dev/null
# H5DCP_BUILD_TARGETS: only these targets (space-separated); default all.
targets=()
for t in ${H5DCP_BUILD_TARGETS:-}; do targets+=(--target "$t"); done
cmake --build "$build_dir" --parallel "$(nproc)" "${targets[@]}"
