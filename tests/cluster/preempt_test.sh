#!/usr/bin/env bash
# Preemption of a 2-node job (issue 19, item 3), as train.slurm_preempt does
# on one node. Brings up cluster.sh's 3-node Slurm in a temporary directory,
# then:
#   1. sbatch --nodes=2 --ntasks-per-node=2 --gpus-per-node=2 jobs/train.sbatch
#      (unchanged; its ranks started by LAUNCHER: mpiexec in the job, or srun)
#      --steps 12 --checkpoint-every 3, slowed to 0.3 s per step;
#   2. once it printed step 4: scancel --batch --signal=USR1 (what
#      `#SBATCH --signal=B:USR1@120` does before the time limit);
#   3. the script passes the signal on, the 4 ranks on 2 nodes finish their
#      step, checkpoint and exit 85, the script requeues the job, and the
#      requeued job (same id) starts again on 2 nodes, resumes from that
#      checkpoint on 4 ranks and finishes;
#   4. every loss printed, the repeated ones and the final one included,
#      equals the uninterrupted 1-rank run's (REFERENCE) bit for bit;
#      both starts placed ranks 0 1 | 2 3 on 2 nodes;
# then cluster.sh down leaves no namespace of the run.
# Fails (never skips) without root. Needs what nodes_test.sh needs.
#
#   preempt_test.sh REPO_DIR BUILD_DIR REFERENCE_TXT [mpiexec|srun]
set -euo pipefail
launcher=${4:-mpiexec}
. "$(dirname "$0")/lib.sh"
training_test_needs "$1" "$2" "$3"
[ "$launcher" = srun ] || [ "$launcher" = mpiexec ] || fail "unknown launcher $launcher (srun or mpiexec)"
training_test_up preempt

out=$tmp/job.out
job=$(sbatch --parsable --chdir="$shared" --output="$out" --nodes=2 --ntasks-per-node=2 --gpus-per-node=2 \
  --export=ALL,H5DCP_LAUNCHER="$launcher",H5DCP_BUILD_DIR="$build",H5DCP_CHECKPOINT_DIR="$shared/ckpt" \
  "$repo/jobs/train.sbatch" --steps 12 --seed 7 --checkpoint-every 3 --throttle-ms 300)
echo "sbatch: job $job (2 nodes x 2 ranks, $launcher)"

reached_step_4() { grep -q '^step 4 ' "$out" 2>/dev/null; }
wait_for reached_step_4 || { cat "$out" 2>/dev/null; scancel "$job"; fail "the job did not reach step 4 (at $(elapsed))"; }
echo "scancel --batch --signal=USR1 $job (at $(elapsed))"
scancel --batch --signal=USR1 "$job"

requeued() { grep -q 'Restarts=1' <<<"$(scontrol show job "$job")"; }
wait_for requeued || { cat "$out"; scancel "$job"; fail "the job was not requeued (at $(elapsed))"; }
echo "requeued at $(elapsed)"
wait_for job_gone "$job" || { cat "$out"; scancel "$job"; fail "the job did not finish (at $(elapsed))"; }
info=$(scontrol show job "$job")
echo "--- job output"
cat "$out"
echo "---"
grep -q 'JobState=COMPLETED' <<<"$info" && grep -q 'ExitCode=0:0' <<<"$info" ||
  fail "the job did not complete with exit code 0 ($(grep -oE 'JobState=[A-Z_]+|ExitCode=[0-9:]+' <<<"$info" | tr '\n' ' '))"
if grep -q "HDF5-DIAG" "$out"; then fail "the job printed HDF5's own error stack (HDF5-DIAG)"; fi
for expected in 'SIGUSR1 received' 'preempted (signal 10)' 'requeueing job' 'start #1 on 4 tasks' 'training finished'; do
  grep -qF "$expected" "$out" || fail "the job output lacks '$expected'"
done
stopped=$(grep -o 'stopped after step [0-9]*' "$out" | grep -o '[0-9]*$')
[ "$stopped" -lt 12 ] || fail "the preempted run was not stopped before the end"
grep -qE "^h5dcp-train: resumed from .*step-0*$stopped\\.h5 \\(step $stopped, saved by 4 ranks\\) on 4 ranks\$" "$out" ||
  fail "the requeued job did not resume from step $stopped's checkpoint on 4 ranks"

# Both starts: ranks 0 1 | 2 3 on 2 distinct nodes.
for s in 0 1; do
  where=$(start_lines "$out" $s | sed -n 's/^h5dcp-train: rank \([0-9]*\) (node \([^,]*\),.*/\2 \1/p' | by_node)
  [[ $where =~ ^h5n[1-3]:\ 0\ 1\ \|\ h5n[1-3]:\ 2\ 3$ ]] || [[ $where =~ ^h5n[1-3]:\ 2\ 3\ \|\ h5n[1-3]:\ 0\ 1$ ]] ||
    fail "start #$s placed its ranks '$where', not 0 1 | 2 3 on 2 distinct nodes"
  echo "ok: start #$s: $where"
done

grep '^step ' "$out" | sort -u | sort -k2,2n >"$tmp/got.txt"
diff "$reference" "$tmp/got.txt" ||
  fail "the losses differ from the uninterrupted run, or a step printed two (< reference, > preempted + requeued job)"
echo "ok: preempted after step $stopped on 2 nodes, requeued, resumed on 4 ranks; all 12 losses equal the uninterrupted run bit for bit" \
  "(final: $(tail -n 1 "$tmp/got.txt" | cut -d' ' -f4))"
cluster_test_down
