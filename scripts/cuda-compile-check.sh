#!/usr/bin/env bash
# Compiles every source and header that has CUDA code (an HPCRL_TORCH_CUDA block, NCCL, a CUDA
# device or a CUDA header of LibTorch; every .cu file with nvcc) or a LibTorch 2.x block against a CUDA LibTorch's headers,
# with HPCRL_TORCH_CUDA=1 and HPCRL_WITH_NCCL=1, on a machine without a GPU or a CUDA LibTorch:
# syntax and types only (g++ -fsyntax-only; nvcc -c into a scratch folder), nothing links. A CPU
# build never compiles these blocks, so this is what keeps them compiling between GPU runs.
#   scripts/cuda-compile-check.sh [-jN] [FILE...]     (FILE...: just these, instead of every file with CUDA code)
# Needs:
#   HPCRL_TORCH_CUDA_HEADERS  a CUDA LibTorch's headers: its folder (holding include/) or a .tar.xz of
#                             include/ (no default: a clone carries none; CI's .ci/run passes its copy)
#   CUDA_HOME                 the CUDA toolkit (default /usr/local/cuda): cuda_runtime.h, nccl.h
#                             (or NCCL_INCLUDE_DIR), nvcc for .cu files
# Missing either: under CI=true a failure (exit 1); elsewhere it says it skipped (exit 0).
# Exit 1 when a file does not compile (its errors are printed).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=2
only=()
for a in "$@"; do
  case $a in
    -j*) jobs=${a#-j} ;;
    -*) echo "usage: scripts/cuda-compile-check.sh [-jN] [FILE...]" >&2; exit 2 ;;
    *) only+=("$a") ;;
  esac
done
headers=${HPCRL_TORCH_CUDA_HEADERS:-}
cuda=${CUDA_HOME:-/usr/local/cuda}
nccl_inc=${NCCL_INCLUDE_DIR:-$cuda/include}

missing() {
  if [ "${CI:-}" = true ]; then
    echo "cuda-compile-check: FAILED: $1 (CI must compile the CUDA code)" >&2
    exit 1
  fi
  echo "cuda-compile-check: skipped: $1"
  exit 0
}
[ -n "$headers" ] || missing "no CUDA LibTorch headers (set HPCRL_TORCH_CUDA_HEADERS to a CUDA LibTorch folder or a .tar.xz of its include/)"
[ -e "$headers" ] || missing "HPCRL_TORCH_CUDA_HEADERS=$headers does not exist"
[ -f "$cuda/include/cuda_runtime.h" ] || missing "no CUDA toolkit at $cuda (set CUDA_HOME)"
[ -f "$nccl_inc/nccl.h" ] || missing "no nccl.h in $nccl_inc (set NCCL_INCLUDE_DIR)"

