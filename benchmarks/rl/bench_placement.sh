#!/bin/bash
# Colocated against disaggregated GRPO on this machine, one thread per rank
# (docs/placement.md): the quickstart's GRPO stage from the same SFT policy in
#   (a) colocated, dp = 2 on 2 ranks (each rank generates and trains half the batch),
#   (b) disaggregated, synchronous: rank 1 generates, rank 0 trains (1 + 1),
#   (c) asynchronous, max_staleness 1, tis_cap 2 (1 + 1),
# for each seed: iteration time, samples/s, the generating (G) and training (T)
# halves, each role's idle share from the trace, and the end of the learning
# curve (held-out accuracy after the stage, mean reward of its last 10
# iterations). The work–depth view's predictions are printed under the table:
# (a) ≈ (G + T)/2 and (b) ≈ G + T from (b)'s halves, (c) ≈ max(G, T) from its
# own (its T includes the old log-probs the decoupled objective recomputes).
# The three runs of a seed follow each other, so compare within a seed.
#   benchmarks/rl/bench_placement.sh [--build DIR] [--seeds "1 2 3"] [--iterations N] [--keep DIR]
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$ROOT/build
SEEDS="1 2 3"
ITERS=40
KEEP=""
while [ $# -gt 0 ]; do
  case $1 in
    --build) BUILD=$2; shift 2 ;;
    --seeds) SEEDS=$2; shift 2 ;;
    --iterations) ITERS=$2; shift 2 ;;
    --keep) KEEP=$2; shift 2 ;;
    *) echo "usage: $0 [--build DIR] [--seeds \"1 2 3\"] [--iterations N] [--keep DIR]" >&2; exit 2 ;;
  esac
done
HPCRL=$BUILD/hpcrl
REPORT=$BUILD/benchmarks/rl/bench_placement_report
source "$ROOT/benchmarks/rl/bench_common.sh"
bench_setup bench_placement

# The quickstart's SFT stage (configs/quickstart.yaml), alone, on one rank.
SFT='[{sft: {model: policy, data: arith, steps: 300, batch: 64, lr: 1.0e-3, warmup: 20, schedule: cosine,
       min_lr_ratio: 0.1, weight_decay: 0.01, eval_every: 10, stop_at_accuracy: 0.4}}]'
DISAGG=(--set placement.mode=disaggregated --set 'placement.ranges={policy: [0, 0], reference: [0, 0], policy.rollout: [1, 1]}')
ASYNC=(--set 'stages[0].grpo.async.max_staleness=1' --set 'stages[0].grpo.tis_cap=2.0')
TABLE=$WORK/table.md
"$REPORT" --header > "$TABLE"
PRED=$WORK/predicted.md
printf '| seed | (a) predicted (G + T)/2 | (a) measured | (b) predicted G + T | (b) measured | (c) predicted max(G, T) | (c) measured |\n|---|--:|--:|--:|--:|--:|--:|\n' > "$PRED"
col() { grep "^| $1 |" "$TABLE" | tail -1 | awk -F'|' -v c="$2" '{ gsub(/ /, "", $c); print $c }'; }
for seed in $SEEDS; do
  sft=$WORK/sft-$seed
  "$HPCRL" --log-level warn run configs/quickstart.yaml --set run.seed="$seed" --set "stages=$SFT" --out "$sft" \
    > "$sft.log" 2>&1 || { echo "SFT failed (seed $seed):" >&2; tail -20 "$sft.log" >&2; exit 1; }
  policy=$(ls -d "$sft"/checkpoints/00-sft/step-*/policy | tail -1)
  # The quickstart's GRPO stage on that policy (its stage text, ITERS iterations).
  quickstart_grpo_config "$policy" bench-placement "$WORK/grpo-$seed.yaml"
  common=(--set run.seed="$seed" --set "stages[0].grpo.iterations=$ITERS" --set run.eval_before_train=false)
  for variant in a-colocated b-disaggregated c-async; do
    run=$WORK/$variant-$seed
    extra=()
    [ "$variant" != a-colocated ] && extra+=("${DISAGG[@]}")
    [ "$variant" = c-async ] && extra+=("${ASYNC[@]}")
    mpirun -np 2 --oversubscribe "$HPCRL" --log-level warn run "$WORK/grpo-$seed.yaml" "${common[@]}" "${extra[@]}" \
      --out "$run" > "$run.log" 2>&1 || { echo "run $variant failed (seed $seed):" >&2; tail -20 "$run.log" >&2; exit 1; }
    "$HPCRL" trace summarize "$run" --json > "$run/trace/summary.json"
    "$REPORT" "$run" --label "$variant seed $seed" --samples 256 --skip 1 >> "$TABLE"
    if [ -n "$KEEP" ]; then mkdir -p "$KEEP" && rm -rf "$run/checkpoints" && cp -r "$run" "$KEEP/"; fi
  done
  # (a) and (b) from (b)'s halves; (c) from its own, whose T includes the old log-probs the decoupled objective recomputes.
  awk -v s="$seed" -v gb="$(col "b-disaggregated seed $seed" 6)" -v tb="$(col "b-disaggregated seed $seed" 7)" \
      -v gc="$(col "c-async seed $seed" 6)" -v tc="$(col "c-async seed $seed" 7)" \
      -v a="$(col "a-colocated seed $seed" 4)" -v b="$(col "b-disaggregated seed $seed" 4)" -v c="$(col "c-async seed $seed" 4)" \
      'BEGIN { m = gc > tc ? gc : tc; printf "| %s | %.3f | %s | %.3f | %s | %.3f | %s |\n", s, (gb + tb) / 2, a, gb + tb, b, m, c }' >> "$PRED"
done
echo "GRPO iterations ($ITERS per run, the first skipped), one thread per rank, 32 prompts x 8 samples:"
cat "$TABLE"
echo
echo "Work-depth view against the measurement (seconds per iteration):"
cat "$PRED"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
