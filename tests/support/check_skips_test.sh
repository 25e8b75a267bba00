#!/usr/bin/env bash
# scripts/check-skips.sh against this build's real test list and labels, on
# CTest outputs made up for each case: a skip the machine explains passes, any
# other skip fails naming the test, and the counts come out apart.
# usage: check_skips_test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1 build=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "check_skips_test: $*" >&2; exit 1; }
# run_check NAME...: check-skips on an output in which NAMEs were skipped (of 10 tests, one failed).
run_check() {
  { echo "90% tests passed, 1 tests failed out of 10"; echo; echo "The following tests did not run:"
    local n=1
    for name in "$@"; do printf '\t %2d - %s (Skipped)\n' "$n" "$name"; n=$((n + 1)); done
    echo; echo "The following tests FAILED:"; printf '\t 99 - layout.layers (Failed)\n'; } >"$work/out.txt"
  "$src/scripts/check-skips.sh" "$build" "$work/out.txt" >"$work/said.txt" 2>&1
}
py=$(sed -n 's/^H5DCP_PYTHON:[A-Z]*=//p' "$build/CMakeCache.txt")
gpu=0
"$py" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null && gpu=1

# A test with no skip label never may.
if run_check unit; then fail "a skipped 'unit' was accepted: $(cat "$work/said.txt")"; fi
grep -q "^  unit$" "$work/said.txt" || fail "the refusal does not name 'unit': $(cat "$work/said.txt")"
grep -q "check-skips: 8 passed, 1 failed, 1 skipped" "$work/said.txt" || fail "wrong counts: $(cat "$work/said.txt")"
# The GPU tests may skip exactly where LibTorch sees no GPU.
rc=0
run_check mpi.gpu.np1 mpi.gpu.np4 || rc=$?
if [ "$gpu" = 0 ]; then
  [ "$rc" -eq 0 ] || fail "GPU tests skipped without a GPU were refused: $(cat "$work/said.txt")"
  grep -q "mpi.gpu.np4 skipped (allowed here: skips_without_gpu)" "$work/said.txt" || fail "no reason given"
else
  [ "$rc" -ne 0 ] || fail "GPU tests skipped on a machine with a GPU were accepted"
fi
# A root-only test may skip only where we are not root.
rc=0
run_check mpi.hidden_path || rc=$?
if [ "$(id -u)" -eq 0 ]; then
  [ "$rc" -ne 0 ] || fail "mpi.hidden_path skipped as root was accepted"
else
  [ "$rc" -eq 0 ] || fail "mpi.hidden_path skipped without root was refused: $(cat "$work/said.txt")"
fi
echo "check_skips_test: passed (gpu=$gpu, uid=$(id -u))"
