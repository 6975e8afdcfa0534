#!/usr/bin/env bash
# GPU checks on a node with one or more GPUs: builds hpcrl against the CUDA
# LibTorch of python3's PyTorch (or $HPCRL_TORCH_PREFIX), then runs
#   1. the NCCL communicator against the MPI results (test_dist_nccl),
#   2. the device end-to-end runs (run.device: cuda in fp32 and bf16, against the CPU run),
#   3. every other test under this LibTorch (CPU paths of a CUDA build).
# Usage: scripts/gpu-check.sh [BUILD_DIR]   (extra CMake flags in $HPCRL_CMAKE_ARGS)
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-cuda}
prefix=${HPCRL_TORCH_PREFIX:-$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 OMPI_MCA_mpi_yield_when_idle=1
# shellcheck disable=SC2086
cmake -S . -B "$build" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" -DHPCRL_BUILD_BENCHMARKS=OFF \
  -DHPCRL_ASAN_PARSERS=OFF ${HPCRL_CMAKE_ARGS:-} || exit 2
# Keep going past a failing file so one pass shows every compile error.
cmake --build "$build" -j"$(nproc)" -- -k 0
built=$?
status=0
echo "== NCCL communicator"
ctest --test-dir "$build" -L gpu --output-on-failure || status=1
echo "== device end-to-end"
"$build"/tests/e2e/test_e2e --gtest_filter='DeviceE2E.*' || status=1
echo "== every other test"
ctest --test-dir "$build" -LE gpu -E 'DeviceE2E' -j"$(nproc)" --timeout 600 --output-on-failure || status=1
[ "$built" -eq 0 ] || status=1
exit "$status"
