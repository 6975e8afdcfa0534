#!/usr/bin/env bash
# Downloads the Debian 12 packages a bare GPU machine lacks to build and run hpcrl (Open MPI 4.1.4
# and its runtime libraries, yaml-cpp, spdlog + {fmt}, CLI11, nlohmann-json, PCRE2, utf8proc,
# GiNaC + CLN, GoogleTest, pkgconf) into .gpu-bundle/ (ignored by git), for scripts/gpu-check.sh
# to unpack there. Run it on a Debian 12 machine with a package registry (no root needed when
# `apt-get update` has been run). The GPU machine has python3 with a CUDA PyTorch wheel, g++,
# cmake, ninja and the CUDA toolkit, and no registry: the bundle travels with the tree.
#   scripts/gpu-bundle.sh [DIR]        (default .gpu-bundle; must stay under the 64 MiB carry limit)
# The list is the 47 packages measured on an H200 machine on 2026-12-04: the -dev packages of
# hpcrl's dependencies plus the shared libraries they load that such a machine's image does not
# ship (the image has libc, libstdc++, zlib, OpenSSL, perl and the compiler).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-.gpu-bundle}
limit=$((64 * 1024 * 1024))
packages=(
  libopenmpi-dev libopenmpi3 openmpi-bin openmpi-common libpmix2 libhwloc15 libevent-core-2.1-7
  libevent-pthreads-2.1-7 libfabric1 libucx0 libibverbs1 ibverbs-providers librdmacm1 libpsm-infinipath1
  libpsm2-2 libnl-3-200 libnl-route-3-200 libnuma1 libmunge2 libudev1 libuuid1 libatomic1
  libyaml-cpp-dev libyaml-cpp0.7 libspdlog-dev libspdlog1.10 libfmt-dev libfmt9 libcli11-dev nlohmann-json3-dev
  libpcre2-dev libpcre2-8-0 libpcre2-16-0 libpcre2-32-0 libpcre2-posix3 libutf8proc-dev libutf8proc2
  libginac-dev libginac11 libcln-dev libcln6 libgmp10 libgtest-dev pkg-config pkgconf pkgconf-bin libpkgconf3
)
if ! command -v apt-get >/dev/null || ! grep -q 'VERSION_CODENAME=bookworm' /etc/os-release 2>/dev/null; then
  echo "gpu-bundle: needs apt-get on Debian 12 (bookworm): the bundle holds Debian 12 packages" >&2
  exit 2
fi
mkdir -p "$dir"
rm -f "$dir"/*.deb "$dir/MANIFEST"
echo "== downloading ${#packages[@]} packages into $dir"
(cd "$dir" && apt-get download -q "${packages[@]}") || {
  echo "gpu-bundle: apt-get download failed; run 'apt-get update' first" >&2
  exit 1
}
n=$(find "$dir" -maxdepth 1 -name '*.deb' | wc -l)
if [ "$n" -ne "${#packages[@]}" ]; then
  echo "gpu-bundle: $n .deb files for ${#packages[@]} packages" >&2
  exit 1
fi
(cd "$dir" && sha256sum -- *.deb) > "$dir/MANIFEST"
bytes=$(du -cb "$dir" | tail -1 | cut -f1)
echo "== $dir: $n packages, $bytes bytes ($(awk -v b="$bytes" 'BEGIN {printf "%.1f", b / 1048576}') MiB; the carry limit is 64 MiB)"
if [ "$bytes" -ge "$limit" ]; then
  echo "gpu-bundle: $dir is larger than the 64 MiB a device call can carry" >&2
  exit 1
fi
