#!/usr/bin/env bash
# The node-local checkpoint tier across real node failures (issue 50), on
# cluster.sh's 3-node Slurm, every node with its own /dev/shm (a tmpfs that
# the host and the other nodes do not see: a block reaches another node only
# over MPI; kill-node takes it with the node, revive-node brings an empty
# one). jobs/train.sbatch with its default tier path for job A
# (H5DCP_LOCAL_TIER=1: /dev/shm/h5dcp-$SLURM_JOB_ID/{node}, which the
# requeue must find again), then H5DCP_LOCAL_DIR naming that same path for
# the later jobs (new job ids), ranks started by srun --mpi=pmix,
# --seed 7 --steps 12 (tests/train's reference run), a local checkpoint every
# step (--local-every 1, --local-replicas 1) and a shared one every 4
# (--checkpoint-every 4, the drain; 4 divides 12, so that the last step is
# also shared, see train.sbatch's cleanup). One chain of jobs, each case
# leaving what the next needs:
#   1. job A on 3 nodes x 2 ranks, with --crash-after-step 10: once every
#      node has published local step 6, the node of ranks 4 and 5 dies
#      (kill-node, set DOWN): the shared directory holds step 4 only. Slurm
#      requeues the job (--requeue); the test shrinks it to the 2 nodes left
#      (scontrol update NumNodes=2 NumTasks=4, as an operator would). Its
#      second start resumes on 4 ranks from local step >= 6 (newer than the
#      shared step 4): the dead node's ranks from their replicas, "none from"
#      the shared directory; it drains step 8 and dies after step 10
#      (--crash-after-step 10: SIGKILL while step 10's save is in flight),
#      leaving local step 9 (or 10) on the 2 nodes and steps 4 8 shared;
#   1b. job B on the same 2 nodes with 3 ranks (2 + 1) and --steps 1 (so it
#      loads and stops: "nothing to do", and H5DCP_LOCAL_KEEP=1 keeps the
#      local steps for the next case) resumes from that same newest local
#      step on 3 ranks, nothing read from the shared directory;
#   2. the dead node comes back with an empty /dev/shm (a fresh node), and
#      on the node of rank 0 the copy of rank 0 in the newest local steps is
#      truncated to half its size. Job C, 3 nodes x 1 rank (3 ranks) with
#      --crash-after-step 12, resumes from the newest local step: rank 0's
#      data from the replica, the corrupted copy named in a "local copy
#      skipped" line, the fresh node's rank fed over MPI; it dies in step
#      12's save, so local step 11 (3 owner ranks, one per node, each copied
#      to one other node) is newer than the shared step 8;
#   3. two nodes die (kill-node, DOWN): no node left holds all 3 owners'
#      data of local step 11. Job D on the node left (2 ranks) falls back to
#      the shared step 8, says why ("local tier: step 11: ... no intact copy
#      (lost: ...)"), finishes step 12 (shared), and train.sbatch removes the
#      node's local steps at the end (a 1-node job: --local-replicas 0);
#   4. every loss printed by every run (repeated steps included) equals the
#      uninterrupted 1-rank run's (REFERENCE) bit for bit, steps 1..12, and
#      the shared checkpoints left pass `h5dcp verify`.
# Fails (never skips) without root. Needs what node_loss_test.sh needs.
#
#   local_tier_test.sh REPO_DIR BUILD_DIR REFERENCE_TXT H5DCP_CLI
set -euo pipefail
. "$(dirname "$0")/lib.sh"
training_test_needs "$@"
training_test_up local-tier

