#!/usr/bin/env bash
# Issue 20's checks on a machine with a real GPU, in one call (the lent GPU
# machine of the device tool: the CUDA toolkit, python3 with a CUDA PyTorch
# and its LibTorch, no MPI, no parallel HDF5, no network):
#   1. unpacks the Debian 12 packages of scripts/gpu-deps.sh (carried in
#      ${H5DCP_GPU_DEPS:-.gpu-deps}) outside /, into $deps; libraries the
#      machine lacks are reached through $deps/fallback only, so the
#      machine's own (e.g. its OpenSSL) stay the ones every program loads;
#   2. builds h5dcp there against python3's LibTorch (H5DCP_CUDA=ON) and the
#      carried OpenMPI and parallel HDF5, in ${H5DCP_GPU_BUILD_DIR:-build-gpu};
#   3. runs the tests on the GPU: the GPU tests (CUDA tensors end to end, at
#      1-4 ranks sharing the GPU), the unit, single-process, utility and core
#      MPI tests, and h5dcp-train's resume tests (training on the GPU);
#   4. with `bench` in H5DCP_GPU_STEPS, h5dcp-bench --device cuda against
#      PyTorch's DCP on the same GPU (bench/dcp_peer_bench.py --device cuda).
# H5DCP_GPU_STEPS (default "build test") chooses the steps after unpacking
# ("configure": only configure, to check the paths on a machine without a GPU).
# Logs and results go to $OUT (the device tool's) or ${H5DCP_GPU_OUT:-gpu-out}.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
steps=" ${H5DCP_GPU_STEPS:-build test} "
out=${OUT:-${H5DCP_GPU_OUT:-gpu-out}}
mkdir -p "$out"
carried=${H5DCP_GPU_DEPS:-.gpu-deps}
deps=${H5DCP_GPU_PREFIX:-/tmp/h5dcp-gpu-deps}
build_dir=${H5DCP_GPU_BUILD_DIR:-build-gpu}
python=${H5DCP_GPU_PYTHON:-python3}
say() { echo "gpu-check.sh [$(( $(date +%s) - start )) s]: $*"; }

