#!/usr/bin/env bash
# Soak: a long tiny GRPO run on 2 ranks (a checkpoint every 20 iterations), its
# resident memory and open file descriptors sampled per rank as it goes, killed
# (SIGKILL to one rank, so the whole job dies) at a random moment and resumed.
# Checks after the kill that metrics.jsonl is whole JSON lines and the trace
# still summarizes; at the end, that memory and descriptors stayed flat.
#   benchmarks/soak/grpo_soak.sh [ITERATIONS] [OUT_DIR]     (default 2000, /tmp/hpcrl-soak)
# Writes OUT_DIR/samples.csv (seconds, rank, iteration, rss_kib, fds) and
# OUT_DIR/summary.md; exits non-zero when a check fails: resident memory growing
# more than SOAK_MAX_GROWTH_KIB (default 8) KiB per iteration between the first and
# the last quarter of an attempt (medians), or open descriptors varying by more
# than 8. The short form CI runs (tests/e2e/CMakeLists.txt: soak_short) is
# `grpo_soak.sh 400` with a 64 KiB bound: over 400 iterations the allocator's
# 1-2 MiB of ups and downs alone reached 26 KiB per iteration (7 runs).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HPCRL=${HPCRL:-$ROOT/build/hpcrl}
ITERATIONS=${1:-2000}
OUT=${2:-${TMPDIR:-/tmp}/hpcrl-soak}
SEED=${SOAK_SEED:-$RANDOM}
export OMP_NUM_THREADS=1 OMPI_MCA_mpi_yield_when_idle=1
[ "$(id -u)" -eq 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
rm -rf "$OUT"
mkdir -p "$OUT"
cd "$ROOT"
run=$OUT/run
cfg=(tests/e2e/data/tiny.yaml
     --set 'stages=[{sft: {model: policy, data: arith, steps: 10, batch: 16, lr: 3.0e-3}},
                    {grpo: {policy: policy, reference: reference, reward: math, data: arith,
                            iterations: '"$ITERATIONS"', prompts: 4, group: 4, max_new_tokens: 16,
                            temperature: 1.0, lr: 1.0e-5, kl: {coef: 0.01, estimator: k3}}}]'
     --set run.checkpoint_every=20 --set run.eval_before_train=false --set run.eval_sampling.prompts=16
     --set trace.comm=false --out "$run")
echo "soak: $ITERATIONS GRPO iterations on 2 ranks into $run (kill seed $SEED)"
echo "seconds,attempt,rank,iteration,rss_kib,fds" > "$OUT/samples.csv"

iterations_done() {
  local n=0
  [ -f "$run/metrics.jsonl" ] && n=$(grep -c '"stage":"grpo".*"reward/mean"' "$run/metrics.jsonl" || true)
  echo "${n:-0}"
}
log_lines() { cat "$run/logs/rank-0000$1.log" 2>/dev/null | wc -l || true; }  # 0 before the first attempt
# The pid rank $1 logged after line $2 of its log (the lines an earlier attempt
# wrote are skipped: that attempt's pid may since belong to another process).
# Empty until the rank has logged it.
rank_pid() {
  tail -n "+$(($2 + 1))" "$run/logs/rank-0000$1.log" 2>/dev/null | grep -o 'pid [0-9][0-9]*' | tail -1 | cut -d' ' -f2 || true
}
# Samples both ranks 5 times a second while mpirun ($1) runs attempt $3, whose ranks
# log their pids after lines $4 and $5 of their logs. Not under
# errexit: a rank that exits between two reads of /proc must cost a sample, not the
# sampler (which would leave the attempt without samples).
sample() {
  set +e +o pipefail
  local mpirun=$1 t0=$2 attempt=$3 skip0=$4 skip1=$5
  while kill -0 "$mpirun" 2>/dev/null; do
    local it
    it=$(iterations_done)
    for r in 0 1; do
      local pid
      if [ "$r" = 0 ]; then pid=$(rank_pid 0 "$skip0"); else pid=$(rank_pid 1 "$skip1"); fi
      [ -n "$pid" ] && [ -r "/proc/$pid/status" ] || continue
      local rss fds
      rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status" 2>/dev/null) || continue
      fds=$(ls "/proc/$pid/fd" 2>/dev/null | wc -l)
      # No descriptors: the process was exiting (killed) while we looked; not a sample.
      [ -n "$rss" ] && [ "$fds" -gt 0 ] && echo "$((SECONDS - t0)),$attempt,$r,$it,$rss,$fds" >> "$OUT/samples.csv"
    done
    sleep 0.2  # 5 a second: the short form's attempts last a few seconds
  done
}

