#!/usr/bin/env bash
# hpcrl's batch script under a real Slurm, as a user runs it: a one-node Slurm
# on this machine (tests/slurm/local_slurm.sh), `sbatch -n 2 slurm/cpu.sbatch`
# with a shortened quickstart, preempted twice by `scancel --signal=USR1` —
# once aimed at the batch shell (--batch), once at the shell and every task
# (--full) — each time during GRPO. Checks: both ranks got the signal,
# checkpointed and exited 75; the job requeued itself and each requeued attempt
# resumed (SLURM_RESTART_COUNT) and the last one finished; its metrics equal
# an uninterrupted run's under mpirun, and srun's launch gives every rank the
# same layout (rank, node, local rank) as mpirun's.
#   tests/slurm/slurm_e2e.sh            (as root; exit 77 = skipped: Slurm not installed)
# Needs the Debian packages slurmctld, slurmd, slurm-client and munge.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HPCRL=${HPCRL:-$ROOT/build/hpcrl}
skip() {
  echo "slurm_e2e: SKIPPED: $*"
  exit 77
}
[ "$(id -u)" -eq 0 ] || skip "needs root (slurmd starts the job's tasks as their user)"
for p in slurmctld slurmd munged sbatch srun scontrol scancel; do
  command -v "$p" >/dev/null || skip "$p is missing (apt-get install slurmctld slurmd slurm-client munge)"
done
[ -x "$HPCRL" ] || { echo "slurm_e2e: no hpcrl binary at $HPCRL" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1

fail() {
  echo "slurm_e2e: FAILED: $*" >&2
  for f in "$work"/checkout/slurm-*.out "$work"/slurm/log/slurmd-*.log; do
    [ -f "$f" ] && { echo "--- $f (last 40 lines)" >&2; tail -n 40 "$f" >&2; }
  done
  exit 1
}
step() { echo "== slurm_e2e [$((SECONDS - started)) s] $*"; }
started=$SECONDS

source "$ROOT/tests/slurm/local_slurm.sh"
# Under /tmp, not $TMPDIR: munge and slurmd put Unix sockets in it, whose paths
# must stay under 108 bytes.
work=$(mktemp -d /tmp/hpcrl-slurm.XXXXXX)
trap 'slurm_stop; rm -rf "$work"' EXIT
step "starting a one-node Slurm in $work/slurm"
slurm_start "$work/slurm"
sinfo -N -o '%N %c CPUs %m MB %T'

# A checkout the job runs from, as a user's: the submit directory holds the
# scripts, the binary and the configs, and no runs/ directory yet.
mkdir -p "$work/checkout/build"
for d in slurm configs data; do ln -s "$ROOT/$d" "$work/checkout/$d"; done
ln -s "$HPCRL" "$work/checkout/build/hpcrl"
cd "$work/checkout"
# The quickstart, shortened to run in about a minute per attempt on 2 ranks.
short=(--set stages.0.sft.steps=30 --set stages.0.sft.stop_at_accuracy=0 --set run.eval_sampling.prompts=32
       --set stages.1.grpo.iterations=12 --set stages.1.grpo.prompts=16 --set stages.2.distill.steps=10)

grpo_lines() {
  python3 - "$1" <<'PY'
import json, sys
try:
    lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
except FileNotFoundError:
    lines = []
print(sum(1 for j in lines if j.get("stage") == "grpo" and "reward/mean" in j))
PY
}
job_field() { scontrol show job "$jid" | grep -o "$1=[^ ]*" | head -1 | cut -d= -f2; }
# Waits until the current attempt has trained `n` GRPO iterations.
wait_for_grpo() {
  local n=$1 t0=$SECONDS
  until [ "$(grpo_lines runs/slurm-e2e/metrics.jsonl)" -ge "$n" ]; do
    case "$(job_field JobState)" in FAILED | CANCELLED | TIMEOUT | NODE_FAIL | COMPLETED)
      fail "job $jid ended $(job_field JobState) ($(job_field Reason)) before GRPO iteration $n" ;;
    esac
    [ $((SECONDS - t0)) -lt 600 ] || fail "no GRPO iteration $n within 600 s (job state $(job_field JobState))"
    [ "$(job_field JobState)" != PENDING ] || [ $((SECONDS - t0)) -lt 120 ] ||
      fail "job $jid still pending after 120 s: $(job_field Reason)"
    sleep 1
  done
}
# Waits for restart number `n` to be queued, then lets it start now: Slurm 22.05
# gives a requeued job a begin time 2 minutes ahead (a cluster's scheduler decides
# when it runs again; the test does not wait for that).
wait_for_requeue() {
  local n=$1 t0=$SECONDS
  until [ "$(job_field Restarts)" -ge "$n" ] && [ "$(job_field JobState)" = PENDING ]; do
    [ $((SECONDS - t0)) -lt 300 ] || fail "job $jid was not requeued within 300 s (state $(job_field JobState))"
    sleep 1
  done
  # slurmd refuses a credential created in the same second as the revocation of the
  # previous attempt's ("Job credential revoked": the job fails at once), so wait past it.
  sleep 2
  scontrol update JobId="$jid" StartTime=now
}