ckpt=$shared/ckpt
job_env=ALL,H5DCP_LAUNCHER=srun,H5DCP_BUILD_DIR=$build,H5DCP_CHECKPOINT_DIR=$ckpt
# Job A: train.sbatch's default path; the later jobs: that path by name.
local_env=H5DCP_LOCAL_TIER=1
local=""
# on NODE CMD...: CMD on that node (its network, hostname and /dev/shm).
on() {
  local node=$1
  shift
  "$cluster" exec "$tmp/c" "$node" "$@"
}
# latest_local NODE: the step of NODE's latest-local pointer, or nothing.
latest_local() { on "$1" cat "$local/$1/latest-local" 2>/dev/null | sed -n 's/^local-step-0*\([0-9][0-9]*\)$/\1/p'; }
# submit OUT SBATCH-ARGS... -- TRAIN-ARGS...: the job id.
submit() {
  local o=$1 args=()
  shift
  while [ "$1" != -- ]; do args+=("$1"); shift; done
  shift
  sbatch --parsable --chdir="$shared" --output="$o" --export="$job_env,$local_env" "${args[@]}" \
    "$repo/jobs/train.sbatch" --seed 7 --steps 12 --checkpoint-every 4 --local-every 1 --local-replicas 1 "$@"
}
job_field() { scontrol show job "$1" 2>/dev/null | grep -oE "\\b$2=[^ ]+" | head -n1 | cut -d= -f2; }
# ended JOB OUT HOW STATE [DIAG]: the job is gone, in STATE (COMPLETED with
# exit 0, or FAILED). HDF5's own error stack (HDF5-DIAG) fails it, unless
# DIAG is given: then each stack must be about a truncated file (the copy the
# test cut: h5dcp lets HDF5 print its stack when it opens a corrupted local
# copy, although it then reports the error itself).
ended() {
  wait_for job_gone "$1" || { cat "$2"; scancel "$1"; fail "$3: the job did not end (at $(elapsed), budget ${budget}s)"; }
  local state
  state=$(job_field "$1" JobState)
  [ "$state" = "$4" ] || { cat "$2"; fail "$3: the job ended $state ($(job_field "$1" ExitCode)), not $4"; }
  if [ "$4" = COMPLETED ] && [ "$(job_field "$1" ExitCode)" != 0:0 ]; then
    cat "$2"
    fail "$3: exit code $(job_field "$1" ExitCode)"
  fi
  if [ -z "${5:-}" ]; then
    if grep -q "HDF5-DIAG" "$2"; then fail "$3: the job printed HDF5's own error stack (HDF5-DIAG)"; fi
  elif [ "$(grep -c '^HDF5-DIAG' "$2")" -ne "$(grep -c 'H5F__super_read(): truncated file' "$2")" ]; then
    fail "$3: the job printed HDF5's own error stack (HDF5-DIAG) about something else than the truncated copy"
  fi
}
# resumed_local OUT START RANKS: the local step start #START resumed from on RANKS ranks.
resumed_local() {
  start_lines "$1" "$2" | sed -n "s|^h5dcp-train: resumed from local step \\([0-9]*\\) (the node-local tier) on $3 ranks: [1-9][0-9]* bytes read from local copies and sent over MPI, none from $ckpt\$|\\1|p"
}
host_local_empty() {
  [ ! -e "$local" ] || fail "$1: the host has $local ($(ls -A "$local" | tr '\n' ' ')): a node's /dev/shm is not private to it"
}

# --- 1. a node dies; the requeued job resumes on the 2 nodes left from local copies ---
outA=$tmp/jobA.out
jobA=$(submit "$outA" --nodes=3 --ntasks=6 --ntasks-per-node=2 -- --throttle-ms 500 --crash-after-step 10)
echo "sbatch: job A $jobA (3 nodes x 2 ranks) at $(elapsed)"
local=/dev/shm/h5dcp-$jobA
local_env="H5DCP_LOCAL_DIR=$local/{node}"
# The ranks' placement, from start #0's device lines.
placed() { [ -s "$outA" ] && [ "$(wc -w <<<"$(nodes_of "$outA" 0)")" -eq 6 ] || { job_gone "$jobA" && { cat "$outA"; fail "job A ended early"; }; false; }; }
wait_for placed || { cat "$outA"; scancel "$jobA"; fail "job A's 6 ranks did not start (at $(elapsed))"; }
start_lines "$outA" 0 | grep -qF "node-local tier in $local/{node}" ||
  { head -n 3 "$outA"; fail "job A (H5DCP_LOCAL_TIER=1) does not use train.sbatch's default path $local/{node}"; }
