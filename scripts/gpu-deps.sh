#!/usr/bin/env bash
# Fetches, here, the Debian 12 packages that scripts/gpu-check.sh needs on a
# lent GPU machine, which has the CUDA toolkit and a CUDA PyTorch (its
# LibTorch) but no MPI, no parallel HDF5 and no network: OpenMPI, parallel
# HDF5, the libraries they load, and the build's header-only and test
# libraries. They land in ${H5DCP_GPU_DEPS:-.gpu-deps} (ignored by git; about
# 21 MB) as .deb files, which gpu-check.sh unpacks outside / there. Idempotent:
# a package already fetched is not fetched again.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${H5DCP_GPU_DEPS:-.gpu-deps}
packages=(
  # OpenMPI and what its libraries and components load
  openmpi-bin openmpi-common libopenmpi3 libopenmpi-dev libpmix2
  libevent-core-2.1-7 libevent-pthreads-2.1-7 libhwloc15 libfabric1 libucx0
  libibverbs1 librdmacm1 libnl-3-200 libnl-route-3-200 libpsm2-2
  libpsm-infinipath1 libmunge2 libnuma1 libpciaccess0 libltdl7
  # parallel HDF5 (and the serial one h5dump links) and what they load
  libhdf5-openmpi-103-1 libhdf5-openmpi-dev hdf5-tools libhdf5-103-1 libaec0 libsz2
  libcurl4 libnghttp2-14 librtmp1 libssh2-1 libpsl5 libssl3 libgssapi-krb5-2
  libldap-2.5-0 libkrb5-3 libk5crypto3 libkrb5support0 libsasl2-2 libbrotli1
  libgnutls30 libhogweed6 libnettle8 libidn2-0 libunistring2 libp11-kit0
  libtasn1-6 libffi8 libkeyutils1 libcom-err2 libgmp10 libzstd1
  # the build's other libraries
  libgtest-dev libxxhash-dev libxxhash0 libcli11-dev nlohmann-json3-dev
)
mkdir -p "$dir"
missing=()
for p in "${packages[@]}"; do
  compgen -G "$dir/${p}_*.deb" >/dev/null || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
# apt-get download needs current package lists (and works without root).
if ! (cd "$dir" && apt-get download "${missing[@]}" >/dev/null 2>&1); then
  apt-get update -qq
  (cd "$dir" && apt-get download "${missing[@]}" >/dev/null)
fi
echo "gpu-deps.sh: ${#missing[@]} packages fetched into $dir ($(du -sh "$dir" | cut -f1))"
