#!/usr/bin/env bash
# `hpcrl report` on a real run: the SFT → GRPO → distillation pipeline of
# tests/e2e/data/tiny.yaml, shortened (20 SFT steps, 4 GRPO iterations, 10
# distillation steps, an evaluation every few steps: about 6 s on one core).
# The page must hold the learning curves of all three stages and the last
# evaluation's samples; the same run overlaid with a copy of itself must name
# both runs; and headless Chromium must draw the single-run page
# (report_render_check.sh, the whole page in a 1200x5600 window: a PNG that
# is not blank).
#
#   tests/trace/report_real_run_check.sh HPCRL SCRATCH_DIR
#
# Run from the repository root. Exit 77 (CTest: skipped) where no chromium is
# installed, checked first so no run is wasted.
set -euo pipefail

hpcrl=${1:?usage: report_real_run_check.sh HPCRL SCRATCH_DIR}
scratch=${2:?usage: report_real_run_check.sh HPCRL SCRATCH_DIR}
here=$(cd "$(dirname "$0")" && pwd)
if ! command -v chromium >/dev/null && ! command -v chromium-browser >/dev/null && ! command -v google-chrome >/dev/null; then
  echo "report_real_run_check: no chromium found; skipped (apt-get install -y chromium)" >&2
  exit 77
fi
fail() { echo "report_real_run_check: $*" >&2; exit 1; }

rm -rf "$scratch"
mkdir -p "$scratch"
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE
"$hpcrl" run tests/e2e/data/tiny.yaml --out "$scratch/run" --set 'stages[0].sft.steps=20' \
  --set 'stages[0].sft.eval_every=5' --set 'stages[1].grpo.iterations=4' --set 'stages[1].grpo.eval_every=2' \
  --set 'stages[2].distill.steps=10' --set 'stages[2].distill.eval_every=5' >"$scratch/run.log" 2>&1 ||
  { tail -30 "$scratch/run.log"; fail "hpcrl run failed (log above)"; }

page=$scratch/report.html
"$hpcrl" report "$scratch/run" --out "$page" >/dev/null
# Each stage kind's curves: SFT loss and held-out accuracy, GRPO reward and KL, the distillation loss.
for id in curve-s0-loss curve-s0-eval-accuracy curve-s1-reward-mean curve-s1-kl curve-s2-loss; do
  grep -q "<svg id=\"$id\"" "$page" || fail "$page has no chart $id"
done
# 20 SFT steps: 20 dots on the loss chart, one per metrics.jsonl line with a loss.
dots=$(sed -n '/<svg id="curve-s0-loss"/,/<\/svg>/p' "$page" | grep -c '<circle') || true
[[ $dots == 20 ]] || fail "curve-s0-loss has $dots dots, not the 20 SFT steps"
# eval_samples.jsonl: the distillation's evaluation at its last step, 10, is the run's last.
grep -q 'The last evaluation: stage 2 (distill), step 10' "$page" || fail "$page does not show the last evaluation's samples"

cp -r "$scratch/run" "$scratch/copy"
"$hpcrl" report "$scratch/run" "$scratch/copy" --out "$scratch/overlay.html" >/dev/null
for run in run copy; do
  grep -q "data-run=\"$run\"" "$scratch/overlay.html" || fail "the overlay has no series named $run"
done

WINDOW_HEIGHT=5600 bash "$here/report_render_check.sh" "$page" "$scratch/report.png"
