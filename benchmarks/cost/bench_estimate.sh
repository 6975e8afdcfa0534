#!/usr/bin/env bash
# How close `hpcrl plan --estimate` comes to what runs measure on this machine.
#
#   benchmarks/cost/bench_estimate.sh [--out DIR]
#
# 1. `hpcrl calibrate` with one rank (DIR/cpu-1.yaml) and under mpirun -np 2 (DIR/cpu-2.yaml), one
#    thread per rank as the runs: two busy ranks share this machine's two cores and memory, so each
#    run is estimated with the profile of its rank count.
# 2. Runs, each measured as the mean seconds per step/iteration after the first:
#    quickstart (SFT 30 steps, GRPO 6 iterations, distillation 20 steps) on 1 rank; its SFT at dp = 2;
#    a base-100m GRPO (4 prompts × 4, 16 new tokens, 3 iterations) on 1 rank.
# 3. The estimate of each (lengths from the run's own metrics: --from-run) with the calibrated
#    profile, and with the compute efficiencies scaled by one factor fitted on the quickstart's
#    SFT stage alone (DIR/cpu-N-fitted.yaml): the other rows are held out from that fit.
# Prints one table: stage, measured, predicted (calibrated), predicted (fitted), ratios.
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
out=/tmp/hpcrl-bench-estimate
while [ $# -gt 0 ]; do case $1 in --out) out=$2; shift 2;; *) echo "unknown option $1" >&2; exit 2;; esac; done
bin=$here/build/hpcrl
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE OMPI_MCA_mpi_yield_when_idle=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
rm -rf "$out"; mkdir -p "$out"
cd "$here"
for np in 1 2; do
  mpirun -np $np --oversubscribe "$bin" calibrate --name cpu-$np --out "$out/cpu-$np.yaml" > "$out/calibrate-$np.log"
done

# One line each: the run list below splits its entries with `read`.
SFT="--set stages[0].sft.steps=30 --set stages[0].sft.stop_at_accuracy=0 --set stages[0].sft.eval_every=0"
Q="$SFT --set stages[1].grpo.iterations=6 --set stages[2].distill.steps=20 --set run.eval_before_train=false"
Q="$Q --set run.eval_sampling.prompts=16"
SFT2="$SFT --set stages[1].grpo.iterations=1 --set stages[2].distill.steps=1 --set run.eval_before_train=false"
SFT2="$SFT2 --set run.eval_sampling.prompts=16"
BIG="--set models.policy.init.preset=base-100m --set stages[0].grpo.prompts=4 --set stages[0].grpo.group=4"
BIG="$BIG --set stages[0].grpo.max_new_tokens=16 --set stages[0].grpo.iterations=3 --set stages[0].grpo.micro_batch=16"
# name | config | overrides | ranks
runs=("quickstart|configs/quickstart.yaml|$Q|1" "sft-dp2|configs/quickstart.yaml|$SFT2|2"
      "base100m-grpo|tests/e2e/data/grpo_judge.yaml|$BIG|1")
for r in "${runs[@]}"; do
  IFS='|' read -r name cfg sets np <<< "$r"
  # shellcheck disable=SC2086
  mpirun -np "$np" --oversubscribe "$bin" run "$cfg" $sets --out "$out/$name" > "$out/$name.log" 2>&1
  for prof in cpu cpu-fitted; do
    file=$out/cpu-$np.yaml
    [ "$prof" = cpu-fitted ] && file=$out/cpu-$np-fitted.yaml
    [ -f "$file" ] || continue
    # shellcheck disable=SC2086
    "$bin" plan "$cfg" $sets --world "$np" --estimate --hardware "$file" --from-run "$out/$name" --json \
      > "$out/$name.$prof.json"
  done
  if [ "$name" = quickstart ]; then  # fit the compute efficiency on this run's SFT stage
    python3 - "$out" <<'PY'
import json, sys, re
out = sys.argv[1]
m = [json.loads(l) for l in open(f"{out}/quickstart/metrics.jsonl")]
sft = [j["seconds/step"] for j in m if j["stage"] == "sft" and "seconds/step" in j][1:]
measured = sum(sft) / len(sft)
est = json.load(open(f"{out}/quickstart.cpu.json"))["estimate"]["stages"][0]
compute = sum(s["compute_s"] for s in est["spans"])
rest = est["seconds"] - compute
factor = compute / max(1e-9, measured - rest)  # the compute seconds the run needed over the predicted ones
for np in (1, 2):
    text = open(f"{out}/cpu-{np}.yaml").read()
    eff = float(re.search(r"compute: \{peak_flops: [^,]+, efficiency: ([0-9.e+-]+)", text).group(1))
    text = re.sub(r"(compute: \{peak_flops: [^,]+, efficiency: )[0-9.e+-]+",
                  lambda g: g.group(1) + f"{min(1.0, eff * factor):.6g}", text, count=1)
    open(f"{out}/cpu-{np}-fitted.yaml", "w").write(
        f"# compute efficiency × {factor:.4f}, fitted on the quickstart's SFT stage (bench_estimate.sh)\n" +
        text.replace(f"name: cpu-{np}", f"name: cpu-{np}-fitted"))
PY
    # shellcheck disable=SC2086
    "$bin" plan "$cfg" $sets --world "$np" --estimate --hardware "$out/cpu-$np-fitted.yaml" --from-run "$out/$name" \
      --json > "$out/$name.cpu-fitted.json"
  fi
done

python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
print("| run | stage | ranks | measured s | predicted (calibrated) | ratio | predicted (fitted on quickstart sft) | ratio |")
print("|---|---|--:|--:|--:|--:|--:|--:|")
for name, np, stages in [("quickstart", 1, None), ("sft-dp2", 2, ["sft"]), ("base100m-grpo", 1, None)]:
    m = [json.loads(l) for l in open(f"{out}/{name}/metrics.jsonl")]
    cal = json.load(open(f"{out}/{name}.cpu.json"))["estimate"]["stages"]
    fit = json.load(open(f"{out}/{name}.cpu-fitted.json"))["estimate"]["stages"]
    for i, (c, f) in enumerate(zip(cal, fit)):
        if stages and c["stage"] not in stages: continue
        key = "seconds/iteration" if c["unit"] == "iteration" else "seconds/step"
        xs = [j[key] for j in m if j.get("stage_index") == i and key in j][1:]
        if not xs: continue
        meas = sum(xs) / len(xs)
        note = " (fit)" if name == "quickstart" and c["stage"] == "sft" else ""
        print(f"| {name} | {c['stage']}{note} | {np} | {meas:.3f} | {c['seconds']:.3f} | {c['seconds']/meas:.2f} | {f['seconds']:.3f} | {f['seconds']/meas:.2f} |")
PY
