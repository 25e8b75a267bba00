#!/usr/bin/env bash
# A node dies during a 2-node training run with async checkpoints (issue 19,
# item 3). Brings up cluster.sh's 3-node Slurm in a temporary directory, then:
#   1. sbatch --nodes=2 --ntasks-per-node=2 jobs/train.sbatch (srun --mpi=pmix)
#      --steps 8 --checkpoint-every 2, with rank 2 made to pause 4 s after its
#      writes in every save (H5DCP_INJECT_FAULT=save:write@2~4) and
#      H5DCP_TRACE=1, so that the death lands inside a save: when rank 2 has
#      written its part of step 6's checkpoint (its third save:write trace line),
#      the node of ranks 2 and 3 dies: `cluster.sh kill-node` (its link down,
#      then SIGKILL to its slurmd, slurmstepd and tasks), and the test sets it
#      DOWN (scontrol update). Then, checked:
#      - step 6 was not published (only its .h5dcp-partial file exists), the
#        checkpoints of steps 2 and 4 are there and `h5dcp verify` passes on them;
#      - Slurm ends the run (NODE_FAIL) and, the job being --requeue, requeues it:
#        the second start runs on the 2 nodes left, resumes from step 4's
#        checkpoint on 4 ranks and finishes step 8 (its steps' losses printed again);
#   2. a resubmitted job on one node (--nodes=1 --ntasks-per-node=2, --steps 10)
#      resumes from step 8 on 2 ranks, on a node that is not the dead one;
#   3. the node comes back (`cluster.sh revive-node`: ReturnToService=2 returns
#      it when its new slurmd registers); a job on all 3 nodes
#      (--nodes=3 --ntasks-per-node=1, --steps 12) resumes from step 10 on
#      3 ranks, one on each node;
#   4. every loss printed by every run, repeated steps included, equals the
#      uninterrupted 1-rank run's (REFERENCE, tests/train's `reference`) bit
#      for bit, steps 1..12, and every checkpoint left verifies;
# then cluster.sh down leaves no namespace of the run.
# Fails (never skips) without root. Needs what nodes_test.sh needs.
#
#   node_loss_test.sh REPO_DIR BUILD_DIR REFERENCE_TXT H5DCP_CLI
set -euo pipefail
. "$(dirname "$0")/lib.sh"
training_test_needs "$@"
training_test_up node-loss

ckpt=$shared/ckpt
out=$tmp/job.out
job_state() { scontrol show job "$1" 2>/dev/null | grep -oE 'JobState=[A-Z_]+' | cut -d= -f2; }
verify_all() {
  local f
  for f in "$ckpt"/step-*.h5; do
    "$cli" verify "$f" >"$tmp/verify.out" 2>&1 || { cat "$tmp/verify.out"; fail "$1: h5dcp verify failed on $f"; }
  done
}
# submit OUT SBATCH-ARGS... -- TRAIN-ARGS...: the job id.
submit() {
  local o=$1 args=()
  shift
  while [ "$1" != -- ]; do args+=("$1"); shift; done
  shift
  sbatch --parsable --chdir="$shared" --output="$o" "${args[@]}" \
    "$repo/jobs/train.sbatch" --seed 7 --checkpoint-every 2 --throttle-ms 200 "$@"
}
finished_ok() { # JOB OUT HOW
  wait_for job_gone "$1" || { cat "$2"; scancel "$1"; fail "$3: the job did not finish (at $(elapsed), budget ${budget}s)"; }
  local info
  info=$(scontrol show job "$1")
  grep -q 'JobState=COMPLETED' <<<"$info" && grep -q 'ExitCode=0:0' <<<"$info" ||
    { cat "$2"; fail "$3: the job did not complete with exit code 0 ($(grep -oE 'JobState=[A-Z_]+|ExitCode=[0-9:]+' <<<"$info" | tr '\n' ' '))"; }
  if grep -q "HDF5-DIAG" "$2"; then fail "$3: the job printed HDF5's own error stack (HDF5-DIAG)"; fi
  grep -qF 'training finished' "$2" || fail "$3: the job output lacks 'training finished'"
}

# --- 1. the node dies inside step 6's save --------------------------------------------
job=$(submit "$out" --nodes=2 --ntasks-per-node=2 --gpus-per-node=2 \
  --export=ALL,H5DCP_LAUNCHER=srun,H5DCP_BUILD_DIR="$build",H5DCP_CHECKPOINT_DIR="$ckpt",H5DCP_TRACE=1,H5DCP_INJECT_FAULT=save:write@2~4 \
  -- --steps 8)
echo "sbatch: job $job (2 nodes x 2 ranks, srun) at $(elapsed)"
in_step6_save() {
  job_gone "$job" && { cat "$out"; fail "the job ended before step 6's save"; }
  local n
  n=$(grep -c '^\[h5dcp trace\] rank 2 save:write ' "$out" 2>/dev/null || true)
  [ "${n:-0}" -ge 3 ]
}
wait_for in_step6_save || { cat "$out"; scancel "$job"; fail "rank 2 did not reach step 6's save:write (at $(elapsed))"; }
first_nodes=$(nodes_of "$out" 0)
dead=$(sed -n 's/.*\b2:\(h5n[0-9]\).*/\1/p' <<<"$first_nodes")
[ -n "$dead" ] && [[ $first_nodes == *"3:$dead "* ]] && [[ $first_nodes != *"0:$dead "* ]] ||
  fail "ranks not placed 0 1 | 2 3 on 2 nodes: $first_nodes"
