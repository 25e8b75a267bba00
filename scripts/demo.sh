#!/usr/bin/env bash
# README command 1: installs what is missing, builds, and runs the main job:
# 4 MPI ranks save a sharded state dict into one HDF5 file, load it back
# with another sharding, check every value, and show the file.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
build_dir=${H5DCP_BUILD_DIR:-build}
out=${H5DCP_DEMO_OUT:-$build_dir/demo/example.h5}
mkdir -p "$(dirname "$out")"

# ROMIO, not OMPIO (open-mpi/ompi#12718); 4 ranks on fewer cores; root in containers.
export OMPI_MCA_io=${OMPI_MCA_io:-romio321}
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_mpi_yield_when_idle=1
if [ "$(id -u)" -eq 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi

mpiexec -n 4 "$build_dir/apps/h5dcp-example" --out "$out"
echo
echo "The checkpoint, as any HDF5 tool sees it (h5ls -r):"
h5ls -r "$out"
