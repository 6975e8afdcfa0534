#!/usr/bin/env bash
# Soak: a long tiny GRPO run on 2 ranks (a checkpoint every 20 iterations), its
# resident memory and open file descriptors sampled per rank as it goes, killed
# (SIGKILL to one rank, so the whole job dies) at a random moment and resumed.
# Checks after the kill that metrics.jsonl is whole JSON lines and the trace
# still summarizes; at the end, that memory and descriptors stayed flat.
#   benchmarks/soak/grpo_soak.sh [ITERATIONS] [OUT_DIR]     (default 2000, /tmp/hpcrl-soak)
# Writes OUT_DIR/samples.csv (seconds, rank, iteration, rss_kib, fds) and
# OUT_DIR/summary.md; exits non-zero when a check fails: RSS growing more than
# SOAK_MAX_SLOPE_KIB (default 8) KiB per iteration over the second half of an
# attempt, or open descriptors varying by more than 8. The short form CI runs
# (tests/e2e/CMakeLists.txt: soak_short) is `grpo_soak.sh 100` with a looser
# slope bound: 100 iterations are too few to tell a leak from allocator warm-up.
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
rank_pid() { grep -o 'pid [0-9]*' "$run/logs/rank-0000$1.log" 2>/dev/null | tail -1 | cut -d' ' -f2; }
# Samples both ranks every second while mpirun ($1) runs attempt $3.
sample() {
  local mpirun=$1 t0=$2 attempt=$3
  while kill -0 "$mpirun" 2>/dev/null; do
    local it
    it=$(iterations_done)
    for r in 0 1; do
      local pid
      pid=$(rank_pid $r)
      [ -n "$pid" ] && [ -r "/proc/$pid/status" ] || continue
      local rss fds
      rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status" 2>/dev/null) || continue
      fds=$(ls "/proc/$pid/fd" 2>/dev/null | wc -l)
      [ -n "$rss" ] && echo "$((SECONDS - t0)),$attempt,$r,$it,$rss,$fds" >> "$OUT/samples.csv"
    done
    sleep 1
  done
}

# Attempt 1: killed at a random iteration between 25 % and 75 % of the run.
kill_at=$((ITERATIONS / 4 + SEED % (ITERATIONS / 2 + 1)))
t0=$SECONDS
mpirun -np 2 --oversubscribe --bind-to none "$HPCRL" run "${cfg[@]}" > "$OUT/attempt1.log" 2>&1 &
mpirun_pid=$!
sample "$mpirun_pid" "$t0" 1 &
sampler=$!
until [ "$(iterations_done)" -ge "$kill_at" ] || ! kill -0 "$mpirun_pid" 2>/dev/null; do sleep 0.2; done
# A random moment inside the iteration too: up to one second later.
sleep "0.$((SEED % 10))"
victim=$(rank_pid $((SEED % 2)))
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
mpirun -np 2 --oversubscribe --bind-to none "$HPCRL" run "${cfg[@]}" --resume > "$OUT/attempt2.log" 2>&1 &
mpirun_pid=$!
sample "$mpirun_pid" "$t0" 2 &
sampler=$!
rc=0
wait "$mpirun_pid" || rc=$?
wait "$sampler" || true
[ "$rc" -eq 0 ] || { tail -n 30 "$OUT/attempt2.log"; echo "soak: the resumed run failed ($rc)"; exit 1; }

python3 - "$OUT" "$ITERATIONS" "$kill_at" "$killed_after" "$((SECONDS - t0))" "${SOAK_MAX_SLOPE_KIB:-8}" <<'PY'
import csv, sys
out, iterations, kill_at, killed_after, seconds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
max_slope = float(sys.argv[6])
rows = [r for r in csv.DictReader(open(f"{out}/samples.csv"))]
ok = True
lines = [f"# GRPO soak: {iterations} iterations, 2 ranks, checkpoint every 20",
         "", f"Killed (SIGKILL to one rank) after {killed_after} iterations, resumed; {seconds} s in all.", "",
         "| rank | attempt | samples | RSS first → last (MiB) | RSS slope, 2nd half (KiB/iteration) | fds min–max |",
         "|---|---|--:|---|--:|---|"]
def slope(xs, ys):
    n = len(xs)
    if n < 2: return 0.0
    mx, my = sum(xs) / n, sum(ys) / n
    vx = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / vx if vx else 0.0
for rank in ("0", "1"):
    for a_i in (1, 2):
        a = [r for r in rows if r["rank"] == rank and r["attempt"] == str(a_i)]
        warm = [r for r in a if int(r["iteration"]) >= 20]  # after the first checkpoint: allocations settled
        if len(warm) < 4: continue
        half = warm[len(warm) // 2:]
        s = slope([int(r["iteration"]) for r in half], [int(r["rss_kib"]) for r in half])
        fds = [int(r["fds"]) for r in warm]
        lines.append(f"| {rank} | {a_i} | {len(a)} | {int(warm[0]['rss_kib'])/1024:.0f} → {int(warm[-1]['rss_kib'])/1024:.0f} "
                     f"| {s:.2f} | {min(fds)}–{max(fds)} |")
        # Flat: under max_slope KiB per iteration (8 by default: 2,000 iterations would add 16 MiB),
        # descriptors within 8 of each other.
        if s > max_slope: ok = False; lines.append(f"\nRSS grows {s:.1f} KiB per iteration on rank {rank}, attempt {a_i}")
        if max(fds) - min(fds) > 8: ok = False; lines.append(f"\nfile descriptors vary {min(fds)}–{max(fds)} on rank {rank}")
open(f"{out}/summary.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
sys.exit(0 if ok else 1)
PY
echo "soak: passed"
