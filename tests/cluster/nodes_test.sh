#!/usr/bin/env bash
# Ranks on different nodes are on different nodes (issue 19, first step).
# Brings up cluster.sh's 3-node Slurm (network + UTS namespaces on one
# machine) in a temporary directory, then:
#   1. sinfo: 3 idle nodes h5n1..h5n3, each with gres gpu:2; `up` removed a
#      planted leftover of an earlier run; munge works inside a node, whose
#      hostname is its Slurm name and whose only interfaces are lo and eth0;
#   2. srun -N3 hostname: 3 distinct names, the nodes';
#   3. node_probe (MPI only) on --nodes=2 --ntasks-per-node=2 --gpus-per-node=2,
#      started three ways: srun --mpi=pmix (from the root namespace, the
#      "login node"), mpiexec in an sbatch job (on the first node), and
#      salloc + mpiexec (from the root namespace). Each time: 2 processor
#      names, equal to the Slurm node names the ranks ran on; node-local
#      ranks 0 and 1 on each (MPI_COMM_TYPE_SHARED groups of 2); the
#      launcher's local rank agrees; CUDA_VISIBLE_DEVICES=0,1 as Slurm's
#      GRES set it; the Allreduce and the 4 MiB exchanges checked; OpenMPI
#      chose vader (shared memory) for peers on the same node and tcp for the
#      others (btl_base_verbose); the bytes crossed the nodes' veths;
#   4. cluster.sh down: no namespace, veth, bridge, bind mount or daemon of
#      the run is left.
# Fails (never skips) without root. Needs ip, unshare, nsenter, Debian's
# slurm-wlm and munge (installed here if missing), OpenMPI.
#
#   nodes_test.sh NODE_PROBE
set -euo pipefail
probe=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
. "$(dirname "$0")/lib.sh"

cluster_test_needs mpiexec
[ -x "$probe" ] || fail "$probe is missing (build the h5dcp_node_probe target)"

tmp=$(mktemp -d /tmp/h5dcp-cluster.XXXXXX)
teardown() {
  set +e
  "$cluster" down "$tmp/c" >/dev/null 2>&1
  if [ -n "${H5DCP_KEEP_SLURM_DIR:-}" ]; then echo "kept $tmp"; else rm -rf "$tmp"; fi
}
trap teardown EXIT
trap 'fail "interrupted"' INT TERM

# A leftover of an earlier run (its watchdog and daemons gone): `up` must remove it.
stale=""
for _ in $(seq 20); do
  c=h5c$(printf '%04x' $((RANDOM % 65536)))
  if ! ip netns list | grep -q "^$c-" && ! ip link show "$c-br" >/dev/null 2>&1; then stale=$c; break; fi
done
[ -n "$stale" ] || fail "no unused id for the planted leftover"
ip netns add "$stale-h5n1"
ip link add "$stale-br" type bridge

# The watchdog outlives CTest's TIMEOUT a little: after a kill -9 of this
# script it still stops the cluster.
H5DCP_CLUSTER_LIFETIME=$(($(left) + 60)) H5DCP_CLUSTER_WAIT=$(left) "$cluster" up "$tmp/c" |
  tee "$tmp/up.log" || fail "cluster.sh up failed (at $(elapsed))"
eval "$("$cluster" env "$tmp/c")"
id=$H5DCP_CLUSTER_ID
echo "up at $(elapsed)"
grep -q "removing the leftovers of an earlier run, $stale" "$tmp/up.log" || fail "up did not report removing $stale"
if ip netns list | grep -q "^$stale-" || ip link show "$stale-br" >/dev/null 2>&1; then
  fail "up left the planted leftover $stale in place"
fi

