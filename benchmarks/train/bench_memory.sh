#!/bin/bash
# Per-rank peak memory and step time of SFT at dp 2 with plain AdamW, ZeRO-1,
# ZeRO-2, ZeRO-3 (optim.zero 0/1/2/3) and LoRA (rank 16 on every projection), through the
# real `hpcrl run`, beside `hpcrl plan`'s per-rank estimate of the same run
# (docs/zero.md, docs/lora.md).
#
# Two peaks per rank:
# - peak RSS: VmHWM (/proc/PID/status), polled every 0.2 s while the run lasts:
#   what the machine must have. It includes what the plan does not count (the
#   LibTorch and MPI libraries' pages, and freed blocks glibc keeps in its heap
#   instead of returning them), so it is compared as differences between settings;
# - peak heap: the most bytes the rank had allocated through malloc at once
#   (benchmarks/train/peak_heap.c, preloaded), the CPU counterpart of
#   cudaMaxMemoryAllocated. It counts what the plan counts, plus the ~40 MiB the
#   process holds before it builds the model, so it is compared with the plan's
#   total directly.
# Step time is the median `seconds/step` of the steps after the first
# (metrics.jsonl), a ratio against the first setting measured in the same
# invocation (the machine is shared).
#   benchmarks/train/bench_memory.sh [--build DIR] [--preset base-100m] [--steps 4] [--batch 8] [--micro 2] [--seq 256]
#       [--settings 0,1,2,3,4]   (which of: 0 plain, 1 ZeRO-1, 2 ZeRO-2, 3 LoRA, 4 ZeRO-3; ratios are against the first listed)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$ROOT/build
PRESET=base-100m
STEPS=4
BATCH=8
MICRO=2
SEQ=256
SETTINGS=0,1,2,3,4
while [ $# -gt 0 ]; do
  case $1 in
    --build) BUILD=$2; shift 2 ;;
    --preset) PRESET=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --batch) BATCH=$2; shift 2 ;;
    --micro) MICRO=$2; shift 2 ;;
    --seq) SEQ=$2; shift 2 ;;
    --settings) SETTINGS=$2; shift 2 ;;
    *) echo "usage: $0 [--build DIR] [--preset P] [--steps N] [--batch B] [--micro M] [--seq T] [--settings 0,1,2,3,4]" >&2
       exit 2 ;;
  esac
