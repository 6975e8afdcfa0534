#!/bin/bash
# hpcrl on one workstation: N ranks under mpirun (CPU tensors over MPI, or one GPU per rank).
#   slurm/local-mpirun.sh 4 configs/quickstart.yaml [hpcrl run options]
set -euo pipefail
NP=${1:?usage: slurm/local-mpirun.sh NP CONFIG.yaml [hpcrl run options]}
CONFIG=${2:?usage: slurm/local-mpirun.sh NP CONFIG.yaml [hpcrl run options]}
shift 2
HPCRL=${HPCRL:-$(dirname "$0")/../build/hpcrl}
"$HPCRL" validate "$CONFIG" --world "$NP"
# Ranks share the cores: one OpenMP thread each unless told otherwise.
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
[ "$(id -u)" -eq 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
exec mpirun -np "$NP" --oversubscribe --bind-to none "$HPCRL" run "$CONFIG" "$@"
