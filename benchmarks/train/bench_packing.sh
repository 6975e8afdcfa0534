#!/bin/bash
# What removing padding buys, end to end through the real `hpcrl run`: SFT of
# the `tiny` preset on real GSM8K rows (byte tokenizer, so rows run from ~150
# to ~900 tokens and a right-padded micro-batch is mostly padding) and the
# quickstart's GRPO update, each run padded (`packing: false`, micro-batches
# trimmed to their longest row), packed (`packing: true`) and packed with a
# token budget (`micro_batch_tokens`). The machine is shared and its speed
# moves, so the configurations run interleaved, round after round, and every
# number is a ratio to the padded run of the same round (median over rounds).
# Losses are printed too: packing must not change them (fp32 rounding aside).
#   benchmarks/train/bench_packing.sh [--build DIR] [--hpcrl BIN] [--rounds N] [--threads N]
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$ROOT/build
HPCRL=""
ROUNDS=3
THREADS=2
while [ $# -gt 0 ]; do
  case $1 in
    --build) BUILD=$2; shift 2 ;;
    --hpcrl) HPCRL=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    *) echo "usage: $0 [--build DIR] [--hpcrl BIN] [--rounds N] [--threads N]" >&2; exit 2 ;;
  esac
done
HPCRL=${HPCRL:-$BUILD/hpcrl}
[ -x "$HPCRL" ] || { echo "$HPCRL not built" >&2; exit 2; }
GSM8K=$ROOT/data/gsm8k/train.jsonl
[ -f "$GSM8K" ] || { echo "missing fixture $GSM8K" >&2; exit 2; }
export OMP_NUM_THREADS=$THREADS OMP_WAIT_POLICY=PASSIVE
WORK=$(mktemp -d "${TMPDIR:-/tmp}/bench_packing.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

head -n 512 "$GSM8K" > "$WORK/gsm8k.jsonl"
cat > "$WORK/sft.yaml" <<EOF
run: {name: bench-packing-sft, seed: 1, eval_before_train: false, checkpoint_every: 0}
models:
  policy: {init: {preset: tiny}}
data:
  gsm8k: {jsonl: {path: $WORK/gsm8k.jsonl}}
stages:
  - sft: {model: policy, data: gsm8k, steps: 8, batch: 16, lr: 1.0e-3, micro_batch: 8}
trace: {chrome: false, metrics: true, comm: false}
EOF

# Mean of one metric over the steps after the first (warm-up) of a stage.
mean_metric() {  # metrics.jsonl stage key
  grep "\"stage\":\"$2\"" "$1" | grep -o "\"$3\":[-0-9.e+]*" | cut -d: -f2 |
    awk 'NR > 1 { s += $1; n++ } END { if (n) printf "%.6g", s / n; else print "nan" }'
}
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# The quickstart shortened: enough SFT for responses of varied length, a few
# GRPO iterations with 16-row micro-batches, one distillation step, no evaluations.
QUICK="--set stages[0].sft.steps=60 --set stages[1].grpo.iterations=6 --set stages[1].grpo.prompts=16 --set stages[1].grpo.micro_batch=16"
QUICK="$QUICK --set stages[2].distill.steps=1 --set run.eval_before_train=false --set data.arith.synthetic.eval=0"
QUICK="$QUICK --set stages[0].sft.stop_at_accuracy=0"
# name | config | extra --set arguments | stage | timed metric | loss metric
CASES=(
  "sft padded|$WORK/sft.yaml||sft|seconds/step|loss"
  "sft packed|$WORK/sft.yaml|--set stages[0].sft.packing=true|sft|seconds/step|loss"
  "sft packed, 2048-token micro-batches|$WORK/sft.yaml|--set stages[0].sft.packing=true --set stages[0].sft.micro_batch_tokens=2048|sft|seconds/step|loss"
  "grpo update padded|$ROOT/configs/quickstart.yaml|$QUICK|grpo|seconds/actor_update|loss"
  "grpo update packed|$ROOT/configs/quickstart.yaml|$QUICK --set stages[1].grpo.packing=true|grpo|seconds/actor_update|loss"
)

declare -A SECONDS_OF LOSS_OF
for ((round = 1; round <= ROUNDS; round++)); do
  for c in "${CASES[@]}"; do
    IFS='|' read -r name cfg extra stage timed lossk <<< "$c"
    out="$WORK/run"
    rm -rf "$out"
    # shellcheck disable=SC2086
    "$HPCRL" run "$cfg" --force --out "$out" $extra > "$WORK/log" 2>&1 || { cat "$WORK/log" >&2; exit 1; }
    SECONDS_OF["$name,$round"]=$(mean_metric "$out/metrics.jsonl" "$stage" "$timed")
    LOSS_OF["$name"]=$(mean_metric "$out/metrics.jsonl" "$stage" "$lossk")
  done
done

echo "| run | seconds (median of $ROUNDS rounds) | time vs padded (median of per-round ratios) | mean loss |"
echo "|---|---|---|---|"
for c in "${CASES[@]}"; do
  IFS='|' read -r name cfg extra stage timed lossk <<< "$c"
  base="${name% packed*}"; base="${base% padded}"; base="$base padded"
  secs=$(for ((r = 1; r <= ROUNDS; r++)); do echo "${SECONDS_OF[$name,$r]}"; done | median)
  ratio=$(for ((r = 1; r <= ROUNDS; r++)); do
            awk -v a="${SECONDS_OF[$name,$r]}" -v b="${SECONDS_OF[$base,$r]}" 'BEGIN { printf "%.4f\n", a / b }'
          done | median)
  echo "| $name | $secs | $ratio | ${LOSS_OF[$name]} |"
done
