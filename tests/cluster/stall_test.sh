#!/usr/bin/env bash
# A stalled node (issue 19, item 4): h5dcp's deadlines name its ranks.
# Brings up cluster.sh's 3-node Slurm (network + UTS namespaces on one
# machine) in a temporary directory, then runs tests/reliability's
# fault_trial `save DIR MIB SPEC TIMEOUT` (a save of generation 1 to
# DIR/ckpt.h5, then of generation 2 with H5DCP_INJECT_FAULT=SPEC and
# SaveOptions::timeout_seconds=TIMEOUT) at 4 ranks on 2 nodes
# (srun --mpi=pmix -N2 --ntasks-per-node=2) in the cluster's shared directory:
#   1. control: SPEC pauses the 2 ranks of the second node for PAUSE s after
#      their work in step save:write (PAUSE < TIMEOUT): every rank's save of
#      generation 2 succeeds. The pause only makes the stop below land at a
#      known point, outside HDF5's collective calls (where no deadline
#      reaches: a rank stopped inside one leaves the others waiting there);
#   2. the same, but when both ranks of that node have entered the pause
#      (H5DCP_TRACE's line for save:write) the test SIGSTOPs every task
#      process on that node (found in its network namespace): the ranks of the
#      other node fail within TIMEOUT + slack of the stop, with
#      CheckpointError at step save:write naming exactly the stopped node's
#      ranks ("[rank 2] did not reach step 'save:write' within 10 s (stalled
#      or dead) ..."), and no rank reports success; then the test SIGCONTs
#      the stopped processes, scancels the job and waits until it is gone and
#      no task process is left on any node;
#   3. DIR/ckpt.h5 still holds generation 1, intact: `h5dcp verify` passes
#      and fault_trial `check` loads it as exactly generation 1.
# Finally cluster.sh down leaves no namespace of the run.
# Fails (never skips) without root. Needs what nodes_test.sh needs.
#
#   stall_test.sh FAULT_TRIAL H5DCP_CLI [TIMEOUT]
set -euo pipefail
trial=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
cli=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
timeout_s=${3:-10}
pause=4
slack=5
mib=4
. "$(dirname "$0")/lib.sh"

cluster_test_needs
[ -x "$trial" ] || fail "$trial is missing (build the h5dcp_fault_trial target)"
[ -x "$cli" ] || fail "$cli is missing (build the h5dcp-cli target)"
[[ $timeout_s =~ ^[0-9]+$ ]] && [ "$timeout_s" -gt "$pause" ] || fail "TIMEOUT must be whole seconds above the pause ($pause s)"
srun_pid=""
stopped=""
cluster_test_cleanup() {
  # shellcheck disable=SC2086
  [ -z "$stopped" ] || kill -CONT $stopped 2>/dev/null
  [ -z "$srun_pid" ] || kill -KILL "$srun_pid" 2>/dev/null
}
cluster_test_up stall

# The MPI tests' environment (ROMIO, root, 4 ranks on 2 cores); H5DCP_TRACE
# prints "[h5dcp trace] rank R STEP ..." when a rank's work in a step is
# done, just before the injected pause.
export OMPI_MCA_io=romio321 OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_mpi_yield_when_idle=1 \
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 H5DCP_TRACE=1
spec="save:write@2~$pause,save:write@3~$pause"
cd "$tmp/c/shared"
tag='echo "task node=$SLURMD_NODENAME rank=$SLURM_PROCID"; exec "$0" "$@"'
# The task processes (the fault_trial binary, comm truncated to 15) on node $1.
task_pids() {
  local p
  for p in $(ip netns pids "$id-$1" 2>/dev/null); do
    [ "$(cat "/proc/$p/comm" 2>/dev/null)" = "$(basename "$trial" | cut -c1-15)" ] && echo "$p"
  done
  return 0
}
node_of() { sed -n "s/^task node=\([^ ]*\) rank=$2\$/\1/p" "$1"; }
# The JSON line of rank $2's attempt.
result_of() { grep "^{\"rank\": $2, \"attempt\": \"save\"" "$1" || true; }

# --- 1. control: the pause alone --------------------------------------------------------
mkdir -p control
t0=$(now)
timeout -k 5 "$(left)" srun --mpi=pmix -N2 --ntasks-per-node=2 sh -c "$tag" "$trial" save "$PWD/control" "$mib" \
  "$spec" "$timeout_s" >"$tmp/control.out" 2>&1 || { cat "$tmp/control.out"; fail "the control run failed (at $(elapsed))"; }
for r in 0 1 2 3; do
  line=$(result_of "$tmp/control.out" $r)
  [[ $line == *'"error": null'* ]] || { cat "$tmp/control.out"; fail "control: rank $r did not save generation 2 despite a pause of $pause s < $timeout_s s: $line"; }
done
echo "ok: control: ranks 2 and 3 paused ${pause}s after save:write, the save succeeded on every rank ($(since "$t0") s)"

# --- 2. the stalled node ------------------------------------------------------------------------
mkdir -p stall
srun --mpi=pmix -N2 --ntasks-per-node=2 --job-name=h5dcp-stall sh -c "$tag" "$trial" save "$PWD/stall" "$mib" \
  "$spec" "$timeout_s" >"$tmp/stall.out" 2>&1 &
