#!/bin/bash
# One-GPU CI smoke run: validate, then run the small smoke pipeline on cuda:0.
#   slurm/ci-smoke-1gpu.sh [configs/ci-smoke-1gpu.yaml]
# Under Slurm: srun -N1 -n1 --gpus=1 slurm/ci-smoke-1gpu.sh
set -euo pipefail
CONFIG=${1:-configs/ci-smoke-1gpu.yaml}
HPCRL=${HPCRL:-$(cd "$(dirname "$0")/.." && pwd)/build/hpcrl}
"$HPCRL" validate "$CONFIG" --world 1
exec "$HPCRL" run "$CONFIG" --force --set run.device=cuda
