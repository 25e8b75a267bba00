#!/usr/bin/env bash
# README command 2: installs what is missing, builds, and runs every test
# with CTest (MPI tests at 1, 2, 3 and 4 ranks). Fails when any test fails or
# when HDF5 printed its own error stack anywhere (h5dcp must turn HDF5
# errors into exceptions, never let HDF5 print them).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh "$@"
build_dir=${H5DCP_BUILD_DIR:-build}
cd "$build_dir"
ctest --output-on-failure --parallel "$(nproc)" --timeout 600
if grep -q "HDF5-DIAG" Testing/Temporary/LastTest.log; then
  echo "test.sh: HDF5 printed its own error stack (HDF5-DIAG) during the tests:" >&2
  grep -n -m5 "HDF5-DIAG" Testing/Temporary/LastTest.log >&2
  exit 1
fi
