#!/usr/bin/env bash
# Configures and builds hpcrl into build/ (RelWithDebInfo, with ccache when present).
#   scripts/build.sh [--target NAME]... [CMAKE_CONFIGURE_ARGS...]
# --target builds only NAME (e.g. hpcrl, the executable); without it, everything
# (every test and benchmark). Other arguments go to cmake's configure step,
# e.g. -DCMAKE_PREFIX_PATH=... for a CUDA LibTorch.
set -euo pipefail
cd "$(dirname "$0")/.."
targets=()
configure_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --target) targets+=(--target "${2:?--target needs a name}"); shift 2 ;;
    *) configure_args+=("$1"); shift ;;
  esac
done
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
[ -f build/CMakeCache.txt ] && generator=()
cmake -S . -B build "${generator[@]}" "${configure_args[@]}"
cmake --build build -j"$(OMP_NUM_THREADS= OMP_THREAD_LIMIT= nproc)" "${targets[@]}"  # nproc obeys OMP_NUM_THREADS
