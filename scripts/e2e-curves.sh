#!/usr/bin/env bash
# The metric curves of every CPU end-to-end run, to prove that a change kept
# behaviour bit for bit (a refactor of the step machinery must).
#   scripts/e2e-curves.sh record OUT_DIR [BUILD_DIR]
#     runs BUILD_DIR/tests/e2e/test_e2e (default build/) with a private TMPDIR and
#     writes each run's metrics.jsonl, without its wall-clock fields and memory readings, to
#     OUT_DIR/<test scratch dir>/<run>.jsonl (the scratch dir's pid suffix dropped).
#   scripts/e2e-curves.sh compare BEFORE_DIR AFTER_DIR
#     exit 0 when both hold the same files with the same lines; otherwise each
#     difference is named (file, line, key) and the exit status is 1.
# Runs whose line count depends on when a signal lands (the preemption and
# kill tests, which check exact resume themselves) are left out.
# Curves are bit-identical only on the same machine kind and LibTorch build:
# record "before" and "after" on one machine.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v python3 >/dev/null || { echo "e2e-curves: needs python3 (apt-get install python3)" >&2; exit 2; }
# Runs stopped by a signal or kill (or a rank that dies) stop at a wall-clock moment: not reproducible. No GPU here.
exclude='*Usr1*:*StopSignal*:*KillDashNine*:*StopInTheMiddle*:*ThatDies*:DeviceE2E.*'

record() {
  local out=${1:?usage: e2e-curves.sh record OUT_DIR [BUILD_DIR]} build=${2:-build}
  local bin=$build/tests/e2e/test_e2e
  [ -x "$bin" ] || { echo "e2e-curves: no $bin; build it: cmake --build $build --target test_e2e" >&2; exit 2; }
  local scratch
  scratch=$(mktemp -d)
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 OMPI_MCA_mpi_yield_when_idle=1
  TMPDIR=$scratch "$bin" --gtest_filter="-$exclude" > "$scratch/test_e2e.log" 2>&1 ||
    { tail -30 "$scratch/test_e2e.log" >&2; echo "e2e-curves: test_e2e failed (log: $scratch/test_e2e.log)" >&2; exit 1; }
  mkdir -p "$out"
  python3 - "$scratch" "$out" <<'EOF'
import json, os, re, sys
scratch, out = sys.argv[1], sys.argv[2]
# Wall-clock fields and the machine's memory readings (peak RSS, the allocator's peaks) differ
# between any two runs; a line left with nothing but where it belongs (a stage's memory line) goes too.
wall_clock = lambda k: k in ("time", "tokens_per_s") or k.startswith("seconds/") or k.startswith("memory/")
placement = {"stage", "stage_index", "step"}
n = 0
for root, _, files in os.walk(scratch):
    if "metrics.jsonl" not in files:
        continue
    rel = os.path.relpath(root, scratch).split(os.sep)
    rel[0] = re.sub(r"-[0-9]+$", "", rel[0])          # hpcrl-e2e-NAME-PID -> hpcrl-e2e-NAME
    name = os.path.join(out, rel[0], "_".join(rel[1:]) or "run") + ".jsonl"
    os.makedirs(os.path.dirname(name), exist_ok=True)
    with open(os.path.join(root, "metrics.jsonl")) as f, open(name, "w") as g:
        for line in f:
            if not line.strip():
                continue
            try:
                j = {k: v for k, v in json.loads(line).items() if not wall_clock(k)}
                if set(j) <= placement:
                    continue
                g.write(json.dumps(j, sort_keys=True) + "\n")
            except ValueError:  # a test's own bytes (the run directory it must not overwrite)
                g.write(json.dumps({"text": line.rstrip("\n")}) + "\n")
    n += 1
print(f"e2e-curves: {n} runs recorded in {out}")
EOF
  rm -rf "$scratch"
}

compare() {
  python3 - "${1:?usage: e2e-curves.sh compare BEFORE AFTER}" "${2:?usage: e2e-curves.sh compare BEFORE AFTER}" <<'EOF'
import json, os, sys
a_dir, b_dir = sys.argv[1], sys.argv[2]
def files(d):
    return {os.path.relpath(os.path.join(r, f), d) for r, _, fs in os.walk(d) for f in fs if f.endswith(".jsonl")}
fa, fb = files(a_dir), files(b_dir)
bad = 0
for f in sorted(fa ^ fb):
    print(f"only in {'before' if f in fa else 'after'}: {f}"); bad += 1
for f in sorted(fa & fb):
    la = open(os.path.join(a_dir, f)).read().splitlines()
    lb = open(os.path.join(b_dir, f)).read().splitlines()
    if len(la) != len(lb):
        print(f"{f}: {len(la)} lines before, {len(lb)} after"); bad += 1; continue
    for i, (x, y) in enumerate(zip(la, lb)):
        if x == y: continue
        jx, jy = json.loads(x), json.loads(y)
        keys = sorted(k for k in set(jx) | set(jy) if jx.get(k) != jy.get(k))
        print(f"{f}:{i + 1}: " + ", ".join(f"{k} {jx.get(k)} -> {jy.get(k)}" for k in keys[:4])); bad += 1
        break
print(f"e2e-curves: {len(fa & fb)} runs compared, {bad} differ" if bad else f"e2e-curves: {len(fa)} runs, bit-identical")
sys.exit(1 if bad else 0)
EOF
}

case "${1:-}" in
  record) shift; record "$@" ;;
  compare) shift; compare "$@" ;;
  *) echo "usage: scripts/e2e-curves.sh record OUT_DIR [BUILD_DIR] | compare BEFORE_DIR AFTER_DIR" >&2; exit 2 ;;
esac
