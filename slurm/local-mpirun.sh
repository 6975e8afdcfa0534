#!/bin/bash
# hpcrl on one workstation: N ranks under mpirun (CPU tensors over MPI, or one GPU per rank).
#   slurm/local-mpirun.sh 4 configs/quickstart.yaml [hpcrl run options]
# Stopping it: SIGTERM, SIGINT or SIGUSR1 to this script, or SIGUSR1 to mpirun, reaches
# every rank as a stop request: they checkpoint and the script exits 75 (resume with
# --resume). SIGTERM sent to mpirun itself also ends in 75 with the checkpoint, within
# what Open MPI 4.1 allows: mpirun waits HPCRL_STOP_GRACE_S seconds (default 60; Open
# MPI's own default is 1 s), SIGTERMs the ranks, waits as long again for them, SIGKILLs
# what is left and exits 1 whatever they returned, so the exit code rank 0 records is
# used instead. The ranks go on working during the first wait.
set -euo pipefail
NP=${1:?usage: slurm/local-mpirun.sh NP CONFIG.yaml [hpcrl run options]}
CONFIG=${2:?usage: slurm/local-mpirun.sh NP CONFIG.yaml [hpcrl run options]}
shift 2
HPCRL=${HPCRL:-$(cd "$(dirname "$0")/.." && pwd)/build/hpcrl}
source "$(dirname "$0")/set-args.sh"
hpcrl_set_args "$@"
"$HPCRL" validate "$CONFIG" --world "$NP" "${set_args[@]}"
# Ranks share the cores: one OpenMP thread each unless told otherwise.
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
[ "$(id -u)" -eq 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# How long mpirun waits before it SIGTERMs its ranks (on its own SIGTERM, or a failure),
# and again before it SIGKILLs them.
export OMPI_MCA_odls_base_sigkill_timeout=${HPCRL_STOP_GRACE_S:-60}
status=$(mktemp "${TMPDIR:-/tmp}/hpcrl-exit.XXXXXX")
trap 'rm -f "$status"' EXIT
export HPCRL_EXIT_CODE_FILE=$status

mpirun -np "$NP" --oversubscribe --bind-to none "$HPCRL" run "$CONFIG" "$@" &
mpirun_pid=$!
# A stop asked of this script goes to mpirun as SIGUSR1, which mpirun forwards to every rank.
trap 'kill -USR1 "$mpirun_pid" 2>/dev/null || true' TERM INT USR1
set +e
while :; do
  wait "$mpirun_pid"
  rc=$?
  # wait returns early (above 128) when a trapped signal arrives; mpirun is still running then.
  kill -0 "$mpirun_pid" 2>/dev/null || break
done
set -e
recorded=$(cat "$status" 2>/dev/null || true)
if [ "$rc" -ne 0 ] && [ "$recorded" = 75 ]; then
  echo "local-mpirun: the ranks checkpointed and stopped resumably (mpirun exited $rc): exit 75" >&2
  rc=75
fi
exit "$rc"
