#!/usr/bin/env bash
# Runs scripts/gpu-check.sh --rehearse --no-build against the build folder $1 and checks what it
# claims: each step's status in summary.txt and the files the steps write.
# The bundle: .gpu-bundle/ when scripts/gpu-bundle.sh filled it, else $1/gpu-bundle (downloaded here
# once, 14 MB). Without a registry the unpack step skips, which fails the test only under CI=true.
set -uo pipefail
build=$(cd "$1" && pwd)
cd "$(dirname "$0")/../.." || exit 1
out=$build/gpu_check_rehearsal
bundle=.gpu-bundle
if ! ls "$bundle"/*.deb > /dev/null 2>&1; then
  bundle=$build/gpu-bundle
  ls "$bundle"/*.deb > /dev/null 2>&1 || bash scripts/gpu-bundle.sh "$bundle" || rm -rf "$bundle"
fi
for exe in hpcrl benchmarks/rollout/bench_decode benchmarks/train/bench_optimizer_step; do
  [ -x "$build/$exe" ] || { echo "FAIL: $build/$exe is not built"; exit 1; }
done
rm -rf "$out"
bash scripts/gpu-check.sh --rehearse --no-build --build-dir "$build" --bundle "$bundle" --out "$out" --deadline 1200
rc=$?
fail=0
expect() {  # STEP STATUS: the status summary.txt gives the step
  local got
  got=$(awk -v s="$1" '$1 == s {sub(/^[^ ]+ +/, ""); sub(/ +[0-9]+$/, ""); print}' "$out/summary.txt")
  if [ "$got" != "$2" ]; then echo "FAIL: step $1 is '$got', expected '$2'"; fail=1; fi
}
expect env passed
if [ -d "$bundle" ]; then
  expect unpack passed
elif [ "${CI:-}" = true ]; then
  echo "FAIL: no bundle (scripts/gpu-bundle.sh could not download it) and CI must rehearse the unpack"; fail=1
else
  echo "note: no bundle could be downloaded; the unpack step was not rehearsed"
fi
expect configure "skipped (--no-build: the binaries of $build)"
expect build "skipped (--no-build: the binaries of $build)"
expect test-gpu "skipped (rehearsal)"
expect test-device-e2e "skipped (rehearsal)"
expect test-gpu-decode "skipped (rehearsal)"
for s in calibrate quickstart summarize report bench bench-optimizer; do expect "$s" passed; done
grep -q '^name: cpu-calibrated' "$out/calibrated.yaml" 2>/dev/null && grep -q 'peak_flops' "$out/calibrated.yaml" ||
  { echo "FAIL: calibrated.yaml is not a cpu-calibrated profile"; fail=1; }
grep -q '"case":"quickstart tiny' "$out/bench.txt" || { echo "FAIL: bench.txt has no quickstart case"; fail=1; }
grep -q '"case":"qwen2.5-0.5b-shaped, batch 1","dtype":"bfloat16"' "$out/bench.txt" ||
  { echo "FAIL: bench.txt has no bf16 Qwen case"; fail=1; }
grep -q '^  multi-tensor ' "$out/bench-optimizer.txt" || { echo "FAIL: bench-optimizer.txt has no multi-tensor row"; fail=1; }
grep -q '<html' "$out/report.html" || { echo "FAIL: report.html is not a page"; fail=1; }
[ -s "$out/trace-summary.md" ] && [ -s "$out/quickstart-metrics.jsonl" ] ||
  { echo "FAIL: trace-summary.md or quickstart-metrics.jsonl missing"; fail=1; }
[ $rc = 0 ] || { echo "FAIL: gpu-check.sh --rehearse exited $rc"; fail=1; }
[ $fail = 0 ] && echo "gpu-check rehearsal: every step as expected"
exit $fail
