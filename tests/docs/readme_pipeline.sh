#!/usr/bin/env bash
# The README's minimal pipeline cannot rot: this takes the ```yaml block that
# follows the line `<!-- minimal-pipeline -->` in README.md, checks that
# `hpcrl validate` accepts it for 1 and for 2 ranks (the README runs it both
# ways), runs it on 1 rank shortened with --set, and checks that the run exited
# 0 and wrote one metrics.jsonl line per step and per evaluation.
#   tests/docs/readme_pipeline.sh       (HPCRL: the binary, default build/hpcrl)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HPCRL=${HPCRL:-$ROOT/build/hpcrl}
fail() {
  echo "readme_pipeline: FAILED: $*" >&2
  exit 1
}
[ -x "$HPCRL" ] || fail "no hpcrl binary at $HPCRL (build it: bash scripts/build.sh --target hpcrl)"
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE
cd "$ROOT"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The block: the marker line, then a ```yaml line at once, then YAML up to the next ``` line.
awk '
  m == 0 && $0 == "<!-- minimal-pipeline -->" { m = 1; next }
  m == 1 { if ($0 == "```yaml") { m = 2; next } else exit }
  m == 2 && $0 == "```" { exit }
  m == 2 { print }
' README.md > "$work/minimal.yaml"
[ -s "$work/minimal.yaml" ] ||
  fail "README.md has no \`\`\`yaml block right after a line <!-- minimal-pipeline -->"
echo "readme_pipeline: $(wc -l < "$work/minimal.yaml") lines of YAML from README.md"

"$HPCRL" validate "$work/minimal.yaml" || fail "hpcrl validate rejects the README's pipeline (exit $?)"
"$HPCRL" validate "$work/minimal.yaml" --world 2 ||
  fail "hpcrl validate --world 2 rejects the README's pipeline (exit $?)"

# Shortened: SFT 4 steps, GRPO 2 iterations of 8 prompts, distillation 3 steps, 16 held-out
# problems. Each stage writes one line per step plus two evaluations: before its first step
# (run.eval_before_train defaults to true) and after its last; none in between (SFT's
# eval_every is 10 > 4 steps, so stop_at_accuracy never gets to end it early; the other
# stages' eval_every defaults to 0), and one line of the ranks' peak memory at its end:
# (4 + 2 + 1) + (2 + 2 + 1) + (3 + 2 + 1) = 18 lines.
run=$work/run
"$HPCRL" run "$work/minimal.yaml" --out "$run" \
  --set 'stages[0].sft.steps=4' --set 'stages[1].grpo.iterations=2' --set 'stages[1].grpo.prompts=8' \
  --set 'stages[2].distill.steps=3' \
  --set 'data.arith.synthetic.eval=16' || fail "hpcrl run of the shortened README pipeline exited $?"
[ -f "$run/metrics.jsonl" ] || fail "the run wrote no $run/metrics.jsonl"
lines=$(wc -l < "$run/metrics.jsonl")
per_stage=$(grep -o '"stage":"[a-z]*"' "$run/metrics.jsonl" | sort | uniq -c | tr -s ' \n' ' ')
[ "$lines" -eq 18 ] ||
  fail "metrics.jsonl has $lines lines, expected 18 = (4+2+1) sft + (2+2+1) grpo + (3+2+1) distill; per stage:$per_stage"
echo "readme_pipeline: passed (validate on 1 and 2 ranks; run exit 0; metrics.jsonl 18 lines:$per_stage)"