# --- 1. the nodes ------------------------------------------------------------------
sinfo -h -N -o '%N %t %G' | sort -u >"$tmp/sinfo.txt"
printf 'h5n1 idle gpu:2\nh5n2 idle gpu:2\nh5n3 idle gpu:2\n' >"$tmp/sinfo.want"
diff "$tmp/sinfo.want" "$tmp/sinfo.txt" >/dev/null || { cat "$tmp/sinfo.txt"; fail "sinfo does not show 3 idle nodes with gres gpu:2"; }
[ "$("$cluster" exec "$tmp/c" h5n2 hostname)" = h5n2 ] || fail "node h5n2's hostname is not h5n2"
ifaces=$("$cluster" exec "$tmp/c" h5n2 ip -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' | sort | tr '\n' ' ')
[ "$ifaces" = "eth0 lo " ] || fail "node h5n2 has interfaces '$ifaces', not just eth0 and lo"
"$cluster" exec "$tmp/c" h5n2 sh -c 'munge -n | unmunge' >/dev/null || fail "munge does not work inside node h5n2"
echo "ok: sinfo shows h5n1..h5n3 idle with gres gpu:2; h5n2 has its own hostname, lo + eth0, and munge"

# --- 2. srun -N3 hostname -------------------------------------------------------------
names=$(timeout -k 5 "$(left)" srun -N3 hostname | sort | tr '\n' ' ')
[ "$names" = "h5n1 h5n2 h5n3 " ] || fail "srun -N3 hostname gave '$names'"
echo "ok: srun -N3 hostname: $names"

# --- 3. node_probe, three launchers ------------------------------------------------------
# OpenMPI as root, 4 ranks on 2 cores, ROMIO as every h5dcp test; TCP (btl
# and the launch's out-of-band channel) only on the cluster's subnet: inside
# a node that is eth0 anyway, and salloc's mpiexec in the root namespace
# would otherwise offer the host's other addresses to the nodes. The btl
# verbosity prints which transport each rank uses for each peer.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1 \
  OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_io=romio321 \
  OMPI_MCA_btl_tcp_if_include=$H5DCP_CLUSTER_SUBNET.0/24 OMPI_MCA_oob_tcp_if_include=$H5DCP_CLUSTER_SUBNET.0/24 \
  OMPI_MCA_btl_base_verbose=10
bytes=$((4 << 20))
alloc=(--nodes=2 --ntasks-per-node=2 --gpus-per-node=2)
veth_bytes() { # the bytes through node $1's veth, both directions
  echo $(($(cat "/sys/class/net/$id-h${1#h5n}/statistics/rx_bytes") + $(cat "/sys/class/net/$id-h${1#h5n}/statistics/tx_bytes")))
}
declare -A before
snapshot() { for n in h5n1 h5n2 h5n3; do before[$n]=$(veth_bytes $n); done; }

# check_probe LAUNCHER OUTPUT: the assertions of step 3 on one run's output.
check_probe() {
  local how=$1 out=$2 lines hosts h line
  grep -q "^probe: ok nodes=2 ranks=4 inter_node_bytes=$bytes$" "$out" || { cat "$out"; fail "$how: the probe did not pass"; }
  lines=$(grep -c '^probe rank=' "$out")
  [ "$lines" -eq 4 ] || { cat "$out"; fail "$how: $lines rank lines, not 4"; }
  hosts=$(grep '^probe rank=' "$out" | grep -o ' host=[^ ]*' | cut -d= -f2 | sort -u | tr '\n' ' ')
  [[ $hosts =~ ^h5n[1-3]\ h5n[1-3]\ $ ]] || { cat "$out"; fail "$how: processor names '$hosts', not 2 of the nodes"; }
  for h in $hosts; do
    [ "$(grep "^probe rank=.* host=$h " "$out" | grep -o ' local_rank=[0-9]*' | sort | tr -d '\n')" = " local_rank=0 local_rank=1" ] ||
      { cat "$out"; fail "$how: node $h does not hold node-local ranks 0 and 1"; }
  done
  while read -r line; do
    local host=${line#* host=} lr=${line#* local_rank=}
    host=${host%% *} lr=${lr%% *}
    [[ $line == *" local_size=2 nodes=2 "* ]] || fail "$how: not 2 groups of 2: $line"
    [[ $line == *" SLURMD_NODENAME=$host "* ]] || fail "$how: processor name is not the Slurm node name: $line"
    [[ $line == *" CUDA_VISIBLE_DEVICES=0,1 "* ]] || fail "$how: CUDA_VISIBLE_DEVICES is not 0,1: $line"
    [[ $line == *" SLURM_GPUS_ON_NODE=2 "* ]] || fail "$how: SLURM_GPUS_ON_NODE is not 2: $line"
    [[ $line == *" allreduce=ok inter_node=ok intra_node=ok"* ]] || fail "$how: a data check failed: $line"
    if [ "$how" = srun ]; then
      [[ $line == *" SLURM_LOCALID=$lr "* ]] || fail "$how: SLURM_LOCALID is not the node-local rank: $line"
      [[ $line == *" SLURM_STEP_GPUS=0,1 "* ]] || fail "$how: SLURM_STEP_GPUS is not 0,1: $line"
    else
      [[ $line == *" OMPI_COMM_WORLD_LOCAL_RANK=$lr "* ]] || fail "$how: OMPI_COMM_WORLD_LOCAL_RANK is not the node-local rank: $line"
    fi
  done < <(grep '^probe rank=' "$out")
  # "[h5n1:1234] mca: bml: Using vader btl for send to [[...],1] on node h5n1",
  # printed when a rank first reaches a peer: every rank must have reached
  # one on its node by vader and one on the other node by tcp, and nothing else.
  local proc btl to procs_vader procs_tcp
  while read -r proc btl to; do
    if [ "${proc%:*}" = "$to" ]; then
      [ "$btl" = vader ] || fail "$how: $proc uses $btl, not vader (shared memory), for a peer on its own node"
    else
      [ "$btl" = tcp ] || fail "$how: $proc uses $btl, not tcp, for a peer on $to"
    fi
  done < <(sed -n 's/^\[\([^]]*\)\] mca: bml: Using \([a-z]*\) btl for send to .* on node \([^ ]*\)$/\1 \2 \3/p' "$out" |
    grep -v ' self ')
  procs_vader=$(sed -n 's/^\[\([^]]*\)\] mca: bml: Using vader btl .*/\1/p' "$out" | sort -u | wc -l)
  procs_tcp=$(sed -n 's/^\[\([^]]*\)\] mca: bml: Using tcp btl .*/\1/p' "$out" | sort -u | wc -l)
  [ "$procs_vader" -eq 4 ] && [ "$procs_tcp" -eq 4 ] ||
    fail "$how: $procs_vader of 4 ranks reported vader for a peer on their node, $procs_tcp of 4 tcp for one on the other node"
  # Each node's 2 ranks received 2 x 4 MiB from the other node and sent as
  # much: at least 4 x 4 MiB through its veth.
  for h in $hosts; do
    local moved=$(($(veth_bytes "$h") - before[$h]))
    [ "$moved" -ge $((4 * bytes)) ] || fail "$how: only $moved bytes through $h's veth (want >= $((4 * bytes)))"
  done
  echo "ok: $how: ranks on $hosts(2 per node, local ranks 0 1, CUDA_VISIBLE_DEVICES=0,1); vader within a node, tcp across; data checked"
}

cd "$tmp/c/shared"
# a. srun --mpi=pmix from the root namespace.
snapshot
timeout -k 5 "$(left)" srun "${alloc[@]}" --mpi=pmix "$probe" >"$tmp/srun.out" 2>&1 ||
  { cat "$tmp/srun.out"; fail "srun --mpi=pmix failed (at $(elapsed))"; }
check_probe srun "$tmp/srun.out"

# b. mpiexec inside an sbatch job (the batch script runs on the first node).
snapshot
cat >"$tmp/c/shared/probe.sbatch" <<EOF
#!/bin/bash
echo "batch script on \$(hostname), nodes \$SLURM_JOB_NODELIST"
exec mpiexec "$probe"
EOF
job=$(sbatch --parsable "${alloc[@]}" --output="$tmp/sbatch.out" "$tmp/c/shared/probe.sbatch")
wait_for job_gone "$job" || { scancel "$job"; cat "$tmp/sbatch.out"; fail "the sbatch job did not finish (at $(elapsed), budget ${budget}s)"; }
info=$(scontrol show job "$job")
grep -q 'JobState=COMPLETED' <<<"$info" && grep -q 'ExitCode=0:0' <<<"$info" ||
  { cat "$tmp/sbatch.out"; fail "the sbatch job did not complete with exit code 0"; }
check_probe mpiexec-in-sbatch "$tmp/sbatch.out"

# c. salloc + mpiexec from the root namespace (mpiexec starts its daemons on the nodes through srun).
snapshot
timeout -k 5 "$(left)" salloc "${alloc[@]}" mpiexec "$probe" >"$tmp/salloc.out" 2>&1 ||
  { cat "$tmp/salloc.out"; fail "salloc mpiexec failed (at $(elapsed))"; }
check_probe mpiexec-in-salloc "$tmp/salloc.out"
cd /

# --- 4. down leaves nothing ------------------------------------------------------------------
pids=$(cat "$tmp/c/pid/"*.pid)
"$cluster" down "$tmp/c" >"$tmp/down.log" || fail "cluster.sh down failed"
# A munged this run started stays when another cluster.sh run still uses it.
if grep -q "munged left running" "$tmp/down.log"; then pids=$(cat "$tmp/c/pid/"[!m]*.pid); fi
"$cluster" down "$tmp/c" >/dev/null || fail "a second cluster.sh down failed (not idempotent)"
left_over=$(
  ip netns list | grep "^$id-" || true
  ip -o link show | awk -F': ' '{print $2}' | grep "^$id-" || true
  grep " /run/h5dcp-cluster/$id/" /proc/mounts || true
  [ ! -e "/run/h5dcp-cluster/$id" ] || echo "/run/h5dcp-cluster/$id"
  for p in $pids; do [ ! -e "/proc/$p" ] || echo "pid $p ($(cat "/proc/$p/comm" 2>/dev/null))"; done
)
[ -z "$left_over" ] || fail "cluster.sh down left: $left_over"
echo "ok: down removed the namespaces, veths, bridge and bind mounts, and stopped every daemon"
echo "PASS in $(elapsed)"
