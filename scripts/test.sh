#!/usr/bin/env bash
# The README's test command: install the Debian packages, build everything
# (library, hpcrl, every test and benchmark), run every test (unit, multi-rank
# under mpirun, end-to-end) through CTest. Extra arguments go to ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$SECONDS
# Cores, counted before OMP_NUM_THREADS=1 is exported below: nproc obeys that variable, and
# counted after it CTest ran one test at a time (a CI test phase of 1430 s instead of ~900).
cores=$(OMP_NUM_THREADS= OMP_THREAD_LIMIT= nproc)
echo "== test [1/5] Debian packages (scripts/install-deps.sh)"
bash scripts/install-deps.sh
echo "== test [2/5] build everything into build/: ~35–45 min on 2 cores with a cold ccache"
bash scripts/build.sh
echo "   (built at $((SECONDS - started)) s)"
echo "== test [3/5] CUDA code against a CUDA LibTorch's headers, no GPU (scripts/cuda-compile-check.sh): ~2 min on 2 cores"
bash scripts/cuda-compile-check.sh -j"$cores"
echo "   (CUDA compile check done at $((SECONDS - started)) s)"
echo "== test [4/5] every test through CTest, $cores at a time (a multi-rank test takes as many slots as ranks): ~15 min on 2 cores"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 OMPI_MCA_mpi_yield_when_idle=1
ctest --test-dir build --output-on-failure --timeout 600 -j"$cores" "$@"
echo "   (tests done at $((SECONDS - started)) s)"
echo "== test [5/5] fuzz targets: regression inputs, then 20,000 fuzzed inputs each from a fixed seed (scripts/fuzz.sh)"
bash scripts/fuzz.sh --runs 20000
echo "== test done in $((SECONDS - started)) s"
