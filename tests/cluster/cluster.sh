#!/usr/bin/env bash
# A real multi-node Slurm cluster on one machine, for tests (issue 19).
#
#   cluster.sh up DIR          start it (DIR: a fresh or empty directory)
#   cluster.sh down DIR        stop it and remove everything `up` created
#   cluster.sh exec DIR NODE CMD...   run CMD on node NODE (h5n1, h5n2, ...)
#   cluster.sh env DIR         print `export SLURM_CONF=...` etc. for eval
#   cluster.sh kill-node DIR NODE     NODE dies: its link down, all its processes killed,
#                                     its local tmpfs (DIR/local on it) gone
#   cluster.sh revive-node DIR NODE   NODE back: its link up, a fresh slurmd, an empty local tmpfs
#
# Each node is a network namespace (its own lo and eth0, nothing else) and
# a UTS namespace (its own hostname, h5n1..h5nK), kept alive by bind mounts
# under /run/h5dcp-cluster/ID/ like `ip netns` keeps network namespaces, so
# slurmd and everything it starts see the node's hostname. The nodes' eth0
# are veth pairs whose other ends are enslaved to a Linux bridge in the root
# namespace, in one private /24 that only this script creates: the bridge
# has .1, node k has .(10+k). slurmctld runs in the root namespace and
# listens on the bridge's address (the root namespace plays the login node:
# sinfo/srun/sbatch run there unwrapped, as on a real cluster, and
# slurmctld's host name check needs the real host name). munged is shared:
# its socket is a file (/run/munge), and every node's mount namespace
# follows the root one (below), so DIR (and DIR/shared, the "parallel file
# system") is the same directory on every node. Each node has 2 fake GPUs for Slurm's GRES
# (character devices DIR/dev/gpu0 and gpu1, /dev/null's numbers).
#
# Node-local storage (the node-local checkpoint tier, issue 50): each node
# also has a mount namespace of its own (a copy of the root one with slave
# propagation: it sees DIR, DIR/shared and everything the host mounts) in
# which a tmpfs of 256 MiB is mounted on DIR/local. On the host (the login
# node) DIR/local stays an empty directory; on node h5nK it is that node's
# private "local disk": what a job writes there is seen by that node alone,
# so a block reaches another node only over the network (MPI), and
# cluster.env names the path (H5DCP_CLUSTER_LOCAL). The namespace is kept
# alive by a bind mount under /run/h5dcp-cluster/ID/mnt/ (a private mount
# of its own, as unshare --mount=FILE needs); slurmd (hence every job step)
# and `exec` enter it. `kill-node` drops it: the tmpfs and all it held are
# gone, as a dead machine's /dev/shm or a failed local disk; `revive-node`
# gives the node a fresh, empty one (a replaced or rebooted node). The node's
# /dev/shm is a tmpfs of its own too, as on real nodes: OpenMPI's and PMIx's
# shared-memory files are named after the host and the job (h5n1, Slurm job
# 1 in every run), and two clusters of this script running at once on one
# /dev/shm collided there (a job of one hung in MPI_Init, or segfaulted).
#
# Every run has an id, h5c + 4 hex digits: the bridge is ID-br, the root
# ends of the veths ID-hK, the network namespaces ID-h5nK. `up` first
# removes leftovers of earlier runs of this script (names h5c????-*) whose
# watchdog is gone and whose namespaces hold no process.
#
# Everything `up` starts stops by itself: a watchdog (its own session, not a
# child of the caller) runs `down DIR` after H5DCP_CLUSTER_LIFETIME seconds
# (default 900). `down` is idempotent and stops only what `up` started: the
# processes in DIR/pid/, the processes inside the run's namespaces (slurmd's
# steps), munged when `up` started it (unless another run still uses it: it
# then becomes that run's); then it removes the namespaces, veths, bridge and
# bind mounts. DIR itself is left to the caller.
#
# Environment (up): H5DCP_CLUSTER_NODES (default 3), H5DCP_CLUSTER_SUBNET
# (the /24 as A.B.C, default a free 10.213.N), H5DCP_CLUSTER_LIFETIME,
# H5DCP_CLUSTER_WAIT (seconds to wait for idle nodes, default 60). Needs root.
set -euo pipefail
self=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")
registry_root=/run/h5dcp-cluster