srun_pid=$!
# Generation 2's save:write: the second trace line of each stalled rank.
paused() {
  kill -0 "$srun_pid" 2>/dev/null || { cat "$tmp/stall.out"; fail "srun ended before ranks 2 and 3 paused (at $(elapsed))"; }
  [ "$(grep -c '^\[h5dcp trace\] rank 2 save:write ' "$tmp/stall.out")" -ge 2 ] &&
    [ "$(grep -c '^\[h5dcp trace\] rank 3 save:write ' "$tmp/stall.out")" -ge 2 ]
}
wait_for paused || { cat "$tmp/stall.out"; fail "ranks 2 and 3 did not reach generation 2's save:write (at $(elapsed))"; }
node=$(node_of "$tmp/stall.out" 2)
other=$(node_of "$tmp/stall.out" 0)
[ -n "$node" ] && [ "$node" = "$(node_of "$tmp/stall.out" 3)" ] && [ -n "$other" ] && [ "$other" != "$node" ] &&
  [ "$other" = "$(node_of "$tmp/stall.out" 1)" ] || { cat "$tmp/stall.out"; fail "ranks not placed 0 1 | 2 3 on 2 nodes"; }
stopped=$(task_pids "$node" | tr '\n' ' ')
[ "$(wc -w <<<"$stopped")" -eq 2 ] || fail "found task processes '$stopped' on $node, not 2"
# shellcheck disable=SC2086
kill -STOP $stopped
t_stop=$(now)
for p in $stopped; do grep -q '^State:.*T (stopped)' "/proc/$p/status" || fail "process $p on $node is not stopped"; done
echo "stopped ranks 2 3 on $node (pids $stopped) at $(elapsed), in their pause after save:write"

# Ranks 0 and 1 must report within TIMEOUT + slack of the stop.
reported() { [ -n "$(result_of "$tmp/stall.out" 0)" ] && [ -n "$(result_of "$tmp/stall.out" 1)" ]; }
limit=$(($(date +%s) + timeout_s + slack))
while ! reported && [ "$(date +%s)" -lt "$limit" ]; do sleep 0.1; done
t_report=$(since "$t_stop")
reported || { cat "$tmp/stall.out"; fail "ranks 0 and 1 on $other did not report within ${timeout_s}+${slack} s of the stop"; }
for r in 0 1; do
  line=$(result_of "$tmp/stall.out" $r)
  echo "$line"
  [[ $line == *'"step": "save:write", "failing": [2, 3]}' ]] ||
    fail "rank $r did not fail at save:write naming ranks 2 and 3 (the stopped node's): $line"
  [[ $line == *"[rank 2] did not reach step 'save:write' within $timeout_s s (stalled or dead)"* ]] &&
    [[ $line == *"[rank 3] did not reach step 'save:write' within $timeout_s s (stalled or dead)"* ]] ||
    fail "rank $r's error does not name ranks 2 and 3 and the step: $line"
done
[ -z "$(result_of "$tmp/stall.out" 2)$(result_of "$tmp/stall.out" 3)" ] || fail "a stopped rank reported"
echo "ok: ranks 0 1 on $other failed ${t_report} s after the stop (timeout ${timeout_s} s) at save:write naming ranks 2 3 of $node"

# The stopped ones go on, and the job is cancelled and ends.
# shellcheck disable=SC2086
kill -CONT $stopped
stopped=""
job=$(squeue -h -n h5dcp-stall -o %i)
[ -n "$job" ] || fail "no job h5dcp-stall in squeue"
scancel "$job"
t_cancel=$(now)
srun_done() { ! kill -0 "$srun_pid" 2>/dev/null; }
wait_for srun_done || fail "srun did not end after scancel $job (at $(elapsed))"
wait "$srun_pid" || true
srun_pid=""
wait_for job_gone "$job" || fail "job $job still in squeue after scancel (at $(elapsed))"
no_tasks() { [ -z "$(task_pids h5n1)$(task_pids h5n2)$(task_pids h5n3)" ]; }
wait_for no_tasks || fail "task processes left after scancel: $(task_pids h5n1) $(task_pids h5n2) $(task_pids h5n3)"
echo "ok: SIGCONT, scancel $job: srun and the job ended, no task process left ($(since "$t_cancel") s)"

# --- 3. the previous checkpoint -------------------------------------------------------------------
"$cli" verify "$PWD/stall/ckpt.h5" >"$tmp/verify.out" 2>&1 || { cat "$tmp/verify.out"; fail "h5dcp verify failed on the previous checkpoint"; }
timeout -k 5 "$(left)" "$trial" check "$PWD/stall" "$mib" >"$tmp/check.out" 2>&1 || { cat "$tmp/check.out"; fail "fault_trial check failed"; }
cat "$tmp/check.out"
grep -q '^{"generation": 1, "error": null,' "$tmp/check.out" || fail "the path does not hold exactly generation 1"
echo "ok: stall/ckpt.h5 still holds generation 1: h5dcp verify passes and it loads as exactly generation 1"
cluster_test_down
