#!/bin/bash
# Where a GRPO iteration's time goes on CPU, end to end through the real
# `hpcrl run`: per-stage shares (rollout, reward, old/reference log-probs, actor
# update) and per-stage tokens/s and MFU, for configs/quickstart.yaml (tiny
# model, 16 prompts) and a base-100m policy (2 prompts), each at group 4, 8, 16
# (docs/benchmarks.md).
#
# Shares are ratios against the iteration time of the same run. MFU divides a
# stage's model FLOP/s by bench_gemm's fp32 GEMM FLOP/s (--threads, like the run)
# measured just before and just after the run: the machine is shared, so the
# baseline is taken around every run. The first --skip iterations are warm-up.
# Run directories are removed once their rows are printed.
#   benchmarks/rl/bench_grpo.sh [--build DIR] [--hpcrl BIN] [--only quickstart|base-100m] [--groups "4 8 16"]
#                               [--threads N] [--keep DIR]
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$ROOT/build
HPCRL=""
ONLY=""
GROUPS_="4 8 16"
KEEP=""
THREADS=2
while [ $# -gt 0 ]; do
  case $1 in
    --build) BUILD=$2; shift 2 ;;
    --hpcrl) HPCRL=$2; shift 2 ;;
    --only) ONLY=$2; shift 2 ;;
    --groups) GROUPS_=$2; shift 2 ;;
    --keep) KEEP=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    *) echo "usage: $0 [--build DIR] [--hpcrl BIN] [--only quickstart|base-100m] [--groups \"4 8 16\"] [--threads N] [--keep DIR]" >&2; exit 2 ;;
  esac
done
HPCRL=${HPCRL:-$BUILD/hpcrl}
GEMM=$BUILD/benchmarks/train/bench_gemm
REPORT=$BUILD/benchmarks/rl/bench_grpo_report
for exe in "$HPCRL" "$GEMM" "$REPORT"; do
  [ -x "$exe" ] || { echo "$exe not built (cmake -DHPCRL_BUILD_BENCHMARKS=ON; build hpcrl bench_gemm bench_grpo_report)" >&2; exit 2; }
done
export OMP_NUM_THREADS=$THREADS  # the run and its GEMM baseline alike
WORK=$(mktemp -d "${TMPDIR:-/tmp}/bench_grpo.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

# The quickstart pipeline, shortened: a little SFT (so responses have some
# shape), 3 GRPO iterations, 1 distillation step, no evaluations.
QUICK_SET=(--set 'stages[0].sft.steps=10' --set 'stages[1].grpo.iterations=3' --set 'stages[1].grpo.prompts=16' --set 'stages[2].distill.steps=1'
           --set run.eval_before_train=false --set data.arith.synthetic.eval=0 --set 'stages[0].sft.stop_at_accuracy=0')
# A ~100M policy from random initialisation: GRPO only, 2 prompts, 32 new tokens.
cat > "$WORK/base-100m.yaml" <<'EOF'
run: {name: bench-grpo-100m, seed: 1, device: cpu, dtype: float32, eval_before_train: false}
models:
  policy:    {init: {preset: base-100m}}
  reference: {init: {from: policy}, frozen: true}
rewards:
  math: {type: verifiable, extract: [boxed, last_number]}
data:
  arith: {synthetic: {task: arithmetic, digits: 2, terms: 2, train: 2000, eval: 0}}
stages:
  - grpo: {policy: policy, reference: reference, reward: math, data: arith,
           iterations: 3, prompts: 2, group: 8, max_new_tokens: 32, temperature: 1.0,
           lr: 1.0e-5, clip: [0.2, 0.28], kl: {coef: 0.01, estimator: k3}, loss_agg: token_mean}
trace: {chrome: true, metrics: true, comm: true}
EOF

# config yaml preset prompts grpo-stage-index skip
CASES=(
  "quickstart $ROOT/configs/quickstart.yaml tiny 16 1 1"
  "base-100m $WORK/base-100m.yaml base-100m 2 0 1"
)
SHARES=$WORK/shares.md
RATES=$WORK/rates.md
"$REPORT" --table shares --header > "$SHARES"
"$REPORT" --table rates --header > "$RATES"
gemm() { "$GEMM" | awk '{ print $2 }'; }
for c in "${CASES[@]}"; do
  read -r name config preset prompts stage skip <<< "$c"
  [ -n "$ONLY" ] && [ "$ONLY" != "$name" ] && continue
  extra=()
  [ "$name" = quickstart ] && extra=("${QUICK_SET[@]}")
  for group in $GROUPS_; do
    run=$WORK/$name-g$group
    g0=$(gemm)
    "$HPCRL" --log-level warn run "$config" --out "$run" "${extra[@]}" --set "stages[$stage].grpo.group=$group" \
      > "$run.log" 2>&1 || { echo "hpcrl run failed ($name, group $group):" >&2; tail -20 "$run.log" >&2; exit 1; }
    g1=$(gemm)
    args=("$run" --preset "$preset" --prompts "$prompts" --group "$group" --gemm "$g0" "$g1" --skip "$skip" --label "$name")
    "$REPORT" --table shares "${args[@]}" >> "$SHARES"
    "$REPORT" --table rates "${args[@]}" >> "$RATES"
    if [ -n "$KEEP" ]; then
      mkdir -p "$KEEP" && rm -rf "$run/checkpoints" && cp -r "$run" "$KEEP/"
    fi
    rm -rf "$run"
  done
done
echo "Time shares of a GRPO iteration (mean over the measured iterations):"
cat "$SHARES"
echo
echo "Tokens/s and MFU per stage:"
cat "$RATES"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
