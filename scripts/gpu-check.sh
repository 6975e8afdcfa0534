#!/usr/bin/env bash
# GPU checks on a node with one or more GPUs: builds hpcrl against the CUDA
# LibTorch of python3's PyTorch (or $HPCRL_TORCH_PREFIX), then runs
#   1. the NCCL communicator against the MPI results (test_dist_nccl),
#   2. the device end-to-end runs (run.device: cuda in fp32 and bf16, against the CPU run),
#   3. every other test under this LibTorch (the CPU paths of a CUDA build).
# The GPU targets are built first so their results come even if the rest is slow.
# Usage: scripts/gpu-check.sh [BUILD_DIR]   (extra CMake flags in $HPCRL_CMAKE_ARGS)
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-cuda}
prefix=${HPCRL_TORCH_PREFIX:-$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')}
jobs=$(OMP_NUM_THREADS= OMP_THREAD_LIMIT= nproc)  # nproc obeys OMP_NUM_THREADS
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 OMPI_MCA_mpi_yield_when_idle=1
# shellcheck disable=SC2086
cmake -S . -B "$build" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" -DHPCRL_BUILD_BENCHMARKS=OFF \
  -DHPCRL_ASAN_PARSERS=OFF ${HPCRL_CMAKE_ARGS:-} || exit 2
status=0
echo "== build (GPU targets)"
gpu_targets="hpcrl test_e2e"
grep -q '^test_dist_nccl:' <(ninja -C "$build" -t targets all 2>/dev/null | sed 's/ .*//') && gpu_targets+=" test_dist_nccl"
# shellcheck disable=SC2086
cmake --build "$build" -j"$jobs" --target $gpu_targets -- -k 0 || status=1
echo "== NCCL communicator"
ctest --test-dir "$build" -L gpu --output-on-failure || status=1
echo "== device end-to-end"
"$build"/tests/e2e/test_e2e --gtest_filter="DeviceE2E.*" || status=1
echo "== build (everything, keep going past errors)"
cmake --build "$build" -j"$jobs" -- -k 0 || status=1
echo "== every other test"
ctest --test-dir "$build" -LE gpu -E 'DeviceE2E' -j"$jobs" --timeout 300 --output-on-failure || status=1
exit "$status"
