#!/bin/bash
# Tools help, and GRPO teaches using them (docs/tools.md): configs/quickstart-tools.yaml
# (the tiny model on 3-digit products: SFT on traces that call the calculator,
# then multi-turn GRPO over it) beside the same pipeline without tools (SFT on
# the boxed answer alone, single-turn GRPO), for each seed. Held-out accuracy
# (the whole 200-problem eval split, greedy) is read from the GRPO stage's
# evaluations: before its first step (= after SFT) and after its last.
#   benchmarks/rl/bench_tools.sh [--build DIR] [--seeds "1 2 3"] [--sft-steps N] [--iterations N] [--keep DIR]
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$ROOT/build
SEEDS="1 2 3"
SFT_STEPS=""
ITERS=""
KEEP=""
while [ $# -gt 0 ]; do
  case $1 in
    --build) BUILD=$2; shift 2 ;;
    --seeds) SEEDS=$2; shift 2 ;;
    --sft-steps) SFT_STEPS=$2; shift 2 ;;
    --iterations) ITERS=$2; shift 2 ;;
    --keep) KEEP=$2; shift 2 ;;
    *) echo "usage: $0 [--build DIR] [--seeds \"1 2 3\"] [--sft-steps N] [--iterations N] [--keep DIR]" >&2; exit 2 ;;
  esac
done
HPCRL=$BUILD/hpcrl
[ -x "$HPCRL" ] || { echo "$HPCRL not built" >&2; exit 2; }
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} OMP_WAIT_POLICY=PASSIVE
WORK=$(mktemp -d "${TMPDIR:-/tmp}/bench_tools.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
cd "$ROOT"

# The same pipeline without tools: no calls in the SFT targets (the boxed answer
# alone), no tools section, no stage's tools (each stage's line before them
# closes the stage instead).
PLAIN=$WORK/quickstart-plain.yaml
awk '
  function flush() { if (have) print prev; have = 0 }
  /^tools:/ { flush(); section = 1; next }
  section && /^  [A-Za-z]/ { next }
  section { section = 0 }
  /^ +tools: \{use:/ { sub(/,[ \t]*$/, "}", prev); dropping = ($0 !~ /\}\}[ \t]*$/); next }
  dropping { dropping = ($0 !~ /\}\}[ \t]*$/); next }
  /^ +calls: \{open:/ { sub(/,[ \t]*$/, "}}", prev); next }
  { flush(); prev = $0; have = 1 }
  END { flush() }
' configs/quickstart-tools.yaml | sed 's/name: quickstart-tools/name: quickstart-plain/' > "$PLAIN"
"$HPCRL" validate "$PLAIN" > /dev/null
if grep -v '^ *#' "$PLAIN" | grep -q 'tools:\|calls:'; then echo "the plain variant still has tools:" >&2; cat "$PLAIN" >&2; exit 1; fi

SETS=()
[ -n "$SFT_STEPS" ] && SETS+=(--set "stages[0].sft.steps=$SFT_STEPS")
[ -n "$ITERS" ] && SETS+=(--set "stages[1].grpo.iterations=$ITERS")

# eval/accuracy of the GRPO stage's evaluations in RUN_DIR, in order.
accuracies() { grep '"stage":"grpo"' "$1/metrics.jsonl" | grep -o '"eval/accuracy":[0-9.e+-]*' | cut -d: -f2; }

printf '| seed | with tools: SFT steps | after SFT | after GRPO | calls/trajectory (last iteration) | without tools: SFT steps | after SFT | after GRPO | GRPO s (tools / without) |\n'
printf '|---|--:|--:|--:|--:|--:|--:|--:|--:|\n'
for seed in $SEEDS; do
  for variant in tools plain; do
    cfg=configs/quickstart-tools.yaml
    [ "$variant" = plain ] && cfg=$PLAIN
    "$HPCRL" run "$cfg" --set run.seed="$seed" "${SETS[@]}" --out "$WORK/$variant-$seed" > "$WORK/$variant-$seed.log" 2>&1 ||
      { echo "seed $seed $variant failed:" >&2; tail -20 "$WORK/$variant-$seed.log" >&2; exit 1; }
  done
  t=($(accuracies "$WORK/tools-$seed")); p=($(accuracies "$WORK/plain-$seed"))
  calls=$(grep '"stage":"grpo"' "$WORK/tools-$seed/metrics.jsonl" | grep -o '"tools/calls":[0-9.e+-]*' | tail -1 | cut -d: -f2)
  secs() { grep '"stage":"grpo"' "$1/metrics.jsonl" | grep -o '"seconds/iteration":[0-9.e+-]*' | cut -d: -f2 | awk '{ s += $1 } END { printf "%.0f", s }'; }
  sft_steps() { grep '"stage":"sft"' "$1/metrics.jsonl" | grep '"loss"' | tail -1 | grep -o '"step":[0-9]*' | cut -d: -f2; }
  printf '| %s | %s | %.3f | %.3f | %.2f | %s | %.3f | %.3f | %s / %s |\n' "$seed" "$(sft_steps "$WORK/tools-$seed")" \
    "${t[0]}" "${t[${#t[@]}-1]}" "${calls:-0}" "$(sft_steps "$WORK/plain-$seed")" "${p[0]}" "${p[${#p[@]}-1]}" \
    "$(secs "$WORK/tools-$seed")" "$(secs "$WORK/plain-$seed")"
done
if [ -n "$KEEP" ]; then mkdir -p "$KEEP" && cp -r "$WORK"/. "$KEEP"/; fi
