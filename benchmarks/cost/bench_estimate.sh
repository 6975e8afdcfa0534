#!/usr/bin/env bash
# How close `hpcrl plan --estimate` comes to what runs measure on this machine, per stage and span.
#
#   benchmarks/cost/bench_estimate.sh [--out DIR] [--reuse]
#
# 1. `hpcrl calibrate` with one rank (DIR/cpu-1.yaml) and under mpirun -np 2 (DIR/cpu-2.yaml), one
#    thread per rank as the runs: two busy ranks share this machine's two cores and memory, so each
#    run is estimated with the profile of its rank count.
# 2. Runs over three model sizes (tiny d=128, small-25m d=512, base-100m d=768):
#      quickstart      tiny: SFT 30 steps, GRPO 6 iterations, distillation 20 steps (1 rank)
#      sft-dp2         tiny: the quickstart's SFT at dp = 2
#      small-sft       small-25m: SFT 10 steps of 16 rows (1 rank)
#      small-sft-dp2   the same at dp = 2
#      base100m-grpo   base-100m: GRPO 4 prompts x 4, 16 new tokens, 4 iterations (1 rank)
# 3. Each run beside the estimate: `hpcrl trace summarize RUN --json --estimate PROFILE` (the
#    measured median per step over steps and ranks, the first step left out, against the estimate
#    for the run's own lengths), with the calibrated profile as written and with the profile
#    fitted (fit_profile.py: the matmul rate, element-wise bandwidth and op overhead scaled to
#    fit) on the quickstart's SFT stage and small-sft alone; every other row is held out.
# Prints the tables (estimate_table.py). --reuse keeps DIR's runs and calibration and redoes 3.
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
out=/tmp/hpcrl-bench-estimate
reuse=0
while [ $# -gt 0 ]; do
  case $1 in --out) out=$2; shift 2;; --reuse) reuse=1; shift;; *) echo "unknown option $1" >&2; exit 2;; esac
done
bin=$here/build/hpcrl
py=python3
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE OMPI_MCA_mpi_yield_when_idle=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cd "$here"

# One line each: the run list below splits its entries with `read`.
Q="--set stages[0].sft.steps=30 --set stages[0].sft.stop_at_accuracy=0 --set stages[0].sft.eval_every=0"
Q="$Q --set run.eval_before_train=false --set run.eval_sampling.prompts=16"
Q="$Q --set stages[1].grpo.iterations=6 --set stages[2].distill.steps=20"
SMALL="--set models.policy.init.preset=small-25m --set stages[0].sft.steps=10 --set stages[0].sft.batch=16"
BIG="--set models.policy.init.preset=base-100m --set stages[0].grpo.prompts=4 --set stages[0].grpo.group=4"
BIG="$BIG --set stages[0].grpo.max_new_tokens=16 --set stages[0].grpo.iterations=4 --set stages[0].grpo.micro_batch=16"
BIG="$BIG --set run.eval_before_train=false"
SFT=benchmarks/cost/quickstart-sft.yaml
# name | config | overrides | ranks
runs=("quickstart|configs/quickstart.yaml|$Q|1"
      "sft-dp2|$SFT||2"
      "small-sft|$SFT|$SMALL|1"
      "small-sft-dp2|$SFT|$SMALL|2"
      "base100m-grpo|tests/e2e/data/grpo_judge.yaml|$BIG|1")
fit="quickstart@sft,small-sft"

if [ "$reuse" = 0 ]; then
  rm -rf "$out"; mkdir -p "$out"
  for np in 1 2; do
    mpirun -np $np --oversubscribe "$bin" calibrate --name cpu-$np --out "$out/cpu-$np.yaml" > "$out/calibrate-$np.log"
  done
  for r in "${runs[@]}"; do
    IFS='|' read -r name cfg sets np <<< "$r"
    # shellcheck disable=SC2086
    mpirun -np "$np" --oversubscribe "$bin" run "$cfg" $sets --out "$out/$name" > "$out/$name.log" 2>&1
  done
fi

"$py" "$here/benchmarks/cost/fit_profile.py" --hpcrl "$bin" --profile "$out/cpu-1.yaml" \
  --runs "$out/quickstart@sft" "$out/small-sft" --out "$out/cpu-1-fitted.yaml" \
  --also "$out/cpu-2.yaml:$out/cpu-2-fitted.yaml" | tee "$out/fit.log"

table_args=()
for r in "${runs[@]}"; do
  IFS='|' read -r name cfg sets np <<< "$r"
  "$bin" trace summarize "$out/$name" --json --estimate "$out/cpu-$np.yaml" > "$out/$name.calibrated.json" 2>/dev/null
  "$bin" trace summarize "$out/$name" --json --estimate "$out/cpu-$np-fitted.yaml" > "$out/$name.fitted.json" 2>/dev/null
  table_args+=("$name:$np")
done
"$py" "$here/benchmarks/cost/estimate_table.py" "$out" "$fit" "${table_args[@]}" | tee "$out/table.md"
