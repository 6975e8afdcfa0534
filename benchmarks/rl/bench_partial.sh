#!/bin/bash
# Partial rollouts on a long-tailed workload (docs/placement.md "Partial
# rollouts"): the quickstart's GRPO stage with one problem in ten a long one
# (synthetic.long_tail {every: 10}: 12 digits x 6 terms, its worked solution
# ~9x the median), on 1 + 1 ranks, one thread each, from one SFT policy (seed
# 1, trained on the same long-tailed data, --sft-steps steps), packed (the long
# responses would otherwise pad every row of the update), in
#   (b) disaggregated, synchronous (max_staleness 0),
#   (c) asynchronous, max_staleness 1, tis_cap 2,
#   (d) asynchronous with partial rollouts, max_staleness 2, tis_cap 2,
#   (e) (d) with async.keep_stale_cache (no re-prefill of paused responses),
# --variants picks them (default "b c d"); and, for the trainer-bound case,
# (b) and (d) on the plain (short) task. --policy DIR starts from a saved SFT
# policy instead of training one.
# For each seed: iteration time, samples/s, the generating (G) and training
# (T) halves, each role's idle share from the trace, the end of the learning
# curve (held-out accuracy, mean reward of the last 10 iterations; with
# --eval-every N the whole curve, an evaluation every N iterations), and the
# work-depth view's prediction from each run's own halves: (b) G + T, (c) and
# (d) max(G, T). Ratios are taken within a seed (the runs follow each other).
# --slots N sets the generator's engine slots (models.policy.rollout.max_batch;
# fewer slots make generation slower, to balance it with training); --short no
# skips the short-task pair.
#   benchmarks/rl/bench_partial.sh [--build DIR] [--seeds "1 2 3"] [--iterations N] [--sft-steps N]
#                                  [--sft-target ACC] [--eval-every N] [--slots N] [--short yes|no] [--keep DIR]
#                                  [--variants "b c d e"] [--policy DIR]
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$ROOT/build
SEEDS="1 2 3"
ITERS=20
SFT_STEPS=600
SFT_TARGET=0.4
EVAL_EVERY=0
SLOTS=""
SHORT=yes
KEEP=""
VARIANTS="b c d"
POLICY=""
while [ $# -gt 0 ]; do
  case $1 in
    --build) BUILD=$2; shift 2 ;;
    --seeds) SEEDS=$2; shift 2 ;;
    --iterations) ITERS=$2; shift 2 ;;
    --sft-steps) SFT_STEPS=$2; shift 2 ;;
    --sft-target) SFT_TARGET=$2; shift 2 ;;
    --eval-every) EVAL_EVERY=$2; shift 2 ;;
    --slots) SLOTS=$2; shift 2 ;;
    --short) SHORT=$2; shift 2 ;;
    --keep) KEEP=$2; shift 2 ;;
    --variants) VARIANTS=$2; shift 2 ;;
    --policy) POLICY=$2; shift 2 ;;
    *) echo "usage: $0 [--build DIR] [--seeds \"1 2 3\"] [--iterations N] [--sft-steps N] [--sft-target ACC] [--eval-every N] [--slots N] [--short yes|no] [--keep DIR] [--variants \"b c d e\"] [--policy DIR]" >&2; exit 2 ;;
  esac
done
HPCRL=$BUILD/hpcrl
REPORT=$BUILD/benchmarks/rl/bench_placement_report
source "$ROOT/benchmarks/rl/bench_common.sh"
bench_setup bench_partial

# The quickstart's SFT stage, alone, on one rank, on the long-tailed data (long solutions need 256 new tokens).
SFT="[{sft: {model: policy, data: arith, steps: $SFT_STEPS, batch: 64, lr: 1.0e-3, warmup: 20, schedule: cosine,
       min_lr_ratio: 0.1, weight_decay: 0.01, packing: true, eval_every: 25, stop_at_accuracy: $SFT_TARGET}}]"
LONG=(--set data.arith.synthetic.long_tail.every=10 --set run.eval_sampling.max_new_tokens=256)
DISAGG=(--set placement.mode=disaggregated --set 'placement.ranges={policy: [0, 0], reference: [0, 0], policy.rollout: [1, 1]}')
TABLE=$WORK/table.md
"$REPORT" --header > "$TABLE"
CURVES=$WORK/curves.md
"$REPORT" --curve-header > "$CURVES"
PRED=$WORK/predicted.md
printf '| run | predicted | measured | measured / (b) of its seed and workload |\n|---|--:|--:|--:|\n' > "$PRED"
col() { grep "^| $1 |" "$TABLE" | tail -1 | awk -F'|' -v c="$2" '{ gsub(/ /, "", $c); print $c }'; }

