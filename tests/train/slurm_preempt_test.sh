#!/usr/bin/env bash
# jobs/train.sbatch under a real one-node Slurm (Debian's slurm-wlm + munge),
# started here in a temporary directory and stopped at the end:
#   1. submit the train job (2 tasks, 12 steps, slowed to 0.3 s per step);
#   2. once it printed step 4, preempt it: scancel --batch --signal=USR1 (what
#      `#SBATCH --signal=B:USR1@120` does before the time limit);
#   3. see the program checkpoint and exit 85, the script requeue the job,
#      and the requeued job (same id) resume and finish;
#   4. check every printed loss, the final one included, against the
#      uninterrupted run (REFERENCE, from train_test.py's `reference` case).
# Fails (never skips) when the daemons cannot start. Needs root.
#
#   slurm_preempt_test.sh REPO_DIR BUILD_DIR REFERENCE_TXT [mpiexec|srun]
# The last argument is the job's launcher (H5DCP_LAUNCHER, default mpiexec).
set -euo pipefail
repo=$(cd "$1" && pwd)
build=$(cd "$2" && pwd)
reference=$3
export H5DCP_LAUNCHER=${4:-mpiexec}
here=$(cd "$(dirname "$0")" && pwd)

start=$(date +%s)
# One deadline for every wait below (H5DCP_SLURM_BUDGET seconds, set by CTest
# below its TIMEOUT): the test fails with its own message and the job's
# output, and stops its daemons, before CTest would kill it.
budget=${H5DCP_SLURM_BUDGET:-165}
deadline=$((start + budget))
# fail, elapsed, left, wait_for, job_gone
. "$here/../support/slurm_wait.sh"

[ "$(id -u)" -eq 0 ] || fail "this test starts munged, slurmctld and slurmd: it needs root"
[ -s "$reference" ] || fail "$reference is missing (the train.reference test writes it)"

# Debian's packages (scripts/install-deps.sh installs them; here only if missing).
if [ ! -x /usr/sbin/slurmctld ] || [ ! -x /usr/sbin/slurmd ] || [ ! -x /usr/sbin/munged ]; then
  echo "installing slurm-wlm and munge"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends slurm-wlm munge >/dev/null ||
    fail "slurm-wlm and munge are not installed and could not be installed"
fi

tmp=$(mktemp -d /tmp/h5dcp-slurm.XXXXXX)
ctld=""
slurmd=""
started_munged=""
stop_daemons() {
  set +e
  for pid in $slurmd $ctld; do kill -TERM "$pid" 2>/dev/null; done
  for pid in $slurmd $ctld; do wait "$pid" 2>/dev/null; done
  if [ -n "$started_munged" ] && [ -s /run/munge/munged.pid ]; then
    kill -TERM "$(cat /run/munge/munged.pid)" 2>/dev/null
  fi
  if [ -n "${H5DCP_KEEP_SLURM_DIR:-}" ]; then echo "kept $tmp"; else rm -rf "$tmp"; fi
}
trap stop_daemons EXIT

# munge: reuse a working one, else start one (and stop it at the end).
if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
  echo "munge: using the munged already running"
else
  [ -s /etc/munge/munge.key ] || fail "/etc/munge/munge.key is missing (reinstall munge)"
  mkdir -p /run/munge && chown munge:munge /run/munge
  runuser -u munge -- /usr/sbin/munged || fail "munged did not start"
  started_munged=1
  for _ in $(seq 50); do munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.1; done
  munge -n | unmunge >/dev/null || fail "munged started but does not answer"
  echo "munge: started munged (pid $(cat /run/munge/munged.pid))"
fi

# No "producer | grep -q" under pipefail below: grep -q exits at its first match,
# the producer may then die of SIGPIPE and the pipeline fail although it matched
# (this failed a CI run: "the job did not complete" for a COMPLETED job).

# Slurm: the configuration of ../shared/local-slurm, in $tmp, on two free
# ports (not 6817/6818: another Slurm, or another run of this test, may be up),
# below the kernel's ephemeral range: a port there may be bound by another
# test's outgoing connection (MPI's TCP), which no listener check sees, and
# slurmctld then dies of "Address already in use" (this failed a CI run).
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
read -r ephemeral_low _ </proc/sys/net/ipv4/ip_local_port_range
span=$((ephemeral_low > 12000 ? ephemeral_low - 10002 : 30000))
ctld_port=""
for _ in $(seq 50); do
  p=$((10000 + RANDOM % span))
  if port_free "$p" && port_free $((p + 1)); then ctld_port=$p; break; fi