first=$(nodes_of "$outA" 0)
victim=$(sed -n 's/.*\b4:\(h5n[0-9]\).*/\1/p' <<<"$first")
nodes=$(tr ' ' '\n' <<<"$first" | cut -s -d: -f2 | sort -u | tr '\n' ' ')
[ "$nodes" = "h5n1 h5n2 h5n3 " ] && [[ $first == *"5:$victim "* ]] && [[ $first != *"0:$victim "* ]] ||
  fail "job A's ranks not placed 0 1 | 2 3 | 4 5 on 3 nodes: $first"
# The kill once every node has published local step 6 (its pointer), before
# step 8's drain: the newest shared checkpoint is step 4.
step6_everywhere() {
  grep -q '^step 8 ' "$outA" && { cat "$outA"; fail "job A reached step 8 before the kill (too fast: raise --throttle-ms)"; }
  local n s
  for n in h5n1 h5n2 h5n3; do
    s=$(latest_local "$n")
    [ -n "$s" ] && [ "$s" -ge 6 ] || return 1
  done
}
wait_for step6_everywhere || { cat "$outA"; scancel "$jobA"; fail "local step 6 not published on every node (at $(elapsed))"; }
host_local_empty "job A"
"$cluster" kill-node "$tmp/c" "$victim" || fail "cluster.sh kill-node $victim failed"
wait_for set_down "$victim" || { cat "$tmp/down.out"; fail "scontrol could not set $victim DOWN (at $(elapsed))"; }
t_dead=$(now)
killed_at=$(grep -c '^step ' "$outA")
echo "killed $victim (ranks 4 5; $first) after step $killed_at, local step 6 published everywhere, at $(elapsed); set DOWN"
[ "$(published)" = "4 " ] || fail "shared checkpoints when the node died: steps '$(published)', not 4"

requeued() { [ "$(job_field "$jobA" Restarts)" = 1 ] && [ "$(job_field "$jobA" JobState)" = PENDING ]; }
wait_for requeued || { cat "$outA"; fail "job A was not requeued after $victim died (state $(job_field "$jobA" JobState), at $(elapsed))"; }
# 6 tasks at 2 per node need 3 nodes: the operator shrinks it to the 2 left.
shrink() { scontrol update jobid="$jobA" NumNodes=2 NumTasks=4 >"$tmp/shrink.out" 2>&1; }
wait_for shrink || { cat "$tmp/shrink.out"; fail "scontrol could not shrink job A to 2 nodes x 2 tasks"; }
echo "requeued $(since "$t_dead") s after the death; shrunk to 2 nodes x 2 tasks"
ended "$jobA" "$outA" "job A's second start" FAILED
grep -q "start #1 on 4 tasks" "$outA" || { cat "$outA"; fail "job A: no second start on 4 tasks"; }
second=$(nodes_of "$outA" 1)
[ "$(wc -w <<<"$second")" -eq 4 ] && [[ $second != *":$victim "* ]] ||
  { cat "$outA"; fail "job A's second start ran its ranks on '$second' (4 ranks, not on the dead $victim)"; }
s1=$(resumed_local "$outA" 1 4)
[ -n "$s1" ] || { start_lines "$outA" 1; fail "job A's second start did not resume from the local tier on 4 ranks with nothing read from $ckpt"; }
[ "$s1" -ge 6 ] && [ "$s1" -le "$killed_at" ] ||
  fail "job A's second start resumed from local step $s1, not the newest published before the kill (6..$killed_at)"
start_lines "$outA" 1 | grep -q '^h5dcp-train: --crash-after-step 10:' || fail "job A's second start did not reach its crash after step 10"
[ "$(published)" = "4 8 " ] || fail "shared checkpoints after job A: steps '$(published)', not 4 8"
host_local_empty "job A's second start"
echo "ok: job A requeued on $second: resumed from local step $s1 on 4 ranks (newer than the shared step 4; $victim's ranks from their replicas, nothing from $ckpt), crashed after step 10"

