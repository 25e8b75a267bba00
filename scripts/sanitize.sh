#!/usr/bin/env bash
# The sanitizer build and the fuzzers; CI runs it after scripts/test.sh.
#  1. Builds h5dcp, its tests and apps with clang, AddressSanitizer +
#     UndefinedBehaviorSanitizer, and the libFuzzer targets of tests/fuzz/,
#     in ${H5DCP_SAN_BUILD_DIR:-build-san} (one build serves both).
#  2. Runs the whole CTest suite there (MPI tests included) under the
#     sanitizers, the fault matrix (reliability.quick) among them with leak
#     checking off (tests/CMakeLists.txt says why). Fails on any failing
#     test, any sanitizer report (reports go to $build_dir/sanitizer-logs/,
#     so none is lost in a test that captures its programs' output), or HDF5
#     printing its own error stack.
#  3. Runs each fuzz target for FUZZ_SECONDS (default 60; as many targets at
#     once as there are cores) over its seed corpus
#     tests/fuzz/corpus/<target>/ (read-only: new inputs go to
#     $build_dir/fuzz/<target>/corpus/, crash reproducers to
#     $build_dir/fuzz/<target>/artifacts/), and writes
#     $build_dir/fuzz-stats.json: per target the seconds run, the inputs
#     executed and the crashes (any crash fails the script).
# SANITIZE_SKIP_TESTS=1 skips step 2 (to fuzz only); extra arguments go to
# the CMake configure step.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
scripts/install-deps.sh
build_dir=${H5DCP_SAN_BUILD_DIR:-build-san}
fuzz_seconds=${FUZZ_SECONDS:-60}
fuzz_targets=(codec checkpoint torch_pickle safetensors dcp_metadata local_copy)

# --- 1. build (scripts/build.sh: ccache across checkouts) --------------------
H5DCP_BUILD_DIR=$build_dir scripts/build.sh -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 \
  -DH5DCP_SANITIZE=ON -DH5DCP_FUZZ=ON "$@"
build_dir=$(cd "$build_dir" && pwd)

# --- sanitizer settings, for the tests and the fuzzers -----------------------
# halt_on_error: the first report ends the program, with exit code 86 (not 1,
#   which the h5dcp tool's tests expect from `verify` and `diff`).
# detect_leaks: LeakSanitizer at exit; tests/sanitizers/lsan.supp names the
#   only leaks ignored, inside MPI's own libraries.
# detect_odr_violation is left on: LibTorch is not instrumented and causes none.
# intercept_tls_get_addr=0: up to LLVM 16 the runtime's __tls_get_addr
#   interceptor takes a dynamic TLS block whose address is 16 past a page
#   boundary for one with a pre-2.25 glibc header and reads garbage as its
#   range; LeakSanitizer's tracer then dies at exit ("Tracer caught signal
#   11"), by the chance of where malloc put the block (google/sanitizers#1342,
#   Mudlet/Mudlet#9930). Off, dynamic TLS is not scanned for pointers: that
#   can only add leak reports, never hide one.
sanitizer_common=halt_on_error=1:exitcode=86:print_summary=1
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:intercept_tls_get_addr=0:$sanitizer_common
export UBSAN_OPTIONS=print_stacktrace=1:$sanitizer_common
export LSAN_OPTIONS=suppressions=$repo/tests/sanitizers/lsan.supp:print_suppressions=0
# Every process that may call MPI gets tests/sanitizers/mpi_leak_stacks.c, so
# that OpenMPI's leaks name OpenMPI's libraries with ASan's fast unwinder
# (fast_unwind_on_malloc=0 would do it too, at 3x the time).
preload=$build_dir/tests/libh5dcp_mpi_leak_stacks.so
# Stacks with function names and lines (llvm-14's symbolizer, which ASan would
# not find on PATH under this name).
if [ -x /usr/lib/llvm-14/bin/llvm-symbolizer ]; then export ASAN_SYMBOLIZER_PATH=/usr/lib/llvm-14/bin/llvm-symbolizer; fi
failed=0

