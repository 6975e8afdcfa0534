#!/usr/bin/env bash
# The README's main command: install deps, build, validate and run the
# quickstart pipeline (configs/quickstart.yaml) into runs/quickstart.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
./build/hpcrl validate configs/quickstart.yaml
./build/hpcrl run configs/quickstart.yaml --force "$@"