# --- 1b. the same local step onto 3 ranks of the 2 nodes left --------------------------------
outB=$tmp/jobB.out
saved_env=$local_env
local_env="$local_env,H5DCP_LOCAL_KEEP=1"
jobB=$(submit "$outB" --nodes=2 --ntasks=3 -- --steps 1)
local_env=$saved_env
echo "sbatch: job B $jobB (2 nodes, 3 ranks) at $(elapsed)"
ended "$jobB" "$outB" "job B" COMPLETED
three_on_two=$(nodes_of "$outB" 0)
[ "$(wc -w <<<"$three_on_two")" -eq 3 ] && [[ $three_on_two != *":$victim "* ]] &&
  [ "$(tr ' ' '\n' <<<"$three_on_two" | cut -s -d: -f2 | sort -u | grep -c .)" -eq 2 ] ||
  { cat "$outB"; fail "job B ran its ranks on '$three_on_two' (3 ranks on the 2 nodes left, not on $victim)"; }
sB=$(resumed_local "$outB" 0 3)
[ -n "$sB" ] || { cat "$outB"; fail "job B did not resume from the local tier on 3 ranks with nothing read from $ckpt"; }
[ "$sB" -eq 9 ] || [ "$sB" -eq 10 ] || fail "job B resumed from local step $sB, not the newest job A left (9, or 10)"
grep -q "already reached (--steps 1): nothing to do" "$outB" || { cat "$outB"; fail "job B did not stop after loading"; }
[ "$(published)" = "4 8 " ] || fail "shared checkpoints after job B: steps '$(published)', not 4 8"
host_local_empty "job B"
echo "ok: job B on $three_on_two: resumed from local step $sB on 3 ranks of the 2 nodes left, nothing from $ckpt"

# --- 2. a fresh node, a corrupted copy, 3 ranks ------------------------------------------
"$cluster" revive-node "$tmp/c" "$victim" || fail "cluster.sh revive-node $victim failed"
wait_for all_idle || { sinfo -N; fail "$victim did not return to service (at $(elapsed))"; }
[ -z "$(on "$victim" ls -A /dev/shm)" ] || fail "the revived $victim's /dev/shm is not empty"
rank0=$(sed -n 's/^0:\(h5n[0-9]\) .*/\1/p' <<<"$second")
[ -n "$rank0" ] || fail "no node of rank 0 in '$second'"
# Rank 0's copy of each local step its node holds (the newest complete one, 9
# or 10, whichever the recovery picks, is among them): cut to half its size.
corrupted=""
for s in $(on "$rank0" ls "$local/$rank0" | sed -n 's/^local-step-0*\([0-9][0-9]*\)$/\1/p'); do
  f=$local/$rank0/$(printf 'local-step-%08d' "$s")/rank-00000.h5
  on "$rank0" sh -c 'truncate -s $(($(stat -c %s "$1") / 2)) "$1"' truncate "$f" || fail "could not truncate $f on $rank0"
  corrupted+="$s "
done
[ -n "$corrupted" ] || fail "$rank0 holds no local step"
echo "$victim back with an empty /dev/shm at $(elapsed); on $rank0, rank 0's copy of local steps $corrupted cut to half"

outC=$tmp/jobC.out
jobC=$(submit "$outC" --nodes=3 --ntasks=3 --ntasks-per-node=1 -- --throttle-ms 100 --crash-after-step 12)
echo "sbatch: job C $jobC (3 nodes x 1 rank) at $(elapsed)"
ended "$jobC" "$outC" "job C" FAILED truncated
three=$(nodes_of "$outC" 0)
[ "$(tr ' ' '\n' <<<"$three" | cut -s -d: -f2 | sort -u | grep -c .)" -eq 3 ] || fail "job C's ranks ran on '$three', not one per node"
s2=$(resumed_local "$outC" 0 3)
[ -n "$s2" ] || { cat "$outC"; fail "job C did not resume from the local tier on 3 ranks with nothing read from $ckpt"; }
[ "$s2" -eq 9 ] || [ "$s2" -eq 10 ] || fail "job C resumed from local step $s2, not the newest job A left (9, or 10)"
bad=$local/$rank0/$(printf 'local-step-%08d' "$s2")/rank-00000.h5
grep -qF "h5dcp-train: local copy skipped: $rank0: $bad: " "$outC" ||
  { grep 'local copy skipped' "$outC"; fail "job C did not name the corrupted copy it skipped ($rank0: $bad)"; }