done
HPCRL=$BUILD/hpcrl
[ -x "$HPCRL" ] || { echo "$HPCRL not built (scripts/build.sh --target hpcrl)" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE
WORK=$(mktemp -d "${TMPDIR:-/tmp}/bench_memory.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
cc -O2 -shared -fPIC -pthread -o "$WORK/peak_heap.so" "$ROOT/benchmarks/train/peak_heap.c"

# Rows of SEQ tokens: a prompt of SEQ/4 tokens and a response of the rest.
"$ROOT/benchmarks/train/fixed_rows.sh" "$WORK/rows.jsonl" $((BATCH * STEPS)) $((SEQ / 4)) $((SEQ - SEQ / 4))
cat > "$WORK/sft.yaml" <<YAML
run: {name: bench-memory, seed: 1, device: cpu, dtype: float32, eval_before_train: false}
models:
  policy: {init: {preset: $PRESET}}
data:
  fixed: {jsonl: {path: $WORK/rows.jsonl, answer_marker: "", max_prompt_len: $((SEQ / 4)),
                  max_response_len: $((SEQ - SEQ / 4))}, shuffle: false}
stages:
  - sft: {model: policy, data: fixed, steps: $STEPS, batch: $BATCH, micro_batch: $MICRO, lr: 1.0e-4, warmup: 0}
YAML

# The settings compared, each a label and the --set that makes it.
LABELS=("plain" "zero 1" "zero 2" "lora r16" "zero 3")
SETS=("models.policy.optim.zero=0" "models.policy.optim.zero=1" "models.policy.optim.zero=2"
      "models.policy.lora={rank: 16, alpha: 32, targets: [q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj]}"
      "models.policy.optim.zero=3")

# Prints "rss_max_rank_kib rss_other_rank_kib heap_max_rank_bytes heap_other_rank_bytes median_step_s"
# for setting $1 (an index into SETS).
measure() {
  local out=$WORK/setting$1
  mkdir -p "$out.heap"
  mpirun -np 2 --oversubscribe --bind-to none -x OMP_NUM_THREADS -x OMP_WAIT_POLICY \
    -x LD_PRELOAD="$WORK/peak_heap.so" -x HPCRL_PEAK_HEAP_DIR="$out.heap" \
    "$HPCRL" --log-level warn run "$WORK/sft.yaml" --set "${SETS[$1]}" --out "$out" \
    > "$out.log" 2>&1 &
  local launcher=$! peaks=()
  declare -A peak
  while kill -0 "$launcher" 2>/dev/null; do
    for pid in $(pgrep -f "hpcrl --log-level warn run $WORK/sft.yaml .* --out $out\$" || true); do
      [ "$pid" = "$launcher" ] && continue
      local hwm
      hwm=$(awk '/^VmHWM:/ {print $2}' "/proc/$pid/status" 2>/dev/null) || continue
      [ -n "$hwm" ] && { [ -z "${peak[$pid]:-}" ] || [ "$hwm" -gt "${peak[$pid]}" ]; } && peak[$pid]=$hwm
    done
    sleep 0.2
  done
  wait "$launcher" || { echo "hpcrl run failed (${LABELS[$1]}):" >&2; tail -20 "$out.log" >&2; exit 1; }
  for pid in "${!peak[@]}"; do peaks+=("${peak[$pid]}"); done
  [ ${#peaks[@]} -eq 2 ] || { echo "saw ${#peaks[@]} rank processes, expected 2" >&2; exit 1; }
  local step
  step=$(python3 - "$out/metrics.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"seconds/step"' in l]
print(statistics.median([r["seconds/step"] for r in rows[1:]] or [rows[0]["seconds/step"]]))
PY
)
  local heaps
  heaps=$(cat "$out".heap/heap-[0-9]*.txt | cut -d' ' -f1 | sort -n)
  [ "$(echo "$heaps" | wc -l)" -eq 2 ] || { echo "expected 2 ranks' heap peaks in $out.heap" >&2; exit 1; }
  printf '%s %s %s %s %s\n' "$(printf '%s\n' "${peaks[@]}" | sort -n | tail -1)" "$(printf '%s\n' "${peaks[@]}" | sort -n | head -1)" \
    "$(echo "$heaps" | tail -1)" "$(echo "$heaps" | head -1)" "$step"
  rm -rf "$out" "$out.heap"
}

echo "SFT $PRESET at dp 2 (fp32, batch $BATCH, micro-batch $MICRO, $SEQ tokens, $STEPS steps), load $(cut -d' ' -f1 /proc/loadavg)"
echo
IFS=, read -r -a RUN <<< "$SETTINGS"
FIRST=${LABELS[${RUN[0]}]}
echo "| setting | peak RSS, max rank (MiB) | other rank | Δ RSS vs $FIRST | peak heap, max rank (MiB) | other rank | plan total (MiB) | heap / plan | Δ heap vs $FIRST | plan Δ | step (s) | vs $FIRST |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
base_rss=0 base_heap=0 base_step=0 base_plan=0
for i in "${RUN[@]}"; do
  read -r hi lo heap_hi heap_lo step <<< "$(measure "$i")"
  total=$("$HPCRL" plan "$WORK/sft.yaml" --world 2 --json --set "${SETS[$i]}" |
          python3 -c 'import json, sys; print(json.load(sys.stdin)["roles"]["policy"]["memory_bytes"]["total"])')
  [ "$i" = "${RUN[0]}" ] && base_rss=$hi base_heap=$heap_hi base_step=$step base_plan=$total
  python3 - "${LABELS[$i]}" "$hi" "$lo" "$base_rss" "$heap_hi" "$heap_lo" "$base_heap" "$total" "$base_plan" "$step" "$base_step" <<'PY'
import sys
z = sys.argv[1]
hi, lo, brss, hh, hl, bheap, total, bplan = map(int, sys.argv[2:10])
step, bstep = map(float, sys.argv[10:12])
mib = 1024 * 1024
print(f"| {z} | {hi/1024:.0f} | {lo/1024:.0f} | {(hi-brss)/1024:+.0f} | {hh/mib:.0f} | {hl/mib:.0f} | {total/mib:.0f} | "
      f"{hh/total:.2f} | {(hh-bheap)/mib:+.0f} | {(total-bplan)/mib:+.0f} | {step:.2f} | {step/bstep:.2f}x |")
PY
done