# Attempt 1: killed at a random iteration between 25 % and 60 % of the run (the
# resumed attempt keeps 40 % or more: long enough to judge its memory too).
kill_at=$((ITERATIONS / 4 + SEED % (ITERATIONS * 35 / 100 + 1)))
t0=$SECONDS
skip0=$(log_lines 0) skip1=$(log_lines 1)
mpirun -np 2 --oversubscribe --bind-to none "$HPCRL" run "${cfg[@]}" > "$OUT/attempt1.log" 2>&1 &
mpirun_pid=$!
sample "$mpirun_pid" "$t0" 1 "$skip0" "$skip1" &
sampler=$!
until [ "$(iterations_done)" -ge "$kill_at" ] || ! kill -0 "$mpirun_pid" 2>/dev/null; do sleep 0.2; done
# A random moment inside the iteration too: up to one second later.
sleep "0.$((SEED % 10))"
victim=$(rank_pid $((SEED % 2)) 0)
echo "soak: SIGKILL to rank $((SEED % 2)) (pid $victim) after $(iterations_done) iterations"
kill -KILL "$victim"
wait "$mpirun_pid" || true
wait "$sampler" || true
killed_after=$(iterations_done)

# What the kill left must be readable.
python3 - "$run/metrics.jsonl" <<'PY'
import json, sys
lines = open(sys.argv[1]).read().split("\n")
assert lines[-1] == "", "metrics.jsonl ends inside a line"
for i, l in enumerate(lines[:-1]):
    json.loads(l)  # raises on a malformed line
print(f"soak: metrics.jsonl after the kill: {len(lines) - 1} whole JSON lines")
PY
"$HPCRL" trace summarize "$run" > "$OUT/summary-after-kill.txt" || { echo "soak: trace summarize failed after the kill"; exit 1; }
echo "soak: trace summarize read the killed run's trace"

# Attempt 2: resumed to the end.
skip0=$(log_lines 0) skip1=$(log_lines 1)
mpirun -np 2 --oversubscribe --bind-to none "$HPCRL" run "${cfg[@]}" --resume > "$OUT/attempt2.log" 2>&1 &
mpirun_pid=$!
sample "$mpirun_pid" "$t0" 2 "$skip0" "$skip1" &
sampler=$!
rc=0
wait "$mpirun_pid" || rc=$?
wait "$sampler" || true
[ "$rc" -eq 0 ] || { tail -n 30 "$OUT/attempt2.log"; echo "soak: the resumed run failed ($rc)"; exit 1; }

python3 - "$OUT" "$ITERATIONS" "$kill_at" "$killed_after" "$((SECONDS - t0))" "${SOAK_MAX_GROWTH_KIB:-8}" <<'PY'
import csv, sys
out, iterations, kill_at, killed_after, seconds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
max_growth = float(sys.argv[6])
rows = [r for r in csv.DictReader(open(f"{out}/samples.csv"))]
ok = True
lines = [f"# GRPO soak: {iterations} iterations, 2 ranks, checkpoint every 20",
         "", f"Killed (SIGKILL to one rank) after {killed_after} iterations, resumed; {seconds} s in all.", "",
         "| rank | attempt | samples | RSS first → last (MiB) | RSS growth, first → last quarter (KiB/iteration) | fds min–max |",
         "|---|---|--:|---|--:|---|"]
def growth(warm):
    # KiB per iteration between the medians of the first and the last quarter of the
    # samples: a leak adds the same every iteration, while the allocator's ups and
    # downs (1-2 MiB here) cancel in a median instead of tilting a fitted slope.
    q = max(1, len(warm) // 4)
    med = lambda v: sorted(v)[len(v) // 2]
    first, last = warm[:q], warm[-q:]
    di = med([int(r["iteration"]) for r in last]) - med([int(r["iteration"]) for r in first])
    return (med([int(r["rss_kib"]) for r in last]) - med([int(r["rss_kib"]) for r in first])) / di if di else 0.0
judged = 0
for rank in ("0", "1"):
    for a_i in (1, 2):
        a = [r for r in rows if r["rank"] == rank and r["attempt"] == str(a_i)]
        if not a:  # the sampler saw nothing: the check would pass without looking
            ok = False; lines.append(f"\nno samples of rank {rank} in attempt {a_i}"); continue
        # From 20 iterations into the attempt (a checkpoint written or loaded: allocations
        # settled) to before its last iteration count (an exiting process frees memory
        # and closes files).
        first, last = min(int(r["iteration"]) for r in a), max(int(r["iteration"]) for r in a)
        warm = [r for r in a if first + 20 <= int(r["iteration"]) < last]
        if len(warm) < 10: continue  # too short to tell growth from noise
        judged += 1
        s = growth(warm)
        fds = [int(r["fds"]) for r in warm]
        lines.append(f"| {rank} | {a_i} | {len(a)} | {int(warm[0]['rss_kib'])/1024:.0f} → {int(warm[-1]['rss_kib'])/1024:.0f} "
                     f"| {s:.2f} | {min(fds)}–{max(fds)} |")
        # Flat: under max_growth KiB per iteration (8 by default: 2,000 iterations would add 16 MiB),
        # descriptors within 8 of each other.
        if s > max_growth: ok = False; lines.append(f"\nRSS grows {s:.1f} KiB per iteration on rank {rank}, attempt {a_i}")
        if max(fds) - min(fds) > 8: ok = False; lines.append(f"\nfile descriptors vary {min(fds)}–{max(fds)} on rank {rank}")
if judged == 0:  # no attempt ran long enough past its first checkpoint to tell
    ok = False; lines.append("\ntoo few samples after iteration 20 to judge memory and descriptors")
open(f"{out}/summary.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
sys.exit(0 if ok else 1)
PY
echo "soak: passed"
