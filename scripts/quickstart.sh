#!/usr/bin/env bash
# The README's main command: install deps, build, validate and run the
# quickstart pipeline (configs/quickstart.yaml) into runs/quickstart.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
./build/hpcrl validate configs/quickstart.yaml
# Idle OpenMP threads that spin steal the cores torch's BLAS needs (measured:
# 3.6x slower decoding on 2 cores, docs/rollout.md); let them sleep instead.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
./build/hpcrl run configs/quickstart.yaml --force "$@"