die() {
  echo "cluster.sh: $*" >&2
  exit 1
}
usage() { die "usage: cluster.sh up DIR | down DIR | exec DIR NODE CMD... | env DIR | kill-node DIR NODE | revive-node DIR NODE"; }

# --- small helpers --------------------------------------------------------------
ip2int() {
  local IFS=.
  # shellcheck disable=SC2086
  set -- $1
  echo $((($1 << 24) | ($2 << 16) | ($3 << 8) | $4))
}
# overlaps A.B.C.D/LEN A.B.C.D/LEN: do the two prefixes share an address?
overlaps() {
  local a=${1%/*} la=${1#*/} b=${2%/*} lb=${2#*/}
  [ "$la" = "$1" ] && la=32
  [ "$lb" = "$2" ] && lb=32
  local l=$((la < lb ? la : lb))
  local mask=$(((0xffffffff << (32 - l)) & 0xffffffff))
  [ $(($(ip2int "$a") & mask)) -eq $(($(ip2int "$b") & mask)) ]
}
# Every IPv4 prefix the root namespace routes or has an address in.
prefixes_in_use() {
  ip -4 route show table all | awk '$1 ~ /^(local|broadcast|unicast|multicast|anycast|blackhole|unreachable|prohibit)$/ {print $2; next} $1 != "default" {print $1}'
  ip -4 -o addr show | awk '{print $4}'
}
subnet_free() {
  local p
  for p in $(prefixes_in_use); do
    [[ $p =~ ^[0-9.]+(/[0-9]+)?$ ]] || continue
    if overlaps "$1.0/24" "$p"; then return 1; fi
  done
}
# alive PIDFILE COMM: is the process in PIDFILE still running, under that name?
alive() {
  local pid
  [ -s "$1" ] || return 1
  pid=$(cat "$1")
  [ -r "/proc/$pid/comm" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$2" ]
}
# stop PIDFILE:COMM...: SIGTERM to each process still running under that
# name, up to 5 s for all of them together, then SIGKILL; only those.
stop() {
  local pc left
  for pc in "$@"; do alive "${pc%:*}" "${pc##*:}" && kill -TERM "$(cat "${pc%:*}")" 2>/dev/null; done
  for _ in $(seq 50); do
    left=0
    for pc in "$@"; do alive "${pc%:*}" "${pc##*:}" && left=1; done
    [ "$left" = 1 ] || return 0
    sleep 0.1
  done
  for pc in "$@"; do alive "${pc%:*}" "${pc##*:}" && kill -KILL "$(cat "${pc%:*}")" 2>/dev/null; done
  return 0
}
# Processes inside a network namespace (slurmd, slurmstepd, job tasks).
kill_netns_pids() {
  local ns=$1 pids
  pids=$(ip netns pids "$ns" 2>/dev/null) || return 0
  [ -n "$pids" ] || return 0
  # shellcheck disable=SC2086
  kill -TERM $pids 2>/dev/null || true
  for _ in $(seq 30); do
    [ -z "$(ip netns pids "$ns" 2>/dev/null)" ] && return 0
    sleep 0.1
  done
  pids=$(ip netns pids "$ns" 2>/dev/null) || return 0
  # shellcheck disable=SC2086
  [ -z "$pids" ] || kill -KILL $pids 2>/dev/null || true
}
# Remove every namespace, link, mount and registry entry of run ID.
remove_net() {
  local id=$1 ns l m
  # The nodes' mount namespaces first (their tmpfs go with the last reference).
  if [ -d "$registry_root/$id/mnt" ]; then
    for m in "$registry_root/$id"/mnt/*.mnt; do
      [ -e "$m" ] || continue
      umount "$m" 2>/dev/null || true
    done
    umount "$registry_root/$id/mnt" 2>/dev/null || true
  fi
  for ns in $(ip netns list | awk '{print $1}' | grep -E "^$id-h5n[0-9]+$" || true); do
    kill_netns_pids "$ns"
    ip netns del "$ns" 2>/dev/null || true
  done
  for l in $(ip -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' | grep -E "^$id-(h[0-9]+|br)$" || true); do
    ip link del "$l" 2>/dev/null || true
  done
  if [ -d "$registry_root/$id" ]; then
    for m in "$registry_root/$id"/*.uts; do
      [ -e "$m" ] || continue
      umount "$m" 2>/dev/null || true
    done
    rm -rf "${registry_root:?}/$id"
  fi
}
# The ids of every run whose names are still around.
known_ids() {
  {
    ip netns list | awk '{print $1}' | grep -oE '^h5c[0-9a-f]{4}-h5n[0-9]+$' | cut -c1-7
    ip -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' | grep -oE '^h5c[0-9a-f]{4}-(h[0-9]+|br)$' | cut -c1-7
    find "$registry_root" -mindepth 1 -maxdepth 1 -name 'h5c????' -printf '%f\n' 2>/dev/null
  } | sort -u
}
# Is run ID still running? Its watchdog lives, or a process is in one of its namespaces.
run_alive() {
  local id=$1 ns
  alive "$registry_root/$id/pid/watchdog.pid" bash && return 0
  for ns in $(ip netns list | awk '{print $1}' | grep -E "^$id-h5n[0-9]+$" || true); do
    [ -n "$(ip netns pids "$ns" 2>/dev/null)" ] && return 0
  done
  return 1
}
load_env() {
  [ -s "$1/cluster.env" ] || return 1
  # shellcheck disable=SC1091
  . "$1/cluster.env"
}
# record NAME PID: DIR/pid/NAME.pid, and its copy in the registry (for a
# `down` after DIR was removed).
record() {
  echo "$2" >"$dir/pid/$1.pid"
  echo "$2" >"$registry_root/$H5DCP_CLUSTER_ID/pid/$1.pid"
}

# new_node_mount K: node h5nK's mount namespace ($dir, $id set), a fresh
# empty tmpfs on $dir/local and another on /dev/shm in it. Inside it, first, the copy of the
# registry's mnt/ is detached: it holds the other nodes' namespace files, and
# those references would keep their namespaces (and tmpfs) alive after
# kill-node drops them from the root namespace.
new_node_mount() {
  local k=$1 file=$registry_root/$id/mnt/h5n$k.mnt
  touch "$file"
  unshare --mount="$file" --propagation slave sh -c \
    'umount -l "$1" && mount -t tmpfs -o size=256m,mode=0755 "h5dcp-local-$2" "$3" &&
     mount -t tmpfs -o size=1g,mode=1777 "h5dcp-shm-$2" /dev/shm' \
    sh "$registry_root/$id/mnt" "$id-h5n$k" "$dir/local" ||
    die "could not make node h5n$k's mount namespace with a tmpfs on $dir/local"
}

# start_slurmd K: node h5nK's slurmd, in its namespaces ($dir, $id, $SLURM_CONF set).
start_slurmd() {
  local k=$1
  # nsenter execs slurmd ($! is its pid). Not `ip netns exec`: that also
  # mounts a fresh /sys, without /sys/fs/cgroup, and slurmd then refuses
  # to start ("Unable to initialize cgroup plugin").
  setsid nsenter --net="/run/netns/$id-h5n$k" --uts="$registry_root/$id/h5n$k.uts" \
    --mount="$registry_root/$id/mnt/h5n$k.mnt" \
    slurmd -D -N "h5n$k" -f "$SLURM_CONF" </dev/null >>"$dir/log/slurmd.h5n$k.out" 2>&1 &
  record "slurmd.h5n$k" $!
}

# --- down -------------------------------------------------------------------------
cmd_down() {
  local dir piddir="" r k
  dir=$(realpath -m "$1")
  if load_env "$dir"; then
    piddir=$dir/pid
  else
    # DIR was removed while its cluster ran (or never held one): the
    # registry entry naming it has copies of its settings and pid files.
    for r in "$registry_root"/h5c????; do
      if [ "$(cat "$r/dir" 2>/dev/null)" = "$dir" ] && load_env "$r"; then piddir=$r/pid; break; fi
    done
    [ -n "$piddir" ] || return 0
  fi
  set +e
  # The daemons first (all at once: each takes 1-2 s to stop), then whatever
  # is left in the nodes' namespaces (job steps), then the network.
  local daemons=("$piddir/slurmctld.pid:slurmctld")
  for k in $(seq "$H5DCP_CLUSTER_NODES"); do daemons+=("$piddir/slurmd.h5n$k.pid:slurmd"); done
  stop "${daemons[@]}"
  # munged, when this run started it: stopped, unless another run of this
  # script still runs (its slurmds need it): then that run stops it.
  if alive "$piddir/munged.pid" munged; then
    local heir=""
    for r in $(known_ids); do
      if [ "$r" != "$H5DCP_CLUSTER_ID" ] && [ -d "$registry_root/$r/pid" ] && run_alive "$r"; then heir=$r; break; fi
    done
    if [ -n "$heir" ]; then
      cp "$piddir/munged.pid" "$registry_root/$heir/pid/munged.pid"
      [ ! -d "$(cat "$registry_root/$heir/dir")/pid" ] || cp "$piddir/munged.pid" "$(cat "$registry_root/$heir/dir")/pid/munged.pid"
      echo "cluster.sh: munged left running for $heir"
    else
      stop "$piddir/munged.pid:munged"
    fi
  fi
  # The watchdog (unless it is the one running this): its session.
  if [ -s "$piddir/watchdog.pid" ] && [ "$(cat "$piddir/watchdog.pid")" != "$$" ] &&
    alive "$piddir/watchdog.pid" bash; then
    kill -TERM -- "-$(cat "$piddir/watchdog.pid")" 2>/dev/null
    for _ in $(seq 20); do alive "$piddir/watchdog.pid" bash || break; sleep 0.05; done
  fi
  remove_net "$H5DCP_CLUSTER_ID"
  set -e
  echo "cluster.sh: $H5DCP_CLUSTER_ID down"
}

# --- up ---------------------------------------------------------------------------
cmd_up() {
  local dir=$1
  [ "$(id -u)" -eq 0 ] || die "needs root (network and UTS namespaces, veths, a bridge, Slurm's daemons)"
  local nodes=${H5DCP_CLUSTER_NODES:-3} lifetime=${H5DCP_CLUSTER_LIFETIME:-900} wait_s=${H5DCP_CLUSTER_WAIT:-60}
  [[ $nodes =~ ^[1-9]$ ]] || die "H5DCP_CLUSTER_NODES must be 1 to 9"
  for tool in ip unshare nsenter slurmctld slurmd sinfo munge unmunge flock; do
    command -v "$tool" >/dev/null || die "$tool is missing (scripts/install-deps.sh installs slurm-wlm and munge)"
  done
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  [ ! -e "$dir/cluster.env" ] || die "$dir already holds a cluster (cluster.sh down $dir first)"
  mkdir -p "$registry_root"

  # One `up` at a time past this point: leftovers, the id and the subnet.
  exec 9>"$registry_root/lock"
  flock -w 30 9 || die "another cluster.sh up holds $registry_root/lock"
  local id
  for id in $(known_ids); do
    if ! run_alive "$id"; then
      echo "cluster.sh: removing the leftovers of an earlier run, $id"
      if [ -s "$registry_root/$id/dir" ]; then (cmd_down "$(cat "$registry_root/$id/dir")") || true; fi
      remove_net "$id"
    fi
  done
  id=""
  for _ in $(seq 100); do
    local cand
    cand=h5c$(printf '%04x' $((RANDOM % 65536)))
    grep -qx "$cand" <<<"$(known_ids)" || { id=$cand; break; }
  done
  [ -n "$id" ] || die "no unused run id found"
  local subnet=${H5DCP_CLUSTER_SUBNET:-}
  if [ -n "$subnet" ]; then
    subnet=${subnet%.0/24}
    [[ $subnet =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "H5DCP_CLUSTER_SUBNET must look like 10.213.7 (a /24)"
    subnet_free "$subnet" || die "$subnet.0/24 overlaps a route or address of this host: choose another H5DCP_CLUSTER_SUBNET"
  else
    for _ in $(seq 100); do
      local n=$((1 + RANDOM % 254))
      if subnet_free "10.213.$n"; then subnet=10.213.$n; break; fi
    done
    [ -n "$subnet" ] || die "no free 10.213.N.0/24 found: set H5DCP_CLUSTER_SUBNET"
  fi

  # A random free port for slurmctld on the bridge (the root namespace may
  # run another Slurm); slurmd's port is free in every node.
  local port="" p
  for _ in $(seq 50); do
    p=$((20000 + RANDOM % 30000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then port=$p; break; fi
  done
  [ -n "$port" ] || die "no free port found"

  # From here on a failure removes what was made.
  mkdir -p "$dir/pid" "$dir/log" "$dir/state" "$dir/dev" "$dir/shared" "$dir/local" "$registry_root/$id/pid" \
    "$registry_root/$id/mnt"
  echo "$dir" >"$registry_root/$id/dir"
  cat >"$dir/cluster.env" <<EOF
H5DCP_CLUSTER_ID=$id
H5DCP_CLUSTER_NODES=$nodes
H5DCP_CLUSTER_SUBNET=$subnet
H5DCP_CLUSTER_BRIDGE=$id-br
H5DCP_CLUSTER_PORT=$port
H5DCP_CLUSTER_LOCAL=$dir/local
EOF
  cp "$dir/cluster.env" "$registry_root/$id/cluster.env"
  load_env "$dir"
  up_done=0
  trap '[ "$up_done" = 1 ] || { echo "cluster.sh: up failed; removing what it made" >&2; cmd_down "$dir" >/dev/null 2>&1; }' EXIT
  # The watchdog: its own session, re-parented to init (the subshell exits),
  # so that neither the caller's end nor CTest killing its process tree stops it.
  (setsid bash -c 'echo $$ >"$1/pid/watchdog.pid"; echo $$ >"$4/pid/watchdog.pid"; sleep "$2" & wait
    exec "$3" down "$1"' watchdog "$dir" "$lifetime" "$self" "$registry_root/$id" </dev/null 9>&- >>"$dir/log/watchdog.log" 2>&1 &)
  for _ in $(seq 50); do [ -s "$dir/pid/watchdog.pid" ] && break; sleep 0.1; done
  [ -s "$dir/pid/watchdog.pid" ] || die "the watchdog did not start"

  # The network: a bridge with .1, one namespace + veth per node.
  ip link add "$id-br" type bridge
  ip addr add "$subnet.1/24" dev "$id-br"
  ip link set "$id-br" up
  local k ns
  for k in $(seq "$nodes"); do
    ns=$id-h5n$k
    ip netns add "$ns"
    ip link add "$id-h$k" type veth peer name "$id-n$k"
    ip link set "$id-n$k" netns "$ns"
    ip -n "$ns" link set "$id-n$k" name eth0
    ip -n "$ns" addr add "$subnet.$((10 + k))/24" dev eth0
    ip -n "$ns" link set lo up
    ip -n "$ns" link set eth0 up
    ip link set "$id-h$k" master "$id-br"
    ip link set "$id-h$k" up
    # The node's hostname, in a UTS namespace that outlives its processes.
    touch "$registry_root/$id/h5n$k.uts"
    unshare --uts="$registry_root/$id/h5n$k.uts" hostname "h5n$k"
  done
  # The nodes' mount namespaces, each with its private tmpfs on $dir/local.
  # unshare --mount=FILE needs FILE on a private mount: mnt/ bound on itself.
  mount --bind "$registry_root/$id/mnt" "$registry_root/$id/mnt"
  mount --make-private "$registry_root/$id/mnt"
  for k in $(seq "$nodes"); do new_node_mount "$k"; done
  # munge: reuse a working one, else start one (stopped by down, or handed
  # to another run of this script still using it). Under the lock: two
  # runs starting at once must not both start one.
  if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
    [ -s /etc/munge/munge.key ] || die "/etc/munge/munge.key is missing (reinstall munge)"
    mkdir -p /run/munge && chown munge:munge /run/munge
    runuser -u munge -- /usr/sbin/munged 9>&- || die "munged did not start"
    for _ in $(seq 50); do munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.1; done
    record munged "$(cat /run/munge/munged.pid)"
    munge -n | unmunge >/dev/null || die "munged started but does not answer"
  fi
  flock -u 9
  exec 9>&-

  mknod "$dir/dev/gpu0" c 1 3
  mknod "$dir/dev/gpu1" c 1 3
  local nodelist="h5n[1-$nodes]"
  [ "$nodes" -gt 1 ] || nodelist=h5n1
  {
    echo "# Written by tests/cluster/cluster.sh up ($id): $nodes nodes in network namespaces."
    echo "ClusterName=$id"
    echo "SlurmctldHost=$(hostname -s)($subnet.1)"
    echo "SlurmctldPort=$port"
    echo "SlurmdPort=6818"
    cat <<EOF
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$dir/log/jobcomp.txt
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
# SIGKILL 5 s after a job's SIGTERM (default 30): the ranks that survive a
# node's death may wait in MPI for it until then.
KillWait=5
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
# Each node's own "local" temporary directory: srun --mpi=pmix's plugin makes
# /tmp/spmix_appdir_UID_JOB.STEP on every node of a step, and on one shared
# /tmp the second node's fails ("File exists").
TmpFS=$dir/tmp/%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.%n.log
SlurmctldDebug=info
SlurmdDebug=info
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2,bf_interval=2
AuthInfo=cred_expire=5
MinJobAge=600
# Each node claims 4 CPUs (this machine may have 2): 2 tasks per node schedule.
SlurmdParameters=config_overrides
GresTypes=gpu
NodeName=DEFAULT CPUs=4 Boards=1 SocketsPerBoard=1 CoresPerSocket=4 ThreadsPerCore=1 RealMemory=1000 Gres=gpu:2 State=UNKNOWN
EOF
    for k in $(seq "$nodes"); do echo "NodeName=h5n$k NodeAddr=$subnet.$((10 + k))"; done
    echo "PartitionName=debug Nodes=$nodelist Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO"
  } >"$dir/slurm.conf"
  cat >"$dir/gres.conf" <<EOF
# 2 fake GPUs per node: character devices with /dev/null's numbers.
AutoDetect=off
Name=gpu File=$dir/dev/gpu[0-1]
EOF
  for k in $(seq "$nodes"); do mkdir -p "$dir/spool/h5n$k" "$dir/tmp/h5n$k"; done

  export SLURM_CONF=$dir/slurm.conf
  setsid slurmctld -D -f "$SLURM_CONF" </dev/null >"$dir/log/slurmctld.out" 2>&1 &
  record slurmctld $!
  for k in $(seq "$nodes"); do start_slurmd "$k"; done
  local deadline=$(($(date +%s) + wait_s)) idle=0
  while [ "$(date +%s)" -lt "$deadline" ]; do
    idle=$(sinfo -h -N -t idle -o %N 2>/dev/null | sort -u | wc -l)
    [ "$idle" -ge "$nodes" ] && break
    alive "$dir/pid/slurmctld.pid" slurmctld || { tail -n 15 "$dir/log/slurmctld.log" >&2; die "slurmctld died"; }
    for k in $(seq "$nodes"); do
      alive "$dir/pid/slurmd.h5n$k.pid" slurmd || { tail -n 15 "$dir/log/slurmd.h5n$k.log" >&2; die "slurmd of h5n$k died"; }
    done
    sleep 0.2
  done
  if [ "$idle" -lt "$nodes" ]; then
    tail -n 15 "$dir"/log/*.log >&2 || true
    sinfo -N >&2 || true
    die "only $idle of $nodes nodes idle after ${wait_s}s"
  fi
  up_done=1
  echo "cluster.sh: $id up: $nodes nodes h5n1..h5n$nodes on $subnet.0/24 (bridge $id-br, slurmctld $subnet.1:$port)"
  echo "cluster.sh: export SLURM_CONF=$SLURM_CONF"
}

# --- a node fails, and comes back ----------------------------------------------------
# kill-node: as when a node loses power: its link goes down first (its peers
# get no FIN or RST, only silence, as from a dead machine), then every
# process in its network namespace (slurmd, slurmstepd, the job's tasks) gets
# SIGKILL; slurmctld is not told (a test sets the node DOWN, or waits for
# SlurmdTimeout).
node_of_arg() {
  dir=$(cd "$1" && pwd)
  load_env "$dir" || die "no cluster in $dir"
  id=$H5DCP_CLUSTER_ID
  [[ $2 =~ ^h5n([0-9]+)$ ]] && [ -e "$registry_root/$id/$2.uts" ] || die "no node $2"
  k=${BASH_REMATCH[1]}
}
cmd_kill_node() {
  local dir id k pids
  node_of_arg "$1" "$2"
  ip link set "$id-h$k" down
  for _ in $(seq 50); do
    pids=$(ip netns pids "$id-h5n$k")
    [ -n "$pids" ] || break
    # shellcheck disable=SC2086
    kill -KILL $pids 2>/dev/null || true
    sleep 0.1
  done
  [ -z "$(ip netns pids "$id-h5n$k")" ] || die "processes left on $2 after SIGKILL: $(ip netns pids "$id-h5n$k" | tr '\n' ' ')"
  # Its local storage dies with it: no process is left in its mount
  # namespace, so this last reference's removal frees the tmpfs.
  umount "$registry_root/$id/mnt/$2.mnt" || die "could not drop $2's mount namespace (its local tmpfs)"
  echo "cluster.sh: $2 killed (link down, every process of it killed, its /dev/shm and local tmpfs gone)"
}
# revive-node: the link up and a fresh slurmd; with ReturnToService=2 the
# node returns to service when that slurmd registers.
cmd_revive_node() {
  local dir id k
  node_of_arg "$1" "$2"
  [ -z "$(ip netns pids "$id-h5n$k")" ] || die "$2 still runs processes: kill-node it first"
  ip link set "$id-h$k" up
  # A fresh, empty local tmpfs (as a replaced or rebooted node has).
  new_node_mount "$k"
  export SLURM_CONF=$dir/slurm.conf
  start_slurmd "$k"
  echo "cluster.sh: $2 revived (slurmd $(cat "$dir/pid/slurmd.$2.pid"), an empty /dev/shm and local tmpfs)"
}

# --- exec / env -------------------------------------------------------------------
cmd_exec() {
  local dir=$1 node=$2
  shift 2
  dir=$(cd "$dir" && pwd)
  load_env "$dir" || die "no cluster in $dir"
  [[ $node =~ ^h5n[0-9]+$ ]] && [ -e "$registry_root/$H5DCP_CLUSTER_ID/$node.uts" ] || die "no node $node"
  [ -e "$registry_root/$H5DCP_CLUSTER_ID/mnt/$node.mnt" ] && mountpoint -q "$registry_root/$H5DCP_CLUSTER_ID/mnt/$node.mnt" ||
    die "node $node is dead (kill-node): no mount namespace to enter"
  # Entering a mount namespace moves to its root: env -C goes back to the
  # caller's directory by its path, looked up in the node's namespace (not
  # nsenter --wd=DIR: that keeps the host's DIR, and a relative path from
  # it would bypass the node's own mounts).
  SLURM_CONF=$dir/slurm.conf exec nsenter --net="/run/netns/$H5DCP_CLUSTER_ID-$node" \
    --uts="$registry_root/$H5DCP_CLUSTER_ID/$node.uts" --mount="$registry_root/$H5DCP_CLUSTER_ID/mnt/$node.mnt" \
    env -C "$PWD" "$@"
}
cmd_env() {
  local dir
  dir=$(cd "$1" && pwd)
  load_env "$dir" || die "no cluster in $dir"
  echo "export SLURM_CONF=$dir/slurm.conf"
  sed 's/^/export /' "$dir/cluster.env"
}

[ $# -ge 2 ] || usage
case $1 in
  up) cmd_up "$2" ;;
  down) cmd_down "$2" ;;
  exec) [ $# -ge 4 ] || usage; shift; cmd_exec "$@" ;;
  kill-node) [ $# -eq 3 ] || usage; cmd_kill_node "$2" "$3" ;;
  revive-node) [ $# -eq 3 ] || usage; cmd_revive_node "$2" "$3" ;;
  env) cmd_env "$2" ;;
  *) usage ;;
esac