# One GRPO run: variant name, seed, workload (long | short), extra --set flags.
run_variant() {
  local variant=$1 seed=$2 workload=$3; shift 3
  local run=$WORK/$variant-$workload-$seed label="$variant $workload seed $seed"
  local data=()
  [ "$workload" = long ] && data=("${LONG[@]}" --set 'stages[0].grpo.max_new_tokens=256')
  [ -n "$SLOTS" ] && data+=(--set "models.policy.rollout.max_batch=$SLOTS")
  mpirun -np 2 --oversubscribe "$HPCRL" --log-level warn run "$WORK/grpo-$seed.yaml" --set run.seed="$seed" \
    --set "stages[0].grpo.iterations=$ITERS" --set 'stages[0].grpo.packing=true' \
    --set "run.eval_before_train=$([ "$EVAL_EVERY" -gt 0 ] && echo true || echo false)" \
    --set "stages[0].grpo.eval_every=$EVAL_EVERY" \
    "${data[@]}" "${DISAGG[@]}" "$@" \
    --out "$run" > "$run.log" 2>&1 || { echo "run $label failed:" >&2; tail -20 "$run.log" >&2; exit 1; }
  "$HPCRL" trace summarize "$run" --json > "$run/trace/summary.json"
  "$REPORT" "$run" --label "$label" --samples 256 --skip 2 >> "$TABLE"
  "$REPORT" "$run" --label "$label" --curve >> "$CURVES"
  local g t m b
  g=$(col "$label" 6); t=$(col "$label" 7); m=$(col "$label" 4); b=$(col "b-sync $workload seed $seed" 4)
  awk -v l="$label" -v g="$g" -v t="$t" -v m="$m" -v b="$b" -v sync="$([ "$variant" = b-sync ] && echo 1 || echo 0)" \
    'BEGIN { p = sync ? g + t : (g > t ? g : t); printf "| %s | %.3f | %.3f | %.2f |\n", l, p, m, m / b }' >> "$PRED"
  if [ -n "$KEEP" ]; then mkdir -p "$KEEP" && rm -rf "$run/checkpoints" && cp -r "$run" "$KEEP/"; fi
}

policy=$POLICY
if [ -z "$policy" ]; then
  sft=$WORK/sft
  "$HPCRL" --log-level warn run configs/quickstart.yaml --set run.seed=1 --set "stages=$SFT" "${LONG[@]}" \
    --out "$sft" > "$sft.log" 2>&1 || { echo "SFT failed:" >&2; tail -20 "$sft.log" >&2; exit 1; }
  policy=$(ls -d "$sft"/checkpoints/00-sft/step-*/policy | tail -1)
fi
has() { case " $VARIANTS " in *" $1 "*) return 0 ;; esac; return 1; }
for seed in $SEEDS; do
  # The quickstart's GRPO stage on that policy.
  quickstart_grpo_config "$policy" bench-partial "$WORK/grpo-$seed.yaml"
  ASYNC1=(--set 'stages[0].grpo.async.max_staleness=1' --set 'stages[0].grpo.tis_cap=2.0')
  PARTIAL=(--set 'stages[0].grpo.async.max_staleness=2' --set 'stages[0].grpo.async.partial_rollouts=true'
           --set 'stages[0].grpo.tis_cap=2.0')
  run_variant b-sync "$seed" long  # every ratio is against (b) of its seed
  if has c; then run_variant c-async "$seed" long "${ASYNC1[@]}"; fi
  if has d; then run_variant d-partial "$seed" long "${PARTIAL[@]}"; fi
  if has e; then run_variant e-stale "$seed" long "${PARTIAL[@]}" --set 'stages[0].grpo.async.keep_stale_cache=true'; fi
  if [ "$SHORT" = yes ] && [ "$seed" = "${SEEDS%% *}" ]; then  # the trainer-bound case: the short task, first seed only
    run_variant b-sync "$seed" short
    run_variant d-partial "$seed" short "${PARTIAL[@]}"
  fi
done
echo "GRPO iterations ($ITERS per run, the first 2 skipped), 1 + 1 ranks, one thread each, 32 prompts x 8 samples:"
cat "$TABLE"
echo
echo "Work-depth view against the measurement (seconds per iteration):"
cat "$PRED"
echo
echo "Learning curves:"
cat "$CURVES"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
