#!/usr/bin/env bash
# The README's test command: install deps, build, run every test (unit,
# multi-rank under mpirun, end-to-end) through CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 OMPI_MCA_mpi_yield_when_idle=1
ctest --test-dir build --output-on-failure --timeout 600 "$@"