step "sbatch -n 2 slurm/cpu.sbatch configs/quickstart.yaml (shortened)"
jid=$(sbatch --parsable -n 2 -J hpcrl-e2e slurm/cpu.sbatch configs/quickstart.yaml --out runs/slurm-e2e "${short[@]}")
out=$work/checkout/slurm-hpcrl-e2e-$jid.out
wait_for_grpo 3
step "preempting attempt 1: scancel --signal=USR1 --batch (the batch shell only)"
scancel --signal=USR1 --batch "$jid"
wait_for_requeue 1
wait_for_grpo 7
step "preempting attempt 2: scancel --signal=USR1 --full (the batch shell and every task)"
scancel --signal=USR1 --full "$jid"
wait_for_requeue 2
t0=$SECONDS
until [ "$(job_field JobState)" = COMPLETED ]; do
  case "$(job_field JobState)" in FAILED | CANCELLED | TIMEOUT | NODE_FAIL) fail "job ended $(job_field JobState)" ;; esac
  [ $((SECONDS - t0)) -lt 900 ] || fail "job $jid did not finish within 900 s"
  sleep 2
done
step "job $jid: $(job_field JobState), exit code $(job_field ExitCode), restarts $(job_field Restarts)"
[ "$(job_field ExitCode)" = 0:0 ] || fail "exit code $(job_field ExitCode)"
[ "$(job_field Restarts)" = 2 ] || fail "$(job_field Restarts) restarts, expected 2"

# Every attempt's output is in one file (--open-mode=append).
for attempt in 1 2; do
  for rank in 0 1; do
    [ "$(grep -c "^\[rank $rank\] SIGUSR1 received" "$out")" -ge "$attempt" ] ||
      fail "rank $rank did not log SIGUSR1 in attempt $attempt"
  done
done
# srun reports tasks that end together as one range ("tasks 0-1: Exited with exit code 75")
# and tasks that end apart one by one ("task 1: ..."); each task must have exited 75 twice.
for task in 0 1; do
  exits=$(grep -cE "tasks? (0-1|$task): Exited with exit code 75" "$out" || true)
  [ "$exits" = 2 ] || fail "task $task did not exit 75 twice: $(grep -E 'Exited with exit code' "$out" | tr '\n' ';')"
done
[ "$(grep -c "requeueing job $jid" "$out")" = 2 ] || fail "the job did not requeue itself twice"
grep -q "attempt 2 of job $jid: resuming" "$out" || fail "attempt 2 did not resume"
grep -q "attempt 3 of job $jid: resuming" "$out" || fail "attempt 3 did not resume"
[ "$(grep -c '(resuming)' "$out")" = 2 ] || fail "hpcrl did not resume twice"
# Every checkpoint left holds each rank's optimizer shard (a stop's and the stage's last).
for dir in runs/slurm-e2e/checkpoints/01-grpo/step-*; do
  for rank in 00000 00001; do
    [ -f "$dir/policy/optimizer-rank-$rank.safetensors" ] || fail "$dir has no optimizer shard of rank $rank"
  done
done

step "the same run uninterrupted under mpirun -np 2"
mpirun -np 2 --oversubscribe --bind-to none "$HPCRL" run configs/quickstart.yaml --out runs/mpirun "${short[@]}" \
  > "$work/mpirun.log" 2>&1 || { tail -n 30 "$work/mpirun.log"; fail "the mpirun run failed"; }
python3 "$ROOT/tests/slurm/metrics_equal.py" runs/mpirun/metrics.jsonl runs/slurm-e2e/metrics.jsonl || fail "metrics differ"
for rank in 00000 00001; do
  layout() { grep -o 'rank [0-9]* of [0-9]*: node [0-9]* of [0-9]*, local rank [0-9]* of [0-9]*' "$1" | head -1; }
  a=$(layout runs/mpirun/logs/rank-$rank.log)
  b=$(layout runs/slurm-e2e/logs/rank-$rank.log)
  [ -n "$a" ] && [ "$a" = "$b" ] || fail "rank $rank: mpirun gave '$a', srun '$b'"
  echo "layout of rank $rank: $b (mpirun and srun)"
done
step "passed"
