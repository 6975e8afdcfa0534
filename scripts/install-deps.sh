#!/usr/bin/env bash
# Installs every Debian package hpcrl's build, tests and quickstart need.
# Idempotent: packages already present are skipped. Needs root (or sudo).
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config git
  libtorch-dev                  # LibTorch 1.13 (CPU); a CUDA LibTorch is picked via CMAKE_PREFIX_PATH
  libopenblas0-pthread          # torch's BLAS: the reference BLAS is ~10x slower here
  libopenmpi-dev openmpi-bin    # MPI (any standard MPI works on a cluster)
  libyaml-cpp-dev libcli11-dev libspdlog-dev nlohmann-json3-dev
  libpcre2-dev libutf8proc-dev
  libginac-dev                  # GiNaC (+ CLN): symbolic answer equivalence in the verifiable reward
  libgtest-dev
  procps                        # pgrep: the preemption end-to-end test signals one rank
  python3 python3-protobuf      # tests/trace/read_tfevents.py: TensorBoard files read back independently
  python3-jinja2                # tests/chat_template/render_reference.py: HF chat templates rendered by jinja2
  chromium                      # tests/trace/report_render_check.sh: `hpcrl report`'s page rendered headless
  slurmctld slurmd slurm-client munge  # tests/slurm/slurm_e2e.sh: the batch scripts under a one-node Slurm
  iproute2                      # tests/slurm/two_node_slurm.sh: `ip` makes the veth pair between its two nodes
  clang-14 libclang-rt-14-dev libfuzzer-14-dev  # scripts/fuzz.sh: the parsers' libFuzzer targets (ASan + UBSan)
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
