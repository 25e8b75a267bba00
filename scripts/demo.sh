#!/usr/bin/env bash
# README command 1: installs what is missing, builds, and runs the main job,
# h5dcp-train (data-parallel training that checkpoints with h5dcp):
#   1. 4 MPI ranks train; after step 12 every rank is SIGKILLed (a simulated
#      node loss), with checkpoints of steps 5 and 10 complete;
#   2. 2 ranks resume from the newest complete checkpoint (h5dcp reshards the
#      optimizer state saved by 4 ranks) and train to step 20;
#   3. an uninterrupted 4-rank run trains to step 20 for comparison;
#   4. every loss is compared, bit for bit (they are printed as hex floats);
#   5. the last checkpoint is shown with `h5dcp inspect` (h5ls without it).
# Exits non-zero when any loss differs.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
build_dir=${H5DCP_BUILD_DIR:-build}
demo=${H5DCP_DEMO_DIR:-$build_dir/demo}
rm -rf "$demo"
mkdir -p "$demo"

# ROMIO, not OMPIO (open-mpi/ompi#12718); 4 ranks on fewer cores; root in containers.
export OMPI_MCA_io=${OMPI_MCA_io:-romio321}
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_mpi_yield_when_idle=1
if [ "$(id -u)" -eq 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi

steps=20
train() {
  local ranks=$1
  shift
  mpiexec -n "$ranks" "$build_dir/apps/h5dcp-train" --steps "$steps" --checkpoint-every 5 "$@"
}
section() { printf '\n== %s\n' "$*"; }

section "1. Training on 4 ranks; every rank gets SIGKILL after step 12"
set +e
train 4 --checkpoint-dir "$demo/checkpoints" --crash-after-step 12 2>&1 | tee "$demo/killed.log"
set -e
echo "The checkpoint directory after the crash (latest = the newest checkpoint published):"
ls -l "$demo/checkpoints"
echo "latest -> $(cat "$demo/checkpoints/latest")"

section "2. Resuming on 2 ranks from the newest complete checkpoint"
train 2 --checkpoint-dir "$demo/checkpoints" --resume | tee "$demo/resumed.log"

section "3. The same training on 4 ranks, never interrupted"
train 4 --checkpoint-dir "$demo/uninterrupted" | tee "$demo/uninterrupted.log"

section "4. The losses, side by side"
awk -v steps="$steps" '
  FNR == 1 { file++ }
  /^step / { loss[file, $2] = $4 }
  END {
    printf "%5s  %-18s %-18s %-18s\n", "step", "4 ranks, killed", "2 ranks, resumed", "4 ranks, whole run"
    bad = 0
    for (s = 1; s <= steps; s++) {
      a = loss[1, s]; b = loss[2, s]; c = loss[3, s]
      ok = ((a == "" || a == c) && (b == "" || b == c) && (a != "" || b != "") && c != "")
      if (!ok) bad++
      printf "%5d  %-18s %-18s %-18s %s\n", s, a == "" ? "-" : a, b == "" ? "-" : b, c, ok ? "equal" : "DIFFERENT"
    }
    if (bad) { printf "%d steps differ\n", bad; exit 1 }
    printf "All %d losses of the killed-and-resumed run (4 ranks, then 2) equal the uninterrupted run bit for bit.\n", steps
  }' "$demo/killed.log" "$demo/resumed.log" "$demo/uninterrupted.log"

last=$demo/checkpoints/step-$(printf '%08d' "$steps").h5
section "5. The last checkpoint: $last"
if [ -x "$build_dir/apps/h5dcp" ]; then
  "$build_dir/apps/h5dcp" inspect "$last"
else
  h5ls -r "$last"
fi
echo
echo "Also readable by any HDF5 tool: h5ls -r $last; h5dump -H $last"