say "the machine"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || say "no nvidia-smi"
"$python" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "devices", torch.cuda.device_count(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")'
echo "cores $(nproc); $(g++ --version | head -1); $(cmake --version | head -1)"

# 1. The carried packages, unpacked outside /.
if [ ! -d "$carried" ] || ! compgen -G "$carried/*.deb" >/dev/null; then
  echo "gpu-check.sh: no packages in $carried: run scripts/gpu-deps.sh here first and carry $carried" >&2
  exit 1
fi
rm -rf "$deps"
mkdir -p "$deps/fallback" "$deps/bin"
for f in "$carried"/*.deb; do dpkg -x "$f" "$deps"; done
usr=$deps/usr
arch=x86_64-linux-gnu
# Only what the machine lacks (by soname) goes on the library path.
known=$(ldconfig -p | awk '{print $1}')
for lib in "$usr/lib/$arch"/*.so.* "$deps/lib/$arch"/*.so.*; do
  [ -e "$lib" ] || continue
  name=$(basename "$lib")
  grep -qxF "$name" <<<"$known" || ln -sf "$lib" "$deps/fallback/$name"
done
# Debian's alternatives (mpicc -> mpicc.openmpi, ...) are made by its
# installer, not held in the packages; h5pcc names its prefix literally, and
# the libraries a static libhdf5 would need, whose unversioned links (-dev
# packages) the machine lacks: the shared libhdf5 names its own.
for tool in mpicc mpicxx mpiexec mpirun ompi_info; do ln -sf "$usr/bin/$tool.openmpi" "$deps/bin/$tool" 2>/dev/null || true; done
ln -sf "$usr/bin/orterun" "$deps/bin/mpiexec"
sed -i -e "s|^prefix=\"/usr\"|prefix=\"$usr\"|" -e 's|^H5BLD_LIBS=.*|H5BLD_LIBS="-ldl -lm"|' "$usr/bin/h5pcc.openmpi"
ln -sf "$usr/bin/h5pcc.openmpi" "$deps/bin/h5pcc"
export OPAL_PREFIX=$usr HDF5_USE_SHLIB=yes
export PMIX_INSTALL_PREFIX=$usr/lib/$arch/pmix2
export PATH=$deps/bin:$usr/bin:$PATH
export LD_LIBRARY_PATH=$usr/lib/$arch/openmpi/lib:$usr/lib/$arch/pmix2/lib:$usr/lib/$arch/hdf5/openmpi:$deps/fallback${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# Shared memory between the ranks on the one machine; no network fabrics.
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# PMIx warns of compression components it cannot load: noise here.
export PMIX_MCA_pcompress_base_silence_warning=1 PMIX_MCA_mca_base_component_show_load_errors=0
mpiexec -n 2 hostname >"$out/mpiexec-smoke.log" 2>&1 || { cat "$out/mpiexec-smoke.log"; echo "gpu-check.sh: the carried mpiexec does not run" >&2; exit 1; }
say "OpenMPI $(ompi_info --parsable --version 2>/dev/null | head -1) and HDF5 unpacked into $deps"

# 2. The build ("configure" alone only configures: a check of the paths).
if [[ $steps == *" build "* || $steps == *" configure "* ]]; then
  generator=()
  if [ ! -f "$build_dir/CMakeCache.txt" ] && command -v ninja >/dev/null; then generator=(-G Ninja); fi
  cmake -S . -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DH5DCP_CUDA=ON \
    -DH5DCP_PYTHON="$(command -v "$python")" -DCMAKE_PREFIX_PATH="$usr" \
    -DMPI_C_COMPILER="$usr/bin/mpicc.openmpi" -DMPI_CXX_COMPILER="$usr/bin/mpicxx.openmpi" \
    -DMPIEXEC_EXECUTABLE="$deps/bin/mpiexec" -DHDF5_C_COMPILER_EXECUTABLE="$usr/bin/h5pcc.openmpi" \
    >"$out/configure.log" 2>&1 || { tail -40 "$out/configure.log"; exit 1; }
  grep -E "h5dcp: (LibTorch|CUDA)|Found (MPI|HDF5)" "$out/configure.log" || true
fi
if [[ $steps == *" build "* ]]; then
  # H5DCP_GPU_TARGETS: other targets (default: what the tests and the benchmark need).
  targets=${H5DCP_GPU_TARGETS:-h5dcp h5dcp_unit_tests h5dcp_single_process_tests h5dcp_utils_tests h5dcp_mpi_tests
    h5dcp_gpu_tests h5dcp-train h5dcp-gpu-bench}
  # shellcheck disable=SC2086
  cmake --build "$build_dir" --parallel "$(nproc)" --target $targets >"$out/build.log" 2>&1 ||
    { grep -B2 -A12 -E "error|FAILED" "$out/build.log" | head -80; exit 1; }
  say "built in $build_dir"
fi

# 3. The tests, on the GPU.
if [[ $steps == *" test "* ]]; then
  status=0
  # The GPU tests fail rather than skip without a GPU; h5dcp-train must train on it.
  (cd "$build_dir" && H5DCP_REQUIRE_GPU=1 H5DCP_TRAIN_DEVICE=cuda ctest --output-on-failure --timeout 300 --parallel 4 \
    -R '^(mpi\.gpu\..*|unit|single_process|utils|mpi\.core\.np2|train\.reference|train\.resume\..*)$') \
    >"$out/ctest.log" 2>&1 || status=$?
  # The summary bench/gpu_report.py puts beside the benchmark's table.
  grep -E "^ *[0-9]+/[0-9]+ Test|tests passed" "$out/ctest.log" >"$out/tests.txt" || true
  grep -E "^ *[0-9]+/[0-9]+ Test|tests passed|Failed|\*\*\*" "$out/ctest.log" | tail -60
  # The GPU tests again with CUDA_VISIBLE_DEVICES naming the GPU (as
  # schedulers set it): the rank -> GPU mapping, and everything on it.
  (cd "$build_dir" && H5DCP_REQUIRE_GPU=1 CUDA_VISIBLE_DEVICES=0 ctest --output-on-failure --timeout 300 \
    --parallel 4 -R '^mpi\.gpu\.np[24]$') >"$out/ctest-visible.log" 2>&1 || status=$?
  sed -e 's/ Test  *#[0-9]*: \(mpi\.gpu\.np[24]\)/ Test: \1 (CUDA_VISIBLE_DEVICES=0)/' \
    <(grep -E "^ *[0-9]+/[0-9]+ Test" "$out/ctest-visible.log") >>"$out/tests.txt" || true
  grep -E "^ *[0-9]+/[0-9]+ Test|Failed|\*\*\*" "$out/ctest-visible.log" | tail -10
  [ $status -eq 0 ] || { say "tests failed"; exit $status; }
  say "tests passed"
fi

# With `run` in H5DCP_GPU_STEPS: the command H5DCP_GPU_RUN in this
# environment (the carried MPI on the paths), e.g. one test under cuda-gdb.
if [[ $steps == *" run "* ]]; then
  bash -c "${H5DCP_GPU_RUN:?run needs H5DCP_GPU_RUN}" || say "H5DCP_GPU_RUN exited $?"
fi

# 4. The benchmark against PyTorch's DCP, same GPU, same data, same run.
if [[ $steps == *" bench "* ]]; then
  H5DCP_BUILD_DIR=$build_dir H5DCP_BENCH_PYTHON=$python scripts/gpu-bench.sh "$out"
fi
say "done"
