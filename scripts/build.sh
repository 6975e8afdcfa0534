#!/usr/bin/env bash
# Configures and builds hpcrl into build/ (Release-ish, with ccache when present).
# Extra arguments go to cmake's configure step, e.g. -DCMAKE_PREFIX_PATH=... for a CUDA LibTorch.
set -euo pipefail
cd "$(dirname "$0")/.."
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
[ -f build/CMakeCache.txt ] && generator=()
cmake -S . -B build "${generator[@]}" "$@"
cmake --build build -j"$(nproc)"
