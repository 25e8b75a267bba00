#!/usr/bin/env bash
# The reshard matrix across nodes (issue 19, item 4, cross-node I/O).
# Brings up cluster.sh's 3-node Slurm (network + UTS namespaces on one
# machine) in a temporary directory, then runs tests/mpi/reshard_matrix
# (the binary of CTest's mpi.reshard_save.npN / mpi.reshard_load.npN):
#   1. `save DIR` at 4 ranks on 2 nodes: srun --mpi=pmix -N2 --ntasks-per-node=2,
#      DIR in the cluster's shared directory: np4-{rows,columns,blocks,uneven,
#      replicated}.h5, "5 passed, 0 failed";
#   2. `load DIR` at 3 ranks on 3 nodes: srun --mpi=pmix -N3 --ntasks-per-node=1:
#      every file into every sharding, each value checked bit for bit against
#      the reference, "27 passed, 0 failed" (25 loads, the file count, the
#      load count);
# each task prints its node and rank first (SLURMD_NODENAME, SLURM_PROCID):
# ranks 0 1 | 2 3 on 2 distinct nodes, then ranks 0, 1, 2 on h5n1..h5n3.
# Finally cluster.sh down leaves no namespace of the run.
# Fails (never skips) without root. Needs what nodes_test.sh needs.
#
#   reshard_test.sh RESHARD_MATRIX
set -euo pipefail
matrix=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
. "$(dirname "$0")/lib.sh"

cluster_test_needs
[ -x "$matrix" ] || fail "$matrix is missing (build the h5dcp_reshard_matrix target)"
cluster_test_up reshard

# The MPI tests' environment (H5DCP_MPI_TEST_ENVIRONMENT: ROMIO, root, 4
# ranks on 2 cores), exported to the tasks by srun.
export OMPI_MCA_io=romio321 OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_mpi_yield_when_idle=1 \
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
dir=$tmp/c/shared/reshard
mkdir -p "$dir"
cd "$tmp/c/shared"
# Each task names its node and rank, then becomes the matrix binary.
tag='echo "task node=$SLURMD_NODENAME rank=$SLURM_PROCID"; exec "$0" "$@"'

# placement HOW OUTPUT: "node:rank rank | node:rank ..." of the task lines, by node.
placement() {
  sed -n 's/^task node=\([^ ]*\) rank=\([0-9]*\)$/\1 \2/p' "$2" | by_node
}

# --- 1. save at 4 ranks on 2 nodes -------------------------------------------------
t0=$(date +%s)
timeout -k 5 "$(left)" srun --mpi=pmix -N2 --ntasks-per-node=2 sh -c "$tag" "$matrix" save "$dir" \
  >"$tmp/save.out" 2>&1 || { cat "$tmp/save.out"; fail "the save at 4 ranks on 2 nodes failed (at $(elapsed))"; }
t_save=$(($(date +%s) - t0))
cat "$tmp/save.out"
grep -qx '5 passed, 0 failed' "$tmp/save.out" || fail "the save did not report '5 passed, 0 failed'"
! grep -q 'FAIL\|HDF5-DIAG' "$tmp/save.out" || fail "the save printed FAIL or HDF5-DIAG"
where=$(placement save "$tmp/save.out")
[[ $where =~ ^h5n[1-3]:\ 0\ 1\ \|\ h5n[1-3]:\ 2\ 3$ ]] || [[ $where =~ ^h5n[1-3]:\ 2\ 3\ \|\ h5n[1-3]:\ 0\ 1$ ]] ||
  fail "the save's ranks were placed '$where', not 0 1 | 2 3 on 2 distinct nodes"
files=$(cd "$dir" && ls | tr '\n' ' ')
[ "$files" = "np4-blocks.h5 np4-columns.h5 np4-replicated.h5 np4-rows.h5 np4-uneven.h5 " ] ||
  fail "the save left '$files' in $dir, not the 5 files of 4 ranks"
echo "ok: save at 4 ranks on 2 nodes ($where) in ${t_save}s: $files"

# --- 2. load at 3 ranks on 3 nodes ---------------------------------------------------
t0=$(date +%s)
timeout -k 5 "$(left)" srun --mpi=pmix -N3 --ntasks-per-node=1 sh -c "$tag" "$matrix" load "$dir" \
  >"$tmp/load.out" 2>&1 || { cat "$tmp/load.out"; fail "the load at 3 ranks on 3 nodes failed (at $(elapsed))"; }
t_load=$(($(date +%s) - t0))
cat "$tmp/load.out"
grep -qx '27 passed, 0 failed' "$tmp/load.out" || fail "the load did not report '27 passed, 0 failed' (5 files x 5 shardings + 2)"
! grep -q 'FAIL\|HDF5-DIAG' "$tmp/load.out" || fail "the load printed FAIL or HDF5-DIAG"
where=$(placement load "$tmp/load.out")
[[ $where =~ ^h5n1:\ [0-2]\ \|\ h5n2:\ [0-2]\ \|\ h5n3:\ [0-2]$ ]] && [ "$(tr -dc '0-9' <<<"${where//h5n[1-3]/}" | fold -w1 | sort | tr -d '\n')" = 012 ] ||
  fail "the load's ranks were placed '$where', not ranks 0 1 2 on h5n1 h5n2 h5n3"
echo "ok: load at 3 ranks on 3 nodes ($where) in ${t_load}s: 5 files x 5 shardings, every value bit for bit"
cluster_test_down
