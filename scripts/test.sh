#!/usr/bin/env bash
# README command 2: installs what is missing, builds, and runs every test
# with CTest (MPI tests at 1, 2, 3 and 4 ranks). Fails when any test fails,
# when a test skipped that should run on this machine (scripts/check-skips.sh,
# which prints the passed, failed and skipped counts apart: CTest's own
# "100% tests passed" counts a skip as a pass), or when HDF5 printed its own
# error stack anywhere (h5dcp must turn HDF5 errors into exceptions, never
# let HDF5 print them).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh "$@"
build_dir=${H5DCP_BUILD_DIR:-build}
status=0
(cd "$build_dir" && ctest --output-on-failure --parallel "$(nproc)" --timeout 600) | tee "$build_dir/ctest-output.txt" ||
  status=$?
scripts/check-skips.sh "$build_dir" "$build_dir/ctest-output.txt" || status=1
[ "$status" -eq 0 ] || exit "$status"
cd "$build_dir"
if grep -q "HDF5-DIAG" Testing/Temporary/LastTest.log; then
  echo "test.sh: HDF5 printed its own error stack (HDF5-DIAG) during the tests:" >&2
  grep -n -m5 "HDF5-DIAG" Testing/Temporary/LastTest.log >&2
  exit 1
fi
