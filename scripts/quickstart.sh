#!/usr/bin/env bash
# The README's main command: install the Debian packages, build the hpcrl
# executable (only it: the tests and benchmarks are scripts/test.sh's), validate
# and run the quickstart pipeline (configs/quickstart.yaml) into runs/quickstart.
# Extra arguments go to `hpcrl run`, e.g. --set run.seed=2.
# Times in the phase lines were measured on a fresh 2-core Debian 12 machine.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$SECONDS
phase_started=$SECONDS
phase() {
  [ "$phase_started" -lt "$SECONDS" ] && echo "   ($((SECONDS - phase_started)) s)"
  phase_started=$SECONDS
  echo "== quickstart [$1/4] $2"
}

phase 1 "Debian packages (scripts/install-deps.sh): ~1 min on a fresh machine, seconds when present"
bash scripts/install-deps.sh
phase 2 "build the hpcrl executable into build/: ~9 min on 2 cores with a cold ccache, seconds when built"
command -v ccache >/dev/null && echo "   ccache: $(command -v ccache)"
bash scripts/build.sh --target hpcrl
phase 3 "validate configs/quickstart.yaml"
./build/hpcrl validate configs/quickstart.yaml
phase 4 "run configs/quickstart.yaml into runs/quickstart: ~4-7 min on 2 cores (measured 420 s: SFT 84, GRPO 249, distillation 88)"
# Idle OpenMP threads that spin steal the cores torch's BLAS needs (measured:
# 3.6x slower decoding on 2 cores, docs/rollout.md); let them sleep instead.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
./build/hpcrl run configs/quickstart.yaml --force "$@"
echo "   ($((SECONDS - phase_started)) s)"
echo "== quickstart done in $((SECONDS - started)) s; results in runs/quickstart"