# --- 2. the test suite under the sanitizers ----------------------------------
if [ "${SANITIZE_SKIP_TESTS:-0}" != 1 ]; then
  logs=$build_dir/sanitizer-logs
  rm -rf "$logs" && mkdir -p "$logs"
  rm -f "$build_dir/Testing/Temporary/LastTest.before-rerun.log"
  start=$(date +%s)
  set +e
  # Every test but the multi-node cluster tests (label "cluster"): they run
  # Slurm's and OpenMPI's (uninstrumented) programs around the h5dcp
  # programs that the other tests run here, so here they would repeat
  # scripts/test.sh's run rather than check anything more. The fault matrix
  # (reliability.quick) runs in this run too, its leak checking turned off
  # by the test's own environment; it mostly waits, so it overlaps the rest
  # (it used to run alone afterwards: 347 s of the step).
  ( cd "$build_dir"
    LD_PRELOAD=$preload ASAN_OPTIONS=$ASAN_OPTIONS:log_path=$logs/asan \
      UBSAN_OPTIONS=$UBSAN_OPTIONS:log_path=$logs/ubsan ctest --output-on-failure --parallel "$(nproc)" --timeout 900 \
      --label-exclude cluster ) | tee "$build_dir/ctest-output.txt"
  ctest_status=${PIPESTATUS[0]}
  # A test that skipped where it should have run fails the step (the first run's list).
  scripts/check-skips.sh "$build_dir" "$build_dir/ctest-output.txt" || failed=1
  # Should LeakSanitizer's own tracer still crash at exit ("Tracer caught
  # signal 11 ... LeakSanitizer has encountered a fatal error": seen once,
  # on two ranks of a 3-rank convert, before intercept_tls_get_addr=0 above),
  # that is not a finding: when it is the only kind of report, the failed
  # tests (and those that could not run without them) run once more, still
  # under the sanitizers; a real report, or a failure that repeats, fails.
  if [ "$ctest_status" -ne 0 ] && grep -qs "Tracer caught signal" "$logs"/* &&
     ! grep -qsE "ERROR: AddressSanitizer|runtime error:|ERROR: LeakSanitizer: detected" "$logs"/*; then
    echo "sanitize.sh: LeakSanitizer's tracer crashed (not a finding): the failed tests run once more" >&2
    for f in "$logs"/*; do echo "--- $f" >&2; head -n 5 "$f" >&2; done
    rm -rf "$logs" && mkdir -p "$logs"
    # The first run's log keeps its HDF5-DIAG check below.
    cp "$build_dir/Testing/Temporary/LastTest.log" "$build_dir/Testing/Temporary/LastTest.before-rerun.log"
    ( cd "$build_dir"
      LD_PRELOAD=$preload ASAN_OPTIONS=$ASAN_OPTIONS:log_path=$logs/asan \
        UBSAN_OPTIONS=$UBSAN_OPTIONS:log_path=$logs/ubsan ctest --output-on-failure --timeout 900 --rerun-failed )
    ctest_status=$?
  fi
  set -e
  echo "sanitize.sh: the test suite ran $(( $(date +%s) - start )) s under ASan+UBSan"
  [ "$ctest_status" -eq 0 ] || failed=1
  if grep -qs "HDF5-DIAG" "$build_dir"/Testing/Temporary/LastTest{,.before-rerun}.log; then
    echo "sanitize.sh: HDF5 printed its own error stack (HDF5-DIAG) during the tests:" >&2
    grep -s -n -m5 "HDF5-DIAG" "$build_dir"/Testing/Temporary/LastTest{,.before-rerun}.log >&2
    failed=1
  fi
  if [ -n "$(ls -A "$logs")" ]; then
    echo "sanitize.sh: sanitizer reports during the tests ($logs):" >&2
    for f in "$logs"/*; do echo "--- $f" >&2; head -n 60 "$f" >&2; done
    failed=1
  fi
fi

# --- 3. the fuzzers ------------------------------------------------------------
# The checkpoint and local_copy targets call MPI_Init (a singleton, no mpiexec): the
# environment of the MPI tests (ROMIO, running as root in containers).
export OMPI_MCA_io=romio321 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# fuzz_target TARGET: runs one target for FUZZ_SECONDS; leaves its log,
# exit status and seconds in $build_dir/fuzz/TARGET/.
fuzz_target() {
  local target=$1 work=$build_dir/fuzz/$1 start status
  mkdir -p "$work/corpus"
  rm -rf "$work/artifacts" && mkdir -p "$work/artifacts"
  # libFuzzer's leak check after every input whose mallocs outnumber its
  # frees: the checkpoint target's HDF5 and MPI keep global state (free lists,
  # ids), so it scanned the whole heap (LibTorch's too) after nearly every
  # input, at a third of the speed. Off there; LeakSanitizer still checks at
  # exit and a leak fails the run (exit status), without naming the input.
  local leak_flags=()
  [ "$target" = checkpoint ] && leak_flags=(-detect_leaks=0)
  start=$(date +%s)
  set +e
  # The scratch corpus first (libFuzzer writes new inputs only there), then
  # the committed seeds; -timeout: an input running 60 s counts as a crash.
  ( cd "$work" && LD_PRELOAD=$preload "$build_dir/tests/fuzz/h5dcp_fuzz_$target" -max_total_time="$fuzz_seconds" -timeout=60 \
      "${leak_flags[@]}" \
      -print_final_stats=1 -artifact_prefix=artifacts/ corpus "$repo/tests/fuzz/corpus/$target" ) \
    >"$work/fuzz.log" 2>&1
  status=$?
  set -e
  echo "$status" >"$work/status"
  echo $(( $(date +%s) - start )) >"$work/seconds"
}
# A fuzzer is one process on one core: as many targets at once as there are
# cores, each for its own FUZZ_SECONDS (5 targets took 5 x 60 s one by one).
for target in "${fuzz_targets[@]}"; do
  rm -f "$build_dir/fuzz/$target/status"
  while [ "$(jobs -rp | wc -l)" -ge "$(nproc)" ]; do wait -n || true; done
  fuzz_target "$target" &
done
wait
stats=()
for target in "${fuzz_targets[@]}"; do
  work=$build_dir/fuzz/$target
  status=$(cat "$work/status" 2>/dev/null || echo 1)  # no status: the runner itself died
  seconds=$(cat "$work/seconds" 2>/dev/null || echo 0)
  executions=$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' "$work/fuzz.log" | tail -n1)
  crashes=$(find "$work/artifacts" -type f | wc -l)
  if [ "$status" -ne 0 ] && [ "$crashes" -eq 0 ]; then crashes=1; fi  # died without writing a reproducer
  echo "sanitize.sh: fuzz $target: ${executions:-0} inputs in $seconds s, $crashes crashes (log: $work/fuzz.log)"
  if [ "$crashes" -ne 0 ]; then
    tail -n 60 "$work/fuzz.log" >&2
    ls "$work/artifacts" >&2
    failed=1
  fi
  if grep -q "HDF5-DIAG" "$work/fuzz.log"; then
    echo "sanitize.sh: HDF5 printed its own error stack while fuzzing $target:" >&2
    grep -n -m5 "HDF5-DIAG" "$work/fuzz.log" >&2
    failed=1
  fi
  stats+=("$(printf '"%s": {"seconds": %d, "max_total_time": %d, "executions": %d, "crashes": %d, "seeds": %d}' \
    "$target" "$seconds" "$fuzz_seconds" "${executions:-0}" "$crashes" \
    "$(find "$repo/tests/fuzz/corpus/$target" -type f | wc -l)")")
done
{
  echo "{"
  for i in "${!stats[@]}"; do
    sep=","; [ "$i" -eq $(( ${#stats[@]} - 1 )) ] && sep=""
    echo "  ${stats[$i]}$sep"
  done
  echo "}"
} >"$build_dir/fuzz-stats.json"
cat "$build_dir/fuzz-stats.json"

if [ "$failed" -ne 0 ]; then
  echo "sanitize.sh: FAILED" >&2
  exit 1
fi
echo "sanitize.sh: all tests passed under ASan+UBSan; the fuzzers found no crash"
