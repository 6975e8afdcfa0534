#!/bin/bash
# The body of hpcrl's batch scripts (slurm/*.sbatch exec it): validate the run as
# it will be launched, start one hpcrl task per rank with srun, and turn a stop
# into a requeue.
#   exec bash "$SLURM_SUBMIT_DIR/slurm/srun-hpcrl.sh" [srun options] -- CONFIG.yaml [hpcrl run options]
# Environment: HPCRL (the binary; default $SLURM_SUBMIT_DIR/build/hpcrl),
# HPCRL_SRUN_MPI (srun's --mpi plugin; default pmix, the one Debian's and most
# Open MPI builds start under — pmi2 and none fail in MPI_Init there),
# HPCRL_STOP_LEAD_S (the lead of the script's --signal=USR1@SECONDS; default 120).
#
# Stops: Slurm's --signal=USR1@N reaches every task; `scancel --signal=USR1`
# (steps), `--batch` or `--full` (this shell too), or a B:USR1 signal reach this
# shell, whose trap hands USR1 to srun, which forwards it to every task. The
# ranks checkpoint and exit 75; the job then requeues itself, and the requeued
# job (SLURM_RESTART_COUNT > 0) resumes with --resume. Exit 0 = finished or
# requeued, anything else = failed.
set -euo pipefail
srun_opts=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  srun_opts+=("$1")
  shift
done
[ "${1:-}" = "--" ] && shift
CONFIG=${1:?usage: srun-hpcrl.sh [srun options] -- CONFIG.yaml [hpcrl run options]}
shift
: "${SLURM_JOB_ID:?srun-hpcrl.sh runs inside a Slurm job (sbatch)}"
# sbatch runs a copy of the batch script from its spool directory: paths start at the submit directory.
cd "${SLURM_SUBMIT_DIR:?}"
HPCRL=${HPCRL:-$SLURM_SUBMIT_DIR/build/hpcrl}
MPI_PLUGIN=${HPCRL_SRUN_MPI:-pmix}
STOP_LEAD_S=${HPCRL_STOP_LEAD_S:-120}

# Fail fast on a bad config before spending the allocation, with the --set flags the run gets.
source "$SLURM_SUBMIT_DIR/slurm/set-args.sh"
hpcrl_set_args "$@"
"$HPCRL" validate "$CONFIG" --world "$SLURM_NTASKS" "${set_args[@]}"

resume=()
if [ "${SLURM_RESTART_COUNT:-0}" -gt 0 ]; then
  resume=(--resume)
  echo "srun-hpcrl: attempt $((SLURM_RESTART_COUNT + 1)) of job $SLURM_JOB_ID: resuming"
fi

srun --mpi="$MPI_PLUGIN" "${srun_opts[@]}" "$HPCRL" run "$CONFIG" "${resume[@]}" --stop-lead "$STOP_LEAD_S" "$@" &
srun_pid=$!
# Without a trap, a USR1 or TERM for this shell would end it and the job would not requeue.
trap 'echo "srun-hpcrl: stop signal for the batch shell: forwarding SIGUSR1 to the tasks"; kill -USR1 "$srun_pid" 2>/dev/null || true' USR1 TERM
set +e
while :; do
  wait "$srun_pid"
  rc=$?
  kill -0 "$srun_pid" 2>/dev/null || break  # wait returns early when a trapped signal arrives
done
set -e
if [ "$rc" -eq 75 ]; then
  echo "srun-hpcrl: hpcrl stopped resumably (exit 75): requeueing job $SLURM_JOB_ID"
  scontrol requeue "$SLURM_JOB_ID"
  exit 0
fi
exit "$rc"
