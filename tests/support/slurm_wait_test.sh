#!/usr/bin/env bash
# slurm_wait.sh's job_gone against a stand-in squeue (first on PATH) that
# answers as the real one does in each case: a job counts as gone only when
# squeue answers and lists nothing, or says it no longer knows the id; a
# squeue that fails otherwise (slurmctld busy: a timeout) is no answer. And
# wait_for gives up at the deadline with the command's own status.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
cat >"$bin/squeue" <<'SQ'
#!/usr/bin/env bash
case "$SQUEUE_ANSWER" in
  listed) echo "  42     debug  train.sb     root  R       0:03      1 node1" ;;
  empty) ;;
  invalid) echo "slurm_load_jobs error: Invalid job id specified" >&2; exit 1 ;;
  timeout) echo "slurm_load_jobs error: Socket timed out on send/recv operation" >&2; exit 1 ;;
esac
SQ
chmod +x "$bin/squeue"
PATH=$bin:$PATH
start=$(date +%s)
deadline=$((start + 2))
budget=2
. "$here/slurm_wait.sh"

expect() {  # expect ANSWER 0|1
  local rc=0
  SQUEUE_ANSWER=$1 job_gone 42 || rc=$?
  [ "$rc" -eq "$2" ] || fail "job_gone with squeue answering '$1' returned $rc, not $2"
}
expect listed 1
expect empty 0
expect invalid 0
expect timeout 1
# A squeue that keeps timing out never reads as gone: the wait ends at the deadline, failed.
rc=0
SQUEUE_ANSWER=timeout wait_for job_gone 42 || rc=$?
[ "$rc" -eq 1 ] || fail "wait_for job_gone returned $rc with squeue timing out until the deadline"
[ "$(date +%s)" -ge "$deadline" ] || fail "wait_for gave up before the deadline"
echo "PASS: job_gone: listed -> running, empty or invalid id -> gone, a failing squeue -> no answer"
