#!/bin/sh
# hidden_path_test.sh MPIEXEC TEST_BINARY H5DCP_CLI WORKDIR PT_FILE
# Issue 15, item 5, for real: the last rank of each job runs in a mount
# namespace of its own (unshare -m) with an empty tmpfs over WORKDIR/hidden,
# so a file there is visible to some ranks only, as on a node-local disk.
# 1. the library (hidden_path_test.cpp): load, load_all, detect_file_kind
#    and save end on every rank with "not visible on rank N: use a shared
#    file system";
# 2. `h5dcp convert` under mpiexec, both directions: exit 3 with that
#    message, where it used to hang;
# 3. `h5dcp verify` under mpiexec reads on rank 0 alone: a file only rank 0
#    sees verifies.
# Skips (77) where mount namespaces are not available (not root).
set -u
mpiexec=$1 bin=$2 cli=$3 work=$4 pt=$5
hidden=$work/hidden
hide=$(dirname "$0")/../support/hide_directory.sh
if ! unshare -m sh -c "mkdir -p '$work' && mount -t tmpfs none '$work'" 2>/dev/null; then
  echo "SKIP: no mount namespaces here (unshare -m and mount need root)"
  exit 77
fi
rm -rf "$work" && mkdir -p "$hidden" || exit 1
export H5DCP_HIDDEN_DIR=$hidden
fail=0

run_job() {  # run_job N CMD...: N-1 ranks that see $hidden, the last one blind
  n=$1
  shift
  timeout 120 "$mpiexec" --oversubscribe -n $((n - 1)) "$@" : -n 1 unshare -m "$hide" "$hidden" "$@"
}

for n in 2 3; do
  echo "== library, $n ranks"
  run_job $n "$bin" || { echo "FAIL: the library at $n ranks (exit $?)"; fail=1; }
  rm -rf "$hidden"/*
done

cp "$pt" "$hidden/m.pt" && "$cli" convert --force "$hidden/m.pt" "$hidden/m.h5" >/dev/null || exit 1
check_convert() {  # check_convert SRC DST
  out=$(run_job 2 "$cli" convert --force "$1" "$2" 2>&1)
  rc=$?
  case "$out" in
    *"'$1' is not visible on rank 1: use a shared file system"*) ;;
    *) echo "FAIL: convert $1: no 'not visible' message:"; echo "$out"; fail=1 ;;
  esac
  [ $rc -eq 3 ] || { echo "FAIL: convert $1 exited $rc, not 3 (124: it hung)"; fail=1; }
  [ -e "$2" ] && { echo "FAIL: convert $1 wrote $2"; fail=1; }
  echo "== convert $1: exit $rc"
}
check_convert "$hidden/m.pt" "$work/out.h5"
check_convert "$hidden/m.h5" "$work/out.pt"

out=$(run_job 2 "$cli" verify "$hidden/m.h5" 2>&1)
rc=$?
echo "== verify: exit $rc"
[ $rc -eq 0 ] || { echo "FAIL: verify under mpiexec exited $rc:"; echo "$out"; fail=1; }
exit $fail
