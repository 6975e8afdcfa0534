#!/bin/bash
# The RL objectives side by side on the quickstart task (README "What the
# quickstart does today"): for each seed, the quickstart's SFT stage once, then
# its GRPO stage from that policy with each advantage estimator / policy loss
# at the same compute (80 iterations × 32 prompts × 8 samples, the same tokens
# and lr), with mini_batch 64 so that each batch makes 4 optimizer steps and
# the surrogates differ (with one step per batch every ratio is 1 and CISPO's
# and GSPO's updates are GRPO's). Prints held-out greedy accuracy after SFT and
# after each objective, and the gain. Two runs at a time, one thread each (the
# runs are deterministic, so sharing the machine changes only their wall time).
#   benchmarks/rl/compare_objectives.sh [--build DIR] [--seeds "1 2 3"] [--objectives "grpo rloo ..."] [--keep DIR]
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$ROOT/build
SEEDS="1 2 3"
OBJECTIVES="grpo rloo reinforce_pp reinforce_pp_baseline gspo cispo"
KEEP=""
while [ $# -gt 0 ]; do
  case $1 in
    --build) BUILD=$2; shift 2 ;;
    --seeds) SEEDS=$2; shift 2 ;;
    --objectives) OBJECTIVES=$2; shift 2 ;;
    --keep) KEEP=$2; shift 2 ;;
    *) echo "usage: $0 [--build DIR] [--seeds \"1 2 3\"] [--objectives \"grpo rloo ...\"] [--keep DIR]" >&2; exit 2 ;;
  esac
done
HPCRL=$BUILD/hpcrl
[ -x "$HPCRL" ] || { echo "$HPCRL not built (scripts/build.sh --target hpcrl)" >&2; exit 2; }
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE
WORK=${KEEP:-$(mktemp -d "${TMPDIR:-/tmp}/compare_objectives.XXXXXX")}
mkdir -p "$WORK"
[ -n "$KEEP" ] || trap 'rm -rf "$WORK"' EXIT
cd "$ROOT"

# The --set flags of each objective (beside the quickstart's GRPO stage). REINFORCE++
# shapes every token's reward with the KL (its definition), so its KL goes in the reward.
objective_sets() {
  case $1 in
    grpo) ;;
    rloo) echo "--set stages[0].grpo.advantage=rloo" ;;
    reinforce_pp) echo "--set stages[0].grpo.advantage=reinforce_pp --set stages[0].grpo.kl.in_reward=true" ;;
    reinforce_pp_baseline) echo "--set stages[0].grpo.advantage=reinforce_pp_baseline --set stages[0].grpo.kl.in_reward=true" ;;
    gspo) echo "--set stages[0].grpo.policy_loss=gspo" ;;
    cispo) echo "--set stages[0].grpo.policy_loss=cispo" ;;
    *) echo "unknown objective $1" >&2; exit 2 ;;
  esac
}

SFT='[{sft: {model: policy, data: arith, steps: 300, batch: 64, lr: 1.0e-3, warmup: 20, schedule: cosine,
       min_lr_ratio: 0.1, weight_decay: 0.01, eval_every: 10, stop_at_accuracy: 0.4}}]'
sft_and_grpo_config() {  # seed → $WORK/grpo-$seed.yaml: the quickstart's GRPO stage on the seed's SFT policy
  local seed=$1 sft=$WORK/sft-$1
  [ -d "$sft/checkpoints" ] || "$HPCRL" --log-level warn run configs/quickstart.yaml --set run.seed="$seed" \
    --set "stages=$SFT" --out "$sft" > "$sft.log" 2>&1 || { echo "SFT failed (seed $seed):" >&2; tail -20 "$sft.log" >&2; exit 1; }
  local policy
  policy=$(ls -d "$sft"/checkpoints/00-sft/step-*/policy | tail -1)
  sed -e "/^stages:/,\$d" -e "/^  student:/d" -e "s|policy:    {init: {preset: tiny}}.*|policy:    {init: {path: $policy}, tokenizer: byte}|" \
      -e "s|name: quickstart|name: compare-objectives|" configs/quickstart.yaml > "$WORK/grpo-$seed.yaml"
  sed -n "/^  - grpo:/,/^  - distill:/p" configs/quickstart.yaml | sed '$d' | sed '1s/^/stages:\n/' >> "$WORK/grpo-$seed.yaml"
  printf 'trace: {chrome: false, metrics: true, comm: false}\n' >> "$WORK/grpo-$seed.yaml"
}

run_objective() {  # seed objective
  local run=$WORK/$2-$1
  [ -f "$run/metrics.jsonl" ] && grep -q '"stage":"grpo","stage_index":0,"step":80,' "$run/metrics.jsonl" && return 0
  # shellcheck disable=SC2046
  "$HPCRL" --log-level warn run "$WORK/grpo-$1.yaml" --set run.seed="$1" --set stages[0].grpo.mini_batch=64 \
    $(objective_sets "$2") --force --out "$run" > "$run.log" 2>&1 || { echo "$2 failed (seed $1):" >&2; tail -20 "$run.log" >&2; return 1; }
}

for seed in $SEEDS; do sft_and_grpo_config "$seed" & done
wait
jobs_list=()
for seed in $SEEDS; do for o in $OBJECTIVES; do jobs_list+=("$seed $o"); done; done
for ((i = 0; i < ${#jobs_list[@]}; i += 2)); do
  run_objective ${jobs_list[i]} &
  [ $((i + 1)) -lt ${#jobs_list[@]} ] && run_objective ${jobs_list[i + 1]} &
  wait
done

python3 - "$WORK" "$SEEDS" "$OBJECTIVES" <<'PY'
import json, sys
work, seeds, objectives = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
def evals(path):
    out = []
    for line in open(path):
        j = json.loads(line)
        if j.get("stage") == "grpo" and "eval/accuracy" in j: out.append((j["step"], 100 * j["eval/accuracy"], j.get("seconds/iteration")))
    return out
def seconds(path):
    s = 0.0
    for line in open(path):
        j = json.loads(line)
        if j.get("stage") == "grpo" and "seconds/iteration" in j: s += j["seconds/iteration"]
    return s
print("| objective | " + " | ".join(f"seed {s}: after SFT → after RL (gain)" for s in seeds) + " | mean gain | GRPO-stage seconds (mean) |")
print("|---|" + "---|" * len(seeds) + "--:|--:|")
for o in objectives:
    cells, gains, secs = [], [], []
    for s in seeds:
        e = evals(f"{work}/{o}-{s}/metrics.jsonl")
        before, after = e[0][1], e[-1][1]
        gains.append(after - before)
        secs.append(seconds(f"{work}/{o}-{s}/metrics.jsonl"))
        cells.append(f"{before:.1f} → {after:.1f} ({after - before:+.1f})")
    print(f"| {o} | " + " | ".join(cells) + f" | {sum(gains) / len(gains):+.1f} | {sum(secs) / len(secs):.0f} |")
PY
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
