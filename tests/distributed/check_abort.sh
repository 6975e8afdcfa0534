#!/usr/bin/env bash
# Usage: check_abort.sh NP EXE MODE WANT_CODE WANT_TEXT [MPIEXEC]
# Runs EXE MODE on NP ranks (NP=1: no launcher) where the last rank fails while
# the others wait in a collective. Passes only if the job exits within 30 s
# with exit code WANT_CODE, its output contains WANT_TEXT and, with several
# ranks, the failing rank's log prefix "[rank NP-1]" on the same line.
set -u
np=$1 exe=$2 mode=$3 want_code=$4 want_text=$5 mpiexec=${6:-mpirun}
start=$(date +%s)
if [ "$np" = 1 ]; then
  out=$(timeout 30 "$exe" "$mode" 2>&1)
else
  out=$(timeout 30 "$mpiexec" -np "$np" --oversubscribe "$exe" "$mode" 2>&1)
fi
rc=$?
elapsed=$(( $(date +%s) - start ))
printf '%s\n' "$out"
echo "--- exit code $rc after ${elapsed}s"
if [ "$rc" = 124 ]; then echo "FAIL: the job hung (killed after 30 s)"; exit 1; fi
if [ "$rc" != "$want_code" ]; then echo "FAIL: exit code $rc, want $want_code"; exit 1; fi
if ! printf '%s' "$out" | grep -qF -- "$want_text"; then echo "FAIL: output lacks: $want_text"; exit 1; fi
if [ "$np" != 1 ] && ! printf '%s' "$out" | grep -F -- "$want_text" | grep -qF "[rank $((np - 1))]"; then
  echo "FAIL: the error line does not name the failing rank [rank $((np - 1))]"; exit 1
fi
echo "PASS"
