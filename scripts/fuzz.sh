#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, clang + ASan + UBSan) into build/fuzz and
# runs each one: first every regression input in fuzz/regressions/<target>/
# (inputs that once crashed a parser; each must now pass), then fuzzing from a
# corpus seeded from the tree (fuzz/make_seeds.py) plus what earlier runs found:
# either RUNS inputs from a fixed random seed (CI: the same inputs on every
# machine, so a commit's CI result does not depend on how fast the machine is or
# on luck; a new finding comes from a campaign, lands as a regression input with
# its fix) or for SECONDS (a campaign). Fails on a crash, a leak, a UB report, an input that
# takes over 30 s (generous: CI machines are shared), more than 2048 MB resident or a single allocation of 512 MB
# or more (-rss_limit_mb / -malloc_limit_mb).
#
#   bash scripts/fuzz.sh                    # CI: 20,000 inputs per target from seed 1
#   bash scripts/fuzz.sh --seconds 1800 --targets "tokenizer jsonl"   # a campaign
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=
runs=20000
targets="safetensors_header safetensors_index model_config tokenizer pipeline_yaml set_override jsonl chat_template command_reply checkpoint_files hardware_profile"
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds=$2; runs=; shift 2 ;;
    --runs) runs=$2; seconds=; shift 2 ;;
    --targets) targets=$2; shift 2 ;;
    *) echo "usage: scripts/fuzz.sh [--runs N | --seconds N] [--targets \"t1 t2\"]" >&2; exit 2 ;;
  esac
done
out=build/fuzz
limits=(-rss_limit_mb=2048 -malloc_limit_mb=512 -timeout=30)
if [ -n "$runs" ]; then budget=(-runs="$runs" -seed=1); what="from seed 1"
else budget=(-max_total_time="$seconds"); what="for at most ${seconds} s"; fi

started=$SECONDS
if [ ! -f "$out/build.ninja" ]; then
  CC=clang-14 CXX=clang++-14 cmake -S fuzz -B "$out" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
cmake --build "$out" -j"$(OMP_NUM_THREADS= OMP_THREAD_LIMIT= nproc)" >/dev/null  # nproc obeys OMP_NUM_THREADS
echo "   fuzz targets built in $((SECONDS - started)) s"
rm -rf "$out/seeds"
python3 fuzz/make_seeds.py "$out/seeds"

failed=()
for t in $targets; do
  bin=$out/fuzz_$t
  mkdir -p "$out/corpus/$t" "$out/artifacts"
  regressions=(fuzz/regressions/"$t"/*)
  if [ -e "${regressions[0]}" ] && ! "$bin" "${limits[@]}" "${regressions[@]}" >"$out/$t.regressions.log" 2>&1; then
    echo "FAIL $t: a regression input fails again ($out/$t.regressions.log)"
    failed+=("$t")
    continue
  fi
  t0=$SECONDS
  if "$bin" "${limits[@]}" "${budget[@]}" -print_final_stats=1 -artifact_prefix="$out/artifacts/$t-" \
       "$out/corpus/$t" "$out/seeds/$t" >"$out/$t.log" 2>&1; then
    stats=$(grep -E '^stat::number_of_executed_units' "$out/$t.log" | awk '{print $2}')
    cov=$(grep -oE 'cov: [0-9]+' "$out/$t.log" | tail -1)
    echo "ok   $t: ${stats:-?} runs ($what) in $((SECONDS - t0)) s, ${cov:-cov: ?}, corpus $(ls "$out/corpus/$t" | wc -l) inputs"
  else
    echo "FAIL $t: see $out/$t.log; the input is in $out/artifacts/$t-*"
    grep -m3 -E 'ERROR|runtime error|Assertion|terminate|deadly' "$out/$t.log" | sed 's/^/     /' || true
    failed+=("$t")
  fi
done
echo "   fuzzing done in $((SECONDS - started)) s"
[ ${#failed[@]} -eq 0 ] || { echo "fuzz targets failed: ${failed[*]}" >&2; exit 1; }
