#!/bin/bash
# SFT throughput on CPU, end to end through the real `hpcrl run`: tokens/s and
# model-FLOPs utilisation (MFU) of the `tiny` and `base-100m` presets at dp=1
# (one process, --threads N OpenMP threads, default 2) and dp=2 (mpirun -np 2,
# 1 thread per rank), and the share of a step spent in gradient synchronisation
# (docs/benchmarks.md).
#
# The machine is shared and its speed moves with the load, so the baseline is
# measured around every run: bench_gemm (fp32 matmul, same thread count and
# process layout as the run: two 1-thread copies under the same mpirun for
# dp=2) just before and just after it. MFU = the run's model FLOP/s / the mean
# of the two; a large before/after gap means the load changed during the run.
#
# Each run trains on generated rows of one fixed length (so a step processes
# exactly batch·seq tokens, checked against the trainer's loss-token count),
# the first steps of each case are warm-up (`skip` in CASES), and the run directory is removed after
# its row is printed (a 100M checkpoint is 1.2 GB).
#   benchmarks/train/bench_sft.sh [--build DIR] [--hpcrl BIN] [--only tiny|base-100m] [--dp 1|2] [--threads N] [--keep DIR]
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$ROOT/build
HPCRL=""
ONLY=""
DPS="1 2"
KEEP=""
THREADS=2  # OpenMP threads of the dp=1 run (dp=2 runs use 1 per rank)
while [ $# -gt 0 ]; do
  case $1 in
    --build) BUILD=$2; shift 2 ;;
    --hpcrl) HPCRL=$2; shift 2 ;;
    --only) ONLY=$2; shift 2 ;;
    --dp) DPS=$2; shift 2 ;;
    --keep) KEEP=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    *) echo "usage: $0 [--build DIR] [--hpcrl BIN] [--only tiny|base-100m] [--dp 1|2] [--threads N] [--keep DIR]" >&2; exit 2 ;;
  esac
done
HPCRL=${HPCRL:-$BUILD/hpcrl}
GEMM=$BUILD/benchmarks/train/bench_gemm
REPORT=$BUILD/benchmarks/train/bench_sft_report
for exe in "$HPCRL" "$GEMM" "$REPORT"; do
  [ -x "$exe" ] || { echo "$exe not built (cmake -DHPCRL_BUILD_BENCHMARKS=ON; build hpcrl bench_gemm bench_sft_report)" >&2; exit 2; }
done
[ "$(id -u)" -eq 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
WORK=$(mktemp -d "${TMPDIR:-/tmp}/bench_sft.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

# A JSONL file of `rows` rows of P + R tokens (benchmarks/train/fixed_rows.sh).
make_data() {  # path rows P R
  "$ROOT/benchmarks/train/fixed_rows.sh" "$@"
}

# The GEMM baseline with the run's layout: prints "square_flops shape_flops" (summed over ranks).
gemm() {  # dp M K N
  local out
  if [ "$1" -eq 1 ]; then
    out=$(OMP_NUM_THREADS=$THREADS "$GEMM" --shape "$2" "$3" "$4")
  else
    out=$(OMP_NUM_THREADS=1 mpirun -np "$1" --oversubscribe --bind-to none -x OMP_NUM_THREADS "$GEMM" --shape "$2" "$3" "$4")
  fi
  echo "$out" | awk '{ sq += $2; sh += $4 } END { printf "%.6e %.6e\n", sq, sh }'
}

# preset seq prompt_tokens batch steps skip
CASES=(
  "tiny 128 32 16 12 2"
  "base-100m 256 64 4 3 1"
)
"$REPORT" --header
for c in "${CASES[@]}"; do
  read -r preset seq prompt batch steps skip <<< "$c"
  [ -n "$ONLY" ] && [ "$ONLY" != "$preset" ] && continue
  response=$((seq - prompt))
  data=$WORK/$preset.jsonl
  make_data "$data" $((batch * steps)) "$prompt" "$response"
  # The MLP up-projection [tokens/rank, hidden] x [hidden, ffn] (src/config/model_arch.cpp presets).
  case $preset in tiny) hidden=128 ffn=384 ;; base-100m) hidden=768 ffn=2048 ;; esac
  cat > "$WORK/$preset.yaml" <<EOF
run: {name: bench-sft, seed: 1, device: cpu, dtype: float32, eval_before_train: false}
models:
  policy: {init: {preset: $preset}}
data:
  fixed: {jsonl: {path: $data, answer_marker: ""}, shuffle: false}
stages:
  - sft: {model: policy, data: fixed, steps: $steps, batch: $batch, lr: 1.0e-4, warmup: 0}
trace: {chrome: true, metrics: true, comm: true}
EOF
  for dp in $DPS; do
    run=$WORK/$preset-dp$dp
    read -r g0 s0 <<< "$(gemm "$dp" $((batch / dp * seq)) "$hidden" "$ffn")"
    if [ "$dp" -eq 1 ]; then
      OMP_NUM_THREADS=$THREADS "$HPCRL" --log-level warn run "$WORK/$preset.yaml" --out "$run" > "$run.log" 2>&1
    else
      OMP_NUM_THREADS=1 mpirun -np "$dp" --oversubscribe --bind-to none -x OMP_NUM_THREADS \
        "$HPCRL" --log-level warn run "$WORK/$preset.yaml" --out "$run" > "$run.log" 2>&1
    fi || { echo "hpcrl run failed ($preset, dp=$dp):" >&2; tail -20 "$run.log" >&2; exit 1; }
    read -r g1 s1 <<< "$(gemm "$dp" $((batch / dp * seq)) "$hidden" "$ffn")"
    "$REPORT" "$run" --preset "$preset" --seq "$seq" --response-tokens "$response" --batch "$batch" --dp "$dp" \
      --threads "$([ "$dp" -eq 1 ] && echo "$THREADS" || echo 1)" --skip "$skip" --gemm "$g0" "$g1" --gemm-shape "$s0" "$s1"
    if [ -n "$KEEP" ]; then
      mkdir -p "$KEEP" && rm -rf "$run/checkpoints" && cp -r "$run" "$KEEP/"
    fi
    rm -rf "$run"
  done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