done
[ -n "$ctld_port" ] || fail "no two free ports found"
mkdir -p "$tmp/state" "$tmp/spool" "$tmp/log"
sed -e "s|@DIR@|$tmp|g" -e "s|@HOST@|$(hostname -s)|g" -e "s|^SlurmctldPort=.*|SlurmctldPort=$ctld_port|" \
  -e "s|^SlurmdPort=.*|SlurmdPort=$((ctld_port + 1))|" "$here/slurm.conf.in" >"$tmp/slurm.conf"
export SLURM_CONF=$tmp/slurm.conf
slurmctld -D -f "$SLURM_CONF" >"$tmp/log/slurmctld.out" 2>&1 &
ctld=$!
slurmd -D -f "$SLURM_CONF" >"$tmp/log/slurmd.out" 2>&1 &
slurmd=$!
# A daemon that exited (a port taken after all) fails the test now, not at the deadline.
node_idle() {
  kill -0 "$ctld" 2>/dev/null || { tail -n 5 "$tmp/log/slurmctld.out"; fail "slurmctld exited after $(elapsed)"; }
  kill -0 "$slurmd" 2>/dev/null || { tail -n 5 "$tmp/log/slurmd.out"; fail "slurmd exited after $(elapsed)"; }
  grep -q idle <<<"$(sinfo -h -o %t 2>/dev/null)"
}
if ! wait_for node_idle; then
  tail -n 20 "$tmp"/log/*
  fail "Slurm did not come up (no idle node after $(elapsed), budget ${budget}s)"
fi
echo "slurm: slurmctld $ctld (port $ctld_port) and slurmd $slurmd up after $(elapsed)"

# 1. Submit.
out=$tmp/job.out
job=$(sbatch --parsable --chdir="$tmp" --output="$out" --ntasks=2 \
  --export=ALL,H5DCP_BUILD_DIR="$build",H5DCP_CHECKPOINT_DIR="$tmp/ckpt" \
  "$repo/jobs/train.sbatch" --steps 12 --seed 7 --checkpoint-every 3 --throttle-ms 300)
echo "sbatch: job $job (ranks started by $H5DCP_LAUNCHER)"

# 2. Preempt it mid-training.
reached_step_4() { grep -q '^step 4 ' "$out" 2>/dev/null; }
wait_for reached_step_4 || { cat "$out" 2>/dev/null; fail "the job did not reach step 4 (at $(elapsed), budget ${budget}s)"; }
echo "scancel --batch --signal=USR1 $job (at $(elapsed))"
scancel --batch --signal=USR1 "$job"

# 3. Requeued, then finished.
requeued() { grep -q 'Restarts=1' <<<"$(scontrol show job "$job")"; }
wait_for requeued || { cat "$out"; fail "the job was not requeued (at $(elapsed), budget ${budget}s)"; }
echo "requeued at $(elapsed)"
wait_for job_gone "$job" || { cat "$out"; scancel "$job"; fail "the job did not finish (at $(elapsed), budget ${budget}s)"; }
info=$(scontrol show job "$job")
echo "--- job output"
cat "$out"
echo "---"
if grep -q "HDF5-DIAG" "$out"; then fail "the job printed HDF5's own error stack (HDF5-DIAG)"; fi
echo "$info" | grep -E 'JobState|Restarts|ExitCode' | sed 's/^ */scontrol: /'
grep -q 'JobState=COMPLETED' <<<"$info" || fail "the job did not complete"
grep -q 'ExitCode=0:0' <<<"$info" || fail "the job's exit code is not 0"
for expected in 'SIGUSR1 received' 'preempted (signal 10)' 'requeueing job' 'start #1' 'resumed from' \
  'training finished'; do
  grep -qF "$expected" "$out" || fail "the job output lacks '$expected'"
done
stopped=$(grep -o 'stopped after step [0-9]*' "$out" | grep -o '[0-9]*$')
[ "$stopped" -lt 12 ] || fail "the preempted run was not stopped before the end"

# 4. The losses of the preempted + requeued job equal the uninterrupted run's.
grep '^step ' "$out" | sort -u | sort -k2,2n >"$tmp/got.txt"
if ! diff "$reference" "$tmp/got.txt"; then
  fail "the losses differ from the uninterrupted run (< reference, > preempted + requeued job)"
fi
echo "ok: preempted after step $stopped, requeued, resumed; all 12 losses equal the uninterrupted run bit for bit" \
  "(final: $(tail -n 1 "$tmp/got.txt" | cut -d' ' -f4))"
echo "PASS in $(elapsed)"