"$cluster" kill-node "$tmp/c" "$dead" || fail "cluster.sh kill-node $dead failed"
# DOWN, as an administrator or the health check would.
wait_for set_down "$dead" || { cat "$tmp/down.out"; fail "scontrol could not set $dead DOWN (at $(elapsed))"; }
t_dead=$(now)
echo "killed $dead (ranks 2 3; $first_nodes) in rank 2's pause after writing step 6, at $(elapsed); set DOWN"
[ "$(published)" = "2 4 " ] || fail "published when the node died: steps '$(published)', not 2 4 (step 6's save must still be in flight)"
ls -a "$ckpt" | grep -q '^\.step-0*6\.h5\.h5dcp-partial\.' || fail "no partial file of step 6: the node did not die inside its save ($(ls -a "$ckpt" | tr '\n' ' '))"
verify_all "after the node's death"
echo "ok: step 6 not published (its partial file only); steps 2 4 verify"

# Slurm's decision: the run ends with the node (NODE_FAIL) and the job, being
# --requeue, is requeued; it starts again on the 2 nodes left and resumes.
requeued() { grep -q 'Restarts=1' <<<"$(scontrol show job "$job")"; }
wait_for requeued || { cat "$out"; fail "the job was not requeued after the node died (state $(job_state "$job"), at $(elapsed))"; }
echo "requeued $(since "$t_dead") s after the death"
finished_ok "$job" "$out" "requeued job"
grep -q "start #1 on 4 tasks" "$out" || fail "no second start on 4 tasks"
grep -qE '^h5dcp-train: resumed from .*step-0*4\.h5 \(step 4, saved by 4 ranks\) on 4 ranks$' "$out" ||
  { grep 'resumed from' "$out"; fail "the requeued job did not resume from step 4's checkpoint on 4 ranks"; }
second_nodes=$(nodes_of "$out" 1)
[ "$(wc -w <<<"$second_nodes")" -eq 4 ] && [[ $second_nodes != *":$dead "* ]] ||
  fail "the requeued job's ranks ran on '$second_nodes' (4 ranks, not on the dead $dead)"
[ "$(published)" = "4 6 8 " ] || fail "after the requeued job: steps '$(published)', not 4 6 8"
echo "ok: requeued on $second_nodes: resumed from step 4 on 4 ranks, finished step 8"

# --- 2. one node ------------------------------------------------------------------------
out1=$tmp/one-node.out
job1=$(submit "$out1" --nodes=1 --ntasks=2 --ntasks-per-node=2 \
  --export=ALL,H5DCP_LAUNCHER=srun,H5DCP_BUILD_DIR="$build",H5DCP_CHECKPOINT_DIR="$ckpt" -- --steps 10)
finished_ok "$job1" "$out1" "one node"
grep -qE '^h5dcp-train: resumed from .*step-0*8\.h5 \(step 8, saved by 4 ranks\) on 2 ranks$' "$out1" ||
  { cat "$out1"; fail "the one-node job did not resume from step 8 on 2 ranks"; }
one=$(nodes_of "$out1" 0)
[[ $one =~ ^0:(h5n[0-9])\ 1:(h5n[0-9])\ $ ]] && [ "${BASH_REMATCH[1]}" = "${BASH_REMATCH[2]}" ] &&
  [[ $one != *":$dead "* ]] || fail "the one-node job's ranks ran on '$one', not both on one node other than $dead"
echo "ok: one node ($one): resumed from step 8 on 2 ranks, finished step 10"

# --- 3. the node is back: 3 nodes ---------------------------------------------------------
"$cluster" revive-node "$tmp/c" "$dead" || fail "cluster.sh revive-node $dead failed"
wait_for all_idle || { sinfo -N; fail "$dead did not return to service (at $(elapsed))"; }
echo "$dead back in service at $(elapsed)"
out3=$tmp/three-nodes.out
job3=$(submit "$out3" --nodes=3 --ntasks=3 --ntasks-per-node=1 \
  --export=ALL,H5DCP_LAUNCHER=srun,H5DCP_BUILD_DIR="$build",H5DCP_CHECKPOINT_DIR="$ckpt" -- --steps 12)
finished_ok "$job3" "$out3" "three nodes"
grep -qE '^h5dcp-train: resumed from .*step-0*10\.h5 \(step 10, saved by 2 ranks\) on 3 ranks$' "$out3" ||
  { cat "$out3"; fail "the 3-node job did not resume from step 10 on 3 ranks"; }
three=$(nodes_of "$out3" 0)
[ "$(tr ' ' '\n' <<<"$three" | cut -d: -f2 | sort -u | grep -c .)" -eq 3 ] || fail "the 3-node job's ranks ran on '$three'"
echo "ok: three nodes ($three): resumed from step 10 on 3 ranks, finished step 12"

# --- 4. every loss ------------------------------------------------------------------------
cat "$out" "$out1" "$out3" | grep '^step ' | sort -u | sort -k2,2n >"$tmp/steps.txt"
diff "$reference" "$tmp/steps.txt" ||
  fail "the losses differ from the uninterrupted 1-rank run, or a step printed two (< reference, > these jobs)"
verify_all "at the end"
echo "ok: every loss of the 4 runs (steps 5..8 twice) equals the uninterrupted run bit for bit; steps $(published)verify"
cluster_test_down
