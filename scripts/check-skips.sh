#!/usr/bin/env bash
# scripts/check-skips.sh BUILD_DIR CTEST_OUTPUT: prints the run's counts
# (passed, failed and skipped apart) and fails when CTest skipped a test that
# should run on this machine. A test may skip only for a reason one of its
# labels declares and this machine has:
#   skips_without_gpu       the build's LibTorch sees no GPU (the GPU tests)
#   skips_with_gpu          it sees one (what happens without a GPU)
#   skips_without_root      not root (a tmpfs mount, a mount namespace, a cgroup)
#   skips_under_sanitizers  a sanitizer build (H5DCP_SANITIZE: memory bounds
#                           are the sanitizer's, checked in the regular build)
# Any other skip fails the run: a skip that hides a broken environment must
# not read as green (CI runs as root, without a GPU).
set -euo pipefail
build=${1:?usage: check-skips.sh BUILD_DIR CTEST_OUTPUT}
log=${2:?usage: check-skips.sh BUILD_DIR CTEST_OUTPUT}

cache() { sed -n "s/^$1:[A-Z]*=//p" "$build/CMakeCache.txt"; }
# tests_labelled LABEL: the names of the tests carrying LABEL, one a line.
tests_labelled() { (cd "$build" && ctest -N -L "^$1\$") | sed -n 's/^ *Test *#[0-9]*: //p'; }

allowed=()
py=$(cache H5DCP_PYTHON)
if ! "$py" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  allowed+=(skips_without_gpu)
else
  allowed+=(skips_with_gpu)
fi
[ "$(id -u)" -eq 0 ] || allowed+=(skips_without_root)
[ "$(cache H5DCP_SANITIZE)" = ON ] && allowed+=(skips_under_sanitizers)

# CTest lists what did not run at the end: "\t 49 - mpi.gpu.np1 (Skipped)".
mapfile -t skipped < <(sed -n 's/^[[:space:]]*[0-9]* - \(.*\) (Skipped)$/\1/p' "$log")
mapfile -t failed < <(sed -n 's/^[[:space:]]*[0-9]* - \(.*\) (\(Failed\|Timeout\|SEGFAULT\|Not Run\|Subprocess aborted\|Exception\|Child aborted\|\*\*\*.*\))$/\1/p' "$log")
total=$(sed -n 's/.* tests failed out of \([0-9]*\)$/\1/p' "$log" | tail -1)
declare -A excused=()
for label in "${allowed[@]}"; do
  while read -r name; do [ -n "$name" ] && excused[$name]=$label; done < <(tests_labelled "$label")
done
unexpected=()
for name in "${skipped[@]}"; do
  if [ -n "${excused[$name]:-}" ]; then
    echo "check-skips: $name skipped (allowed here: ${excused[$name]})"
  else
    unexpected+=("$name")
  fi
done
echo "check-skips: $(( ${total:-0} - ${#skipped[@]} - ${#failed[@]} )) passed, ${#failed[@]} failed, ${#skipped[@]} skipped"
if [ ${#unexpected[@]} -ne 0 ]; then
  echo "check-skips: these tests skipped, but nothing about this machine allows it (allowed: ${allowed[*]}):" >&2
  printf '  %s\n' "${unexpected[@]}" >&2
  exit 1
fi