grep -q '^h5dcp-train: --crash-after-step 12:' "$outC" || fail "job C did not reach its crash after step 12"
[ "$(published)" = "4 8 " ] || fail "shared checkpoints after job C: steps '$(published)', not 4 8"
# Local step 11 complete everywhere (step 12's save was cut short by the
# crash; had it finished on a node, its pointer would say 12).
for n in h5n1 h5n2 h5n3; do
  s=$(latest_local "$n")
  [ "$s" = 11 ] || [ "$s" = 12 ] || fail "after job C, $n's newest local step is '$s', not 11 (or 12)"
done
host_local_empty "job C"
echo "ok: job C ($three; $victim fresh): resumed from local step $s2 on 3 ranks, skipped the corrupted copy, left local step 11 and shared 8"

# --- 3. two nodes lost with 1 replica: back to the shared directory -------------------------
keep=$rank0
lost=$(printf '%s\n' h5n1 h5n2 h5n3 | grep -vx "$keep" | tr '\n' ' ')
for n in $lost; do "$cluster" kill-node "$tmp/c" "$n" >/dev/null || fail "cluster.sh kill-node $n failed"; done
# shellcheck disable=SC2086
wait_for set_down $lost || { cat "$tmp/down.out"; fail "scontrol could not set $lost DOWN (at $(elapsed))"; }
echo "killed $lost at $(elapsed); $keep left"
outD=$tmp/jobD.out
# One node cannot hold a copy on another: --local-replicas 0 (the last wins).
jobD=$(submit "$outD" --nodes=1 --ntasks=2 --ntasks-per-node=2 -- --local-replicas 0)
ended "$jobD" "$outD" "job D" COMPLETED
grep -qE "^h5dcp-train: resumed from $ckpt/step-0*8\\.h5 \\(step 8, shared directory\\) on 2 ranks\$" "$outD" ||
  { cat "$outD"; fail "job D did not fall back to the shared step 8 on 2 ranks"; }
[ "$(published)" = "4 8 12 " ] || fail "shared checkpoints after job D: steps '$(published)', not 4 8 12"
read -r l1 l2 <<<"$lost"
grep -E "^h5dcp-train: local tier: step 11: .*no intact copy \\(lost: ($l1, $l2|$l2, $l1)\\b" "$outD" >"$tmp/why.txt" ||
  { grep 'local tier' "$outD"; fail "job D did not say that local step 11 lacks copies because $l1 and $l2 were lost"; }
grep -qF 'training finished' "$outD" || fail "job D's output lacks 'training finished'"
grep -qF "train.sbatch: removed the node-local tier's steps" "$outD" || fail "train.sbatch did not remove the local steps at the end"
[ -z "$(on "$keep" sh -c 'ls -A "$1" 2>/dev/null' ls "$local/$keep")" ] ||
  fail "after job D, $keep's local directory still holds: $(on "$keep" ls -A "$local/$keep" | tr '\n' ' ')"
echo "ok: job D on $keep: $(cat "$tmp/why.txt"); resumed from the shared step 8, finished, local steps removed"

# --- 4. every loss ----------------------------------------------------------------------------
cat "$outA" "$outC" "$outD" | grep '^step ' | sort -u | sort -k2,2n >"$tmp/steps.txt"
diff "$reference" "$tmp/steps.txt" ||
  fail "the losses differ from the uninterrupted 1-rank run, or a step printed two (< reference, > these jobs)"
echo "ok: every loss of the 4 starts equals the uninterrupted run bit for bit, steps 1..12"
for f in "$ckpt"/step-*.h5; do
  "$cli" verify "$f" >"$tmp/verify.out" 2>&1 || { cat "$tmp/verify.out"; fail "h5dcp verify failed on $f"; }
done
echo "ok: the shared steps $(published)verify"
cluster_test_down
