#!/bin/bash
# Which phase sets each rank's peak memory: the training steps or the final
# checkpoint write. Runs the SFT of bench_memory.sh at dp 2 with one --set,
# samples every rank's resident set (VmRSS) every 0.1 s, and splits the samples
# at the moment the checkpoint's `.partial` directory appears (the writer, rank
# 0, starts writing) — an allocation-timing view that a VmHWM peak cannot give.
#   benchmarks/train/rss_during_checkpoint.sh [--build DIR] [--preset base-100m] [--set KEY=VALUE]
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$ROOT/build
PRESET=base-100m
SET="models.policy.optim.zero=1"
while [ $# -gt 0 ]; do
  case $1 in
    --build) BUILD=$2; shift 2 ;;
    --preset) PRESET=$2; shift 2 ;;
    --set) SET=$2; shift 2 ;;
    *) echo "usage: $0 [--build DIR] [--preset P] [--set KEY=VALUE]" >&2; exit 2 ;;
  esac
done
HPCRL=$BUILD/hpcrl
[ -x "$HPCRL" ] || { echo "$HPCRL not built (scripts/build.sh --target hpcrl)" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE
WORK=$(mktemp -d "${TMPDIR:-/tmp}/rss_checkpoint.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

"$ROOT/benchmarks/train/fixed_rows.sh" "$WORK/rows.jsonl" 32 64 192
cat > "$WORK/sft.yaml" <<YAML
run: {name: rss-checkpoint, seed: 1, device: cpu, dtype: float32, eval_before_train: false}
models:
  policy: {init: {preset: $PRESET}}
data:
  fixed: {jsonl: {path: $WORK/rows.jsonl, answer_marker: "", max_prompt_len: 64, max_response_len: 192},
          shuffle: false}
stages:
  - sft: {model: policy, data: fixed, steps: 4, batch: 8, micro_batch: 2, lr: 1.0e-4, warmup: 0}
YAML
OUT=$WORK/run
mpirun -np 2 --oversubscribe --bind-to none -x OMP_NUM_THREADS -x OMP_WAIT_POLICY \
  "$HPCRL" --log-level warn run "$WORK/sft.yaml" --set "$SET" --out "$OUT" > "$WORK/log" 2>&1 &
launcher=$!
phase=train
: > "$WORK/samples"
while kill -0 "$launcher" 2>/dev/null; do
  ls -d "$OUT"/checkpoints/*/*.partial > /dev/null 2>&1 && phase=checkpoint
  for pid in $(pgrep -f "hpcrl --log-level warn run $WORK/sft.yaml" || true); do
    [ "$pid" = "$launcher" ] && continue
    rank=$(tr '\0' '\n' < "/proc/$pid/environ" 2>/dev/null | sed -n 's/^OMPI_COMM_WORLD_RANK=//p') || continue
    rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status" 2>/dev/null) || continue
    [ -n "$rank" ] && [ -n "$rss" ] && echo "$phase $rank $rss" >> "$WORK/samples"
  done
  sleep 0.1
done
wait "$launcher" || { echo "hpcrl run failed:" >&2; tail -20 "$WORK/log" >&2; exit 1; }
echo "SFT $PRESET at dp 2 with $SET: peak VmRSS (MiB) by rank and phase (rank 0 writes the checkpoint)"
echo
echo "| rank | training steps | final checkpoint write |"
echo "|---|---:|---:|"
python3 - "$WORK/samples" <<'PY'
import collections, sys
peak = collections.defaultdict(int)
for line in open(sys.argv[1]):
    phase, rank, rss = line.split()
    peak[(int(rank), phase)] = max(peak[(int(rank), phase)], int(rss))
for r in sorted({k[0] for k in peak}):
    print(f"| {r} | {peak[(r, 'train')]/1024:.0f} | {peak[(r, 'checkpoint')]/1024:.0f} |")
PY
