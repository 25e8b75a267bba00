# The cluster tests' common part (sourced, not run): one deadline for every
# wait, the checks of what a test needs, and a cluster of cluster.sh in a
# temporary directory that goes down however the test ends.
#
#   . "$(dirname "$0")/lib.sh"
#   cluster_test_needs "what it is for" TOOL...   root, the tools, Slurm and munge
#   cluster_test_up NAME          $tmp (a fresh directory), $tmp/c the cluster,
#                                 its environment exported ($id, $SLURM_CONF, $shared)
#   cluster_test_down             down, no namespace left, "PASS in Ns"
# The tests that submit jobs/train.sbatch also have:
#   training_test_needs REPO BUILD REFERENCE [CLI]   $repo $build $reference ($cli), checked
#   training_test_up NAME         cluster_test_up, then the jobs' environment exported
#   published                     the steps of the checkpoints published in $ckpt, "2 4 "
#   nodes_of OUT START            "rank:node ..." of start #START's device lines in job output OUT
#   set_down NODE...              the nodes set DOWN (for wait_for: it can take retries)
#   all_idle                      the cluster's 3 nodes idle (back in service)
# A test may define cluster_test_cleanup (run first on exit, under set +e).
# H5DCP_SLURM_BUDGET (seconds, set by CTest below its TIMEOUT) is the budget
# of every wait: the test fails with its own message and tears the cluster
# down before CTest would kill it (after a kill the cluster's watchdog does).
# H5DCP_KEEP_SLURM_DIR=1 keeps $tmp (logs, job outputs).

cluster=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/cluster.sh

start=$(date +%s)
budget=${H5DCP_SLURM_BUDGET:-120}
deadline=$((start + budget))
# fail, elapsed, left, wait_for, job_gone
. "$(dirname "${BASH_SOURCE[0]}")/../support/slurm_wait.sh"
now() { date +%s.%N; }
# A command that fails outside a check ends the test (set -e): say which, with
# its line and status, where the test would otherwise end without a word.
# errtrace (-E) carries the trap into the test's functions; in subshells it
# stays silent, or its words would land in a command substitution's value.
set -E
trap 'rc=$?; [ "$BASHPID" != "$$" ] || echo "FAIL: ${0##*/} line $LINENO: \"$BASH_COMMAND\" exited $rc"' ERR
# Seconds since a `now`, to 0.1 s.
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# start_lines OUT N: the lines of job output OUT that train.sbatch's start #N
# printed (a requeued job appends each start to the same file).
start_lines() { awk -v s="start #$2 " 'index($0, "train.sbatch: job") == 1 { on = index($0, s) > 0 } on' "$1"; }
# by_node: "NODE RANK" lines on stdin as "node: rank rank | node: rank ...".
by_node() {
  sort -k1,1 -k2,2n |
    awk '$1 != n { if (n != "") printf " | "; printf "%s:", $1; n = $1 } { printf " %s", $2 } END { print "" }'
}

cluster_test_needs() {
  [ "$(id -u)" -eq 0 ] ||
    fail "this test creates network namespaces, veths and a bridge and starts munged, slurmctld and slurmd: it needs root"
  local tool
  for tool in ip unshare nsenter "$@"; do command -v "$tool" >/dev/null || fail "$tool is missing"; done
  if [ ! -x /usr/sbin/slurmctld ] || [ ! -x /usr/sbin/slurmd ] || [ ! -x /usr/sbin/munged ]; then
    echo "installing slurm-wlm and munge"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends slurm-wlm munge >/dev/null ||
      fail "slurm-wlm and munge are not installed and could not be installed"
  fi
}

cluster_test_teardown() {
  set +e
  if declare -F cluster_test_cleanup >/dev/null; then cluster_test_cleanup; fi
  "$cluster" down "$tmp/c" >/dev/null 2>&1
  if [ -n "${H5DCP_KEEP_SLURM_DIR:-}" ]; then echo "kept $tmp"; else rm -rf "$tmp"; fi
}

cluster_test_up() {
  tmp=$(mktemp -d "/tmp/h5dcp-cluster-$1.XXXXXX")
  trap cluster_test_teardown EXIT
  trap 'fail "interrupted"' INT TERM
  H5DCP_CLUSTER_LIFETIME=$(($(left) + 60)) H5DCP_CLUSTER_WAIT=$(left) "$cluster" up "$tmp/c" ||
    fail "cluster.sh up failed (at $(elapsed))"
  eval "$("$cluster" env "$tmp/c")"
  id=$H5DCP_CLUSTER_ID
  shared=$tmp/c/shared
  echo "up at $(elapsed)"
}

cluster_test_down() {
  cd /
  "$cluster" down "$tmp/c" >/dev/null || fail "cluster.sh down failed"
  if ip netns list | grep -q "^$id-"; then fail "cluster.sh down left namespaces of $id"; fi
  echo "PASS in $(elapsed)"
}

training_test_needs() {
  repo=$(cd "$1" && pwd)
  build=$(cd "$2" && pwd)
  reference=$3
  cluster_test_needs mpiexec
  [ -x "$build/apps/h5dcp-train" ] || fail "$build/apps/h5dcp-train is missing (build the h5dcp-train target)"
  [ -s "$reference" ] || fail "$reference is missing (the train.reference test writes it)"
  if [ -n "${4:-}" ]; then
    [ -x "$4" ] || fail "$4 is missing (build the h5dcp-cli target)"
    cli=$(cd "$(dirname "$4")" && pwd)/$(basename "$4")
  fi
}

# The jobs' environment (sbatch --export=ALL): the test machine's OpenMPI
# settings (root; more ranks than its 2 cores: yield when idle), exported once
# the cluster is up, so that its daemons do not inherit them. Nothing about
# nodes: inside a node the only interface besides lo is eth0; train.sbatch
# sets OMPI_MCA_io=romio321 itself.
training_test_up() {
  cluster_test_up "$1"
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
}

published() {
  find "$ckpt" -maxdepth 1 -name 'step-*.h5' -printf '%f\n' | sed -n 's/^step-0*\([0-9][0-9]*\)\.h5$/\1/p' | sort -n |
    tr '\n' ' '
}

nodes_of() {
  start_lines "$1" "$2" | sed -n 's/^h5dcp-train: rank \([0-9]*\) (node \([^,]*\),.*/\1:\2/p' | sort -n | tr '\n' ' '
}

# Retried by wait_for until each node reads DOWN: on 2 cores slurmctld's reply
# can miss scontrol's MessageTimeout (10 s) while the update itself is done or
# still to come (a CI run once failed 10 s after a kill), and setting DOWN
# twice is harmless. scontrol's words are in $tmp/down.out.
set_down() {
  local n
  for n in "$@"; do
    scontrol update nodename="$n" state=DOWN reason="h5dcp ${0##*/}" >"$tmp/down.out" 2>&1 ||
      grep -q 'State=DOWN' <<<"$(scontrol show node "$n" 2>/dev/null)" || return 1
  done
}

all_idle() { [ "$(sinfo -h -N -t idle -o %N | sort -u | wc -l)" -eq 3 ]; }