scratch=$(mktemp -d "${TMPDIR:-/tmp}/hpcrl-cuda-check.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
if [ -d "$headers" ]; then
  torch=$headers
else
  mkdir -p "$scratch/libtorch"
  tar -xJf "$headers" -C "$scratch/libtorch" include
  torch=$scratch/libtorch
fi
[ -f "$torch/include/torch/csrc/api/include/torch/torch.h" ] ||
  missing "$headers holds no include/torch/csrc/api/include/torch/torch.h"
torch_version=$(cat "$torch"/include/torch/headeronly/version.h "$torch"/include/torch/csrc/api/include/torch/version.h \
                  2>/dev/null | awk '/define TORCH_VERSION_(MAJOR|MINOR|PATCH) / {v = v (v == "" ? "" : ".") $3} END {print v}')

# The CUDA LibTorch ships a newer {fmt} than the one spdlog was built with: the system's comes first
# (as cmake/Dependencies.cmake does for a pip LibTorch), through a folder holding only a link to it.
mkdir -p "$scratch/fmt-shim"
fmt_dir=$(echo '#include <fmt/core.h>' | g++ -std=c++17 -x c++ -E -M - 2>/dev/null | tr ' \\' '\n\n' |
          grep '/fmt/core.h$' | head -1 | xargs -r dirname) || true
[ -n "$fmt_dir" ] && ln -s "$fmt_dir" "$scratch/fmt-shim/fmt"
flags=(-std=c++17 -Werror=switch -D_GLIBCXX_USE_CXX11_ABI=1 -DHPCRL_TORCH_CUDA=1 -DHPCRL_WITH_NCCL=1
       -DSPDLOG_COMPILED_LIB -DSPDLOG_FMT_EXTERNAL -DSPDLOG_SHARED_LIB -DFMT_SHARED
       "-DHPCRL_BINARY=\"hpcrl\"" "-DHPCRL_DATA_DIR=\"data\"" "-DHPCRL_SOURCE_DIR=\".\""
       -Iinclude -Isrc -Itests -Ibenchmarks
       -isystem "$scratch/fmt-shim" -isystem "$torch/include" -isystem "$torch/include/torch/csrc/api/include"
       -isystem "$cuda/include" -isystem "$nccl_inc")
if command -v mpicxx >/dev/null; then
  for d in $(mpicxx --showme:incdirs); do flags+=(-isystem "$d"); done
fi

# The files with CUDA code: a HPCRL_TORCH_CUDA block, NCCL, a CUDA device or stream, a CUDA header;
# and those with a LibTorch 2.x block (TORCH_VERSION_MAJOR/MINOR), which the CPU build's 1.13 never compiles.
pattern='TORCH_VERSION_M(AJOR|INOR)|HPCRL_TORCH_CUDA\b|HPCRL_WITH_NCCL|kCUDA|c10::cuda|at::cuda|torch::cuda|cuda_runtime|<nccl\.h>|#[[:space:]]*include[[:space:]]*<(c10|ATen|torch)/[^>]*cuda'
mapfile -t files < <(grep -rlE "$pattern" --include='*.cpp' --include='*.h' src include tests benchmarks | sort)
mapfile -t cu_files < <(find src include tests benchmarks -name '*.cu' | sort)
# A header is compiled through a listed source that includes it; on its own only when none does.
sources=()
for f in "${files[@]}"; do [[ $f == *.cpp ]] && sources+=("$f"); done
own=()
for f in "${files[@]}"; do
  if [[ $f == *.h ]]; then
    name=${f#include/}
    name=${name#src/}
    grep -qF "\"$name\"" "${sources[@]}" && continue
  fi
  own+=("$f")
done
files=("${own[@]}")
if [ ${#only[@]} -gt 0 ]; then
  files=("${only[@]}")
  cu_files=()
fi
if [ "${#cu_files[@]}" -gt 0 ] && ! [ -x "$cuda/bin/nvcc" ]; then
  missing "${#cu_files[@]} .cu files and no nvcc in $cuda/bin"
fi
echo "cuda-compile-check: ${#files[@]} C++ files and ${#cu_files[@]} .cu files against LibTorch $torch_version" \
     "headers and CUDA at $cuda, $jobs at a time"

compile_one() {  # FILE: compiles it into $scratch/logs; prints one line; lists it in $scratch/failed if it fails
  local f=$1 log t0 rc=0
  log=$scratch/logs/${f//\//_}.log
  t0=$(date +%s.%N)
  case $f in
    *.cu) "$cuda/bin/nvcc" -std=c++17 "${flags[@]}" -c "$f" -o "$scratch/logs/${f//\//_}.o" > "$log" 2>&1 || rc=$? ;;
    *.h) g++ "${flags[@]}" -fsyntax-only -x c++ "$f" > "$log" 2>&1 || rc=$? ;;
    *) g++ "${flags[@]}" -fsyntax-only "$f" > "$log" 2>&1 || rc=$? ;;
  esac
  [ $rc = 0 ] || echo "$f" >> "$scratch/failed"
  printf '  %-7s %5.1f s  %s\n' "$([ $rc = 0 ] && echo ok || echo FAILED)" \
    "$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {print b - a}')" "$f"
}
export -f compile_one
export scratch cuda
mkdir -p "$scratch/logs"
# Arrays do not cross `export`: the flags go over through a file.
printf '%s\0' "${flags[@]}" > "$scratch/flags"
started=$SECONDS
printf '%s\0' "${files[@]}" "${cu_files[@]}" |
  xargs -0 -n1 -P"$jobs" bash -c 'mapfile -d "" -t flags < "$scratch/flags"; compile_one "$0"'
if [ -s "$scratch/failed" ]; then
  while read -r f; do
    echo "== $f"
    grep -E -m 20 -A3 'error' "$scratch/logs/${f//\//_}.log"
  done < "$scratch/failed"
  echo "cuda-compile-check: FAILED: $(wc -l < "$scratch/failed") file(s) do not compile against LibTorch $torch_version" >&2
  exit 1
fi
echo "cuda-compile-check: all $(( ${#files[@]} + ${#cu_files[@]} )) files compile ($((SECONDS - started)) s)"
