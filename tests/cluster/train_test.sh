#!/usr/bin/env bash
# jobs/train.sbatch, unchanged, across two nodes (issue 19, item 2).
# Brings up cluster.sh's 3-node Slurm (network + UTS namespaces on one
# machine) in a temporary directory, then for each LAUNCHER (H5DCP_LAUNCHER,
# which the job script reads: srun --mpi=pmix, or mpiexec in the job):
#   sbatch --nodes=2 --ntasks-per-node=2 --gpus-per-node=2 jobs/train.sbatch
#     --steps 12 --seed 7 --checkpoint-every 3
# with its checkpoints in the cluster's shared directory, and checks:
#   - the job COMPLETED with exit code 0, printed "training finished", and no
#     HDF5-DIAG; the checkpoints of steps 6, 9 and 12 (--keep-last 3) are there;
#   - every printed loss equals the uninterrupted 1-rank run's (REFERENCE, from
#     tests/train's `reference` case), bit for bit, steps 1..12;
#   - the rank -> device lines: 4 ranks on 2 of the nodes, ranks 0 and 1 on
#     one, 2 and 3 on the other, node-local ranks 0 and 1 on each (local size 2),
#     and the GPUs Slurm gave each node (CUDA_VISIBLE_DEVICES=0,1): each runs on
#     "cpu (no GPU visible with CUDA_VISIBLE_DEVICES='0,1')" and, with
#     H5DCP_TEST_CUDA_DEVICE_COUNT=2 (set here; h5dcp/training/device.hpp), names the
#     device it would take: "[... would be cuda:L (CUDA_VISIBLE_DEVICES=0,1:
#     GPU L)]" for local rank L;
# and finally that cluster.sh down leaves no namespace of the run.
# Fails (never skips) without root. Needs what nodes_test.sh needs.
#
#   train_test.sh REPO_DIR BUILD_DIR REFERENCE_TXT [srun|mpiexec]...
# BUILD_DIR holds apps/h5dcp-train (the job's H5DCP_BUILD_DIR); the launchers
# default to both, in one cluster.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
training_test_needs "$1" "$2" "$3"
shift 3
launchers=("$@")
[ ${#launchers[@]} -gt 0 ] || launchers=(srun mpiexec)
for l in "${launchers[@]}"; do [ "$l" = srun ] || [ "$l" = mpiexec ] || fail "unknown launcher $l (srun or mpiexec)"; done
training_test_up train

# The device-count override for tests without a GPU (see the header).
export H5DCP_TEST_CUDA_DEVICE_COUNT=2

# check_devices HOW OUTPUT: the rank -> device lines.
check_devices() {
  local how=$1 out=$2 lines nodes n r line lr got_ranks locals
  lines=$(grep -c '^h5dcp-train: rank [0-9]* (node ' "$out" || true)
  [ "$lines" -eq 4 ] || fail "$how: $lines rank -> device lines, not 4"
  nodes=$(sed -n 's/^h5dcp-train: rank [0-9]* (node \([^,]*\),.*/\1/p' "$out" | sort -u | tr '\n' ' ')
  [[ $nodes =~ ^h5n[1-3]\ h5n[1-3]\ $ ]] || fail "$how: ranks on nodes '$nodes', not on 2 of h5n1..h5n3"
  # Ranks 0 1 on one node, 2 3 on the other (block placement), local 0 and 1 on each.
  for n in $nodes; do
    got_ranks=$(sed -n "s/^h5dcp-train: rank \([0-9]*\) (node $n, .*/\1/p" "$out" | sort -n | tr '\n' ' ')
    [ "$got_ranks" = "0 1 " ] || [ "$got_ranks" = "2 3 " ] || fail "$how: node $n holds ranks '$got_ranks', not 0 1 or 2 3"
    locals=$(sed -n "s/^h5dcp-train: rank [0-9]* (node $n, local \([0-9]*\) of 2) -> .*/\1/p" "$out" | sort -n | tr '\n' ' ')
    [ "$locals" = "0 1 " ] || fail "$how: node $n holds local ranks '$locals' (of 2), not 0 1"
  done
  while read -r line; do
    r=${line#h5dcp-train: rank } r=${r%% *}
    lr=${line#* local } lr=${lr%% *}
    # rank 2r/2r+1 pairs: local rank = rank % 2 under block placement.
    [ "$lr" = $((r % 2)) ] || fail "$how: rank $r has local rank $lr: $line"
    # Runs on the CPU (no GPU here) with Slurm's 2 GPUs of the node visible,
    # and names the GPU it would take (H5DCP_TEST_CUDA_DEVICE_COUNT=2).
    [[ $line == *" -> cpu (no GPU visible with CUDA_VISIBLE_DEVICES='0,1')"* ]] ||
      fail "$how: not CUDA_VISIBLE_DEVICES=0,1 (Slurm's 2 GPUs of the node) on the CPU: $line"
    [[ $line == *"[H5DCP_TEST_CUDA_DEVICE_COUNT=2: would be cuda:$lr (CUDA_VISIBLE_DEVICES=0,1: GPU $lr)]"* ]] ||
      fail "$how: rank $r (local $lr) would not take cuda:$lr = GPU $lr of CUDA_VISIBLE_DEVICES=0,1: $line"
  done < <(grep '^h5dcp-train: rank [0-9]* (node ' "$out")
  echo "ok: $how: ranks 0 1 | 2 3 on $nodes(local 0 1 on each) would take cuda:0 cuda:1 = GPU 0, 1 of CUDA_VISIBLE_DEVICES=0,1 (H5DCP_TEST_CUDA_DEVICE_COUNT=2; trained on the CPU)"
}

for how in "${launchers[@]}"; do
  out=$tmp/$how.out
  ckpt=$shared/ckpt-$how
  job=$(sbatch --parsable --chdir="$shared" --output="$out" --nodes=2 --ntasks-per-node=2 --gpus-per-node=2 \
    --export=ALL,H5DCP_LAUNCHER="$how",H5DCP_BUILD_DIR="$build",H5DCP_CHECKPOINT_DIR="$ckpt" \
    "$repo/jobs/train.sbatch" --steps 12 --seed 7 --checkpoint-every 3)
  echo "sbatch: job $job (ranks started by $how) at $(elapsed)"
  wait_for job_gone "$job" || { scancel "$job"; cat "$out" 2>/dev/null; fail "$how: the job did not finish (at $(elapsed), budget ${budget}s)"; }
  info=$(scontrol show job "$job")
  echo "--- job output ($how)"
  cat "$out"
  echo "---"
  grep -q 'JobState=COMPLETED' <<<"$info" && grep -q 'ExitCode=0:0' <<<"$info" ||
    fail "$how: the job did not complete with exit code 0 ($(grep -oE 'JobState=[A-Z_]+|ExitCode=[0-9:]+' <<<"$info" | tr '\n' ' '))"
  if grep -q "HDF5-DIAG" "$out"; then fail "$how: the job printed HDF5's own error stack (HDF5-DIAG)"; fi
  grep -qF 'training finished' "$out" || fail "$how: the job output lacks 'training finished'"
  grep -qF 'on 4 tasks' "$out" || fail "$how: the job script did not see 4 tasks"
  grep -q '^h5dcp-train: 4 ranks;' "$out" || fail "$how: h5dcp-train did not run on 4 ranks"
  have=$(find "$ckpt" -maxdepth 1 -name 'step-*.h5' -printf '%f\n' | sed -n 's/^step-0*\([0-9][0-9]*\)\.h5$/\1/p' | sort -n | tr '\n' ' ')
  [ "$have" = "6 9 12 " ] || fail "$how: checkpoints of steps '$have' in $ckpt, not 6 9 12"
  grep '^step ' "$out" | sort -u | sort -k2,2n >"$tmp/$how.steps"
  diff "$reference" "$tmp/$how.steps" || fail "$how: the losses differ from the uninterrupted 1-rank run (< reference, > this job)"
  echo "ok: $how: 12 steps on 2 nodes x 2 ranks; every loss equals the 1-rank reference bit for bit (final $(tail -n 1 "$tmp/$how.steps" | cut -d' ' -f4))"
  check_devices "$how" "$out"
done

cluster_test_down
