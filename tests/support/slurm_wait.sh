# The Slurm tests' waiting (sourced, not run): tests/cluster/lib.sh and
# tests/train/slurm_preempt_test.sh. The sourcing script sets $start and
# $deadline (seconds since the epoch) first, and $budget for its messages.
#
#   wait_for CMD...   polls CMD every 0.2 s until it succeeds (0) or the deadline passes (1)
#   job_gone JOB      Slurm no longer has JOB
#   left              seconds to the deadline, at least 1 (for timeout)
#   elapsed           seconds since $start, as "Ns"
#   fail MESSAGE      prints FAIL: MESSAGE and exits 1

fail() {
  echo "FAIL: $*"
  exit 1
}
elapsed() { echo "$(($(date +%s) - start))s"; }
left() {
  local s=$((deadline - $(date +%s)))
  echo $((s > 0 ? s : 1))
}
wait_for() {
  while [ "$(date +%s)" -lt "$deadline" ]; do
    "$@" && return 0
    sleep 0.2
  done
  "$@"
}
# Gone: squeue answers and lists nothing, or no longer knows the id. A squeue
# that fails otherwise (slurmctld busy on 2 cores, a timeout) is no answer:
# taking its empty output for "gone" once read a running job as finished.
job_gone() {
  local q rc=0
  q=$(squeue -h -j "$1" 2>&1) || rc=$?
  if [ "$rc" -eq 0 ]; then [ -z "$q" ]; else [[ $q == *"Invalid job id"* ]]; fi
}
