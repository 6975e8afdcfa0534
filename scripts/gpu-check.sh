#!/usr/bin/env bash
# hpcrl's GPU check in one call: on a fresh GPU machine (python3 with a CUDA PyTorch wheel, g++,
# cmake, ninja, the CUDA toolkit, no package registry) it unpacks the Debian packages of
# scripts/gpu-bundle.sh, builds hpcrl, the GPU tests and the decode benchmark against python's
# CUDA LibTorch, then runs, each under its own time limit:
#   test-gpu         ctest -L '^gpu$' (test_dist_nccl: NCCL against MPI, and any test labelled gpu)
#   test-device-e2e  test_e2e --gtest_filter='DeviceE2E.*' (cuda runs against the CPU run)
#   test-gpu-decode  test_rollout --gtest_filter='GpuDecode.*:FixedDecodeStep.*' (decode graphs against eager)
#   calibrate        hpcrl calibrate --device cuda --memory-capacity <the GPU's memory>
#   quickstart       hpcrl run configs/quickstart.yaml --set run.device=cuda
#   summarize        hpcrl trace summarize (--estimate with the calibrated profile), Markdown and JSON
#   report           hpcrl report
#   bench            build/benchmarks/rollout/bench_decode --device cuda
#   bench-optimizer  build/benchmarks/train/bench_optimizer_step --device cuda (per-tensor, multi-tensor, fused AdamW)
# Results go to one folder (default: $OUT, else .gpu-check/): log.txt (every step's output with
# timestamps), summary.txt (each step's status and seconds) and each step's files. Steps that would
# start with fewer seconds left than they need (of --deadline, default 300) are skipped, and say so.
#
#   scripts/gpu-check.sh [--out DIR] [--bundle DIR] [--build-dir DIR] [--no-build] [--deadline S] [--only STEP,...]
#                        [--suite]
#   (--suite: also build everything and run every other test under this LibTorch, step `suite`; the
#   deadline then defaults to 3600 s. HPCRL_TORCH_PREFIX replaces python's CMake prefix and
#   HPCRL_CMAKE_ARGS adds configure flags, e.g. on a cluster node whose packages live under a prefix)
#   (--only: just these steps, e.g. a second call on a still-warm machine: --no-build --only bench;
#   the build folder defaults to /tmp/hpcrl-gpu-build, which lives as long as the machine)
#   scripts/gpu-check.sh --rehearse [...]   on a CPU machine: the same script; the bundle is unpacked into
#       a scratch root, the build is against the CPU LibTorch (or skipped with --no-build, using the
#       binaries of --build-dir, default build/), the quickstart is shortened and runs on cpu, calibrate
#       and the benchmark run on cpu; the GPU-only steps print "skipped (rehearsal)".
# Exit 0 when no step failed (skipped steps are not failures), 1 otherwise.
set -uo pipefail
export LC_ALL=C PYTHONUNBUFFERED=1
cd "$(dirname "$0")/.." || exit 2
ROOT=$PWD
T0=$(date +%s)
REHEARSE=0 BUILD=1 DEADLINE_S="" ONLY="" SUITE=0
RES=${OUT:-$ROOT/.gpu-check}
BUNDLE=${GPU_BUNDLE:-$ROOT/.gpu-bundle}
B=""
while [ $# -gt 0 ]; do
  case $1 in
    --rehearse) REHEARSE=1 ;;
    --no-build) BUILD=0 ;;
    --out) RES=$2; shift ;;
    --bundle) BUNDLE=$2; shift ;;
    --build-dir) B=$2; shift ;;
    --deadline) DEADLINE_S=$2; shift ;;
    --only) ONLY=$2; shift ;;
    --suite) SUITE=1 ;;
    *) echo "usage: scripts/gpu-check.sh [--rehearse] [--out DIR] [--bundle DIR] [--build-dir DIR] [--no-build]" \
            "[--deadline S] [--only STEP,...] [--suite]" >&2; exit 2 ;;
  esac
  shift
done
[ -n "$DEADLINE_S" ] || { DEADLINE_S=300; [ $SUITE = 1 ] && DEADLINE_S=3600; }
if [ -z "$B" ]; then
  if [ $REHEARSE = 1 ]; then B=$ROOT/build; [ $BUILD = 1 ] && B=$ROOT/build-gpu-rehearsal; else B=/tmp/hpcrl-gpu-build; fi
fi
mkdir -p "$RES" && RES=$(cd "$RES" && pwd)
B=$(mkdir -p "$B" && cd "$B" && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/hpcrl-gpu-check.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
LOG=$RES/log.txt
SUMMARY=$RES/summary.txt
: > "$LOG"
printf '%-16s %-56s %s\n' step status seconds > "$WORK/steps"
DEV=cuda
[ $REHEARSE = 1 ] && DEV=cpu
JOBS=$(OMP_NUM_THREADS='' OMP_THREAD_LIMIT='' nproc)
QS=$WORK/quickstart

# Open MPI as root in a container without ssh: its rsh launcher refuses to start without an agent,
# even for a singleton; one node, shared memory only (no UCX, whose transports such a machine lacks).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_plm_rsh_agent=false \
  OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_osc='^ucx' \
  OMPI_MCA_btl_base_warn_component_unused=0 OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_mpi_yield_when_idle=1 \
  PMIX_MCA_gds=hash PMIX_MCA_psec=native OMP_WAIT_POLICY=PASSIVE
export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0}
for d in /usr/local/cuda/bin /usr/local/cuda-*/bin; do
  command -v nvcc >/dev/null || { [ -x "$d/nvcc" ] && export PATH=$PATH:$d; }
done
PY=/opt/torch/.venv/bin/python3
[ -x "$PY" ] || PY=$(command -v python3 || echo python3)
export ROOT T0 REHEARSE BUILD SUITE RES BUNDLE B WORK LOG DEV JOBS QS PY

log() {
  local m
  m=$(printf '[%s +%4ds] %s' "$(date -u +%H:%M:%S)" "$(( $(date +%s) - T0 ))" "$*")
  echo "$m" >> "$LOG"
  echo "$m"
}
note() { echo "$*" > "$WORK/note"; }  # a skipping step's reason (it then exits 3)
export -f log note

# step NAME CAP_S NEED_S GPU_ONLY FUNCTION: FUNCTION under `timeout` (CAP_S or the seconds left of the
# deadline, the smaller), its output in the log; skipped when fewer than NEED_S seconds are left, or in a
# rehearsal when GPU_ONLY is 1. A function exits 3 after `note REASON` to say that it skipped.
step() {
  local name=$1 cap=$2 need=$3 gpu_only=$4 fn=$5 left t rc s0 status secs
  if [ -n "$ONLY" ] && [ "$name" != env ] && [[ ",$ONLY," != *",$name,"* ]]; then
    return 0
  fi
  left=$(( DEADLINE_S - ($(date +%s) - T0) ))
  if [ "$gpu_only" = 1 ] && [ $REHEARSE = 1 ]; then
    log "$name: skipped (rehearsal)"
    printf '%-16s %-56s %s\n' "$name" "skipped (rehearsal)" 0 >> "$WORK/steps"
    return 0
  fi
  if (( left < need )); then
    log "$name: skipped (no time: ${left}s left, it needs ${need}s)"
    printf '%-16s %-56s %s\n' "$name" "skipped (no time: ${left}s left of ${DEADLINE_S}s)" 0 >> "$WORK/steps"
    return 0
  fi
  t=$(( cap < left ? cap : left ))
  log "BEGIN $name (time limit ${t}s)"
  s0=$(date +%s)
  rm -f "$WORK/note"
  timeout -k 10 "$t" bash -o pipefail -c "$fn" 2>&1 | tee -a "$LOG"
  rc=${PIPESTATUS[0]}
  secs=$(( $(date +%s) - s0 ))
  case $rc in
    0) status=passed ;;
    3) if [ -s "$WORK/note" ]; then status="skipped ($(cat "$WORK/note"))"; else status="FAILED (exit 3)"; fi ;;
    124 | 137) status="FAILED (time limit of ${t}s)" ;;
    *) status="FAILED (exit $rc)" ;;
  esac
  log "END $name: $status in ${secs}s"
  printf '%-16s %-56s %s\n' "$name" "$status" "$secs" >> "$WORK/steps"
  cp -f "$WORK/steps" "$SUMMARY"
}

step_env() {
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,power.limit --format=csv
  else
    echo "nvidia-smi: absent"
  fi
  echo "hpcrl: $(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo 'not a git checkout'); $(uname -srm)"
  grep PRETTY_NAME /etc/os-release
  echo "cores $JOBS; $(free -g | awk '/Mem:/ {print "memory " $2 " GiB"}')"
  g++ --version | head -1
  cmake --version | head -1
  echo "ninja $(ninja --version 2>/dev/null || echo absent); ccache $(ccache --version 2>/dev/null | head -1 || echo absent)"
  command -v nvcc >/dev/null && nvcc --version | tail -1
  cat "$WORK/python.txt"
}

# What the build needs from the packages, under root $1 ("" = /).
check_unpacked() {
  local r=$1 f bad=0
  for f in usr/bin/mpicxx.openmpi usr/bin/mpirun.openmpi usr/lib/x86_64-linux-gnu/openmpi/include/mpi.h \
           usr/lib/x86_64-linux-gnu/cmake/yaml-cpp/yaml-cpp-config.cmake usr/lib/x86_64-linux-gnu/cmake/spdlog/spdlogConfig.cmake \
           usr/share/cmake/CLI11/CLI11Config.cmake usr/share/cmake/nlohmann_json/nlohmann_jsonConfig.cmake \
           usr/lib/x86_64-linux-gnu/cmake/GTest/GTestConfig.cmake usr/lib/x86_64-linux-gnu/pkgconfig/ginac.pc \
           usr/lib/x86_64-linux-gnu/pkgconfig/libpcre2-8.pc usr/lib/x86_64-linux-gnu/pkgconfig/libutf8proc.pc; do
    [ -e "$r/$f" ] || { echo "missing after the unpack: /$f"; bad=1; }
  done
  for f in bin lib lib64 sbin; do  # merged /usr: these must still be links into usr/
    if [ -L "$WORK/links-before/$f" ] && ! [ -L "$r/$f" ]; then echo "/$f is no longer a link"; bad=1; fi
  done
  return $bad
}
export -f check_unpacked step_env

# The .deb files of scripts/gpu-bundle.sh, unpacked with tar so that files already there are kept and
# /lib, /bin... stay links (dpkg -x onto / replaces the /lib -> usr/lib link: one package ships ./lib/).
# Then what the packages' install scripts would make (the alternatives' links) and ldconfig.
step_unpack() {
  local r="" d n=0 f
  local debs=("$BUNDLE"/*.deb)
  if ! [ -e "${debs[0]}" ]; then
    if command -v mpicxx >/dev/null && pkg-config --exists ginac libutf8proc 2>/dev/null; then
      note "no bundle in $BUNDLE; the machine has the packages"; exit 3
    fi
    echo "no .deb files in $BUNDLE: run scripts/gpu-bundle.sh on a Debian 12 machine and carry $BUNDLE along"
    exit 1
  fi
  if [ $REHEARSE = 1 ]; then  # a scratch root laid out like a merged-/usr system
    r=$WORK/rootfs
    mkdir -p "$r/usr/bin" "$r/usr/lib" "$r/usr/lib64" "$r/usr/sbin"
    for f in bin lib lib64 sbin; do ln -s "usr/$f" "$r/$f"; done
  elif [ "$(id -u)" != 0 ]; then
    note "unpacking into / needs root; install the packages with scripts/install-deps.sh"; exit 3
  fi
  mkdir -p "$WORK/links-before"
  for f in bin lib lib64 sbin; do [ -L "${r:-}/$f" ] && ln -s x "$WORK/links-before/$f"; done
  [ -f "$BUNDLE/MANIFEST" ] && { (cd "$BUNDLE" && sha256sum --quiet -c MANIFEST) || exit 1; }
  for d in "${debs[@]}"; do
    dpkg-deb --fsys-tarfile "$d" | tar -x -C "${r:-/}" --keep-directory-symlink --skip-old-files --no-same-owner \
      --exclude='./usr/share/doc/*' --exclude='./usr/share/man/*' || { echo "unpack failed: $d"; exit 1; }
    n=$((n + 1))
  done
  echo "unpacked $n packages into ${r:-/} ($(du -sb "$BUNDLE" | cut -f1) bytes of .deb files)"
  make_links "$r"
  check_unpacked "$r" || exit 1
  echo "every file the build needs is there; /bin /lib /lib64 /sbin are links as before"
  if [ -z "$r" ]; then
    ldconfig
    mpi_smoke_test
  else
    echo "MPI smoke test: not in a rehearsal (the packages are in a scratch root)"
  fi
}

make_links() {  # what update-alternatives would have linked, under root $1
  local r=$1 n
  lnk() { [ -e "$r$2" ] || [ -L "$r$2" ] || { [ -e "$r$1" ] && ln -s "$1" "$r$2" && echo "link $2 -> $1"; }; }
  lnk /usr/bin/mpicc.openmpi /usr/bin/mpicc
  for n in mpic++ mpicxx mpiCC; do lnk /usr/bin/mpic++.openmpi /usr/bin/$n; done
  lnk /usr/bin/mpirun.openmpi /usr/bin/mpirun
  lnk /usr/bin/mpiexec.openmpi /usr/bin/mpiexec
  mkdir -p "$r/usr/include/x86_64-linux-gnu"
  lnk /usr/lib/x86_64-linux-gnu/openmpi/include /usr/include/x86_64-linux-gnu/mpi
  lnk /usr/lib/x86_64-linux-gnu/openmpi/lib/libmpi.so /usr/lib/x86_64-linux-gnu/libmpi.so
  lnk /usr/lib/x86_64-linux-gnu/openmpi/lib/libmpi_cxx.so /usr/lib/x86_64-linux-gnu/libmpi++.so
  for n in mpi mpi-c mpi-cxx; do
    lnk "/usr/lib/x86_64-linux-gnu/pkgconfig/o${n}.pc" "/usr/lib/x86_64-linux-gnu/pkgconfig/${n}.pc"
  done
  lnk /usr/lib/libpsm1/libpsm_infinipath.so.1.16 /usr/lib/x86_64-linux-gnu/libpsm_infinipath.so.1
  true
}

mpi_smoke_test() {
  printf '#include <mpi.h>\n#include <stdio.h>\nint main(int c, char** v) { int r, s; MPI_Init(&c, &v);
MPI_Comm_rank(MPI_COMM_WORLD, &r); MPI_Comm_size(MPI_COMM_WORLD, &s); printf("mpi rank %%d of %%d\\n", r, s);
MPI_Finalize(); return 0; }\n' > "$WORK/mpi_hello.c"
  mpicc "$WORK/mpi_hello.c" -o "$WORK/mpi_hello" && timeout 30 "$WORK/mpi_hello" &&
    timeout 30 mpirun -np 2 "$WORK/mpi_hello"
}
export -f step_unpack make_links mpi_smoke_test

step_configure() {
  [ $BUILD = 1 ] || { note "--no-build: the binaries of $B"; exit 3; }
  local args=(-S "$ROOT" -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHPCRL_ASAN_PARSERS=OFF)
  if [ $REHEARSE = 0 ]; then
    [ -n "$TORCH_PREFIX" ] ||
      { echo "python3 has no torch ($PY): the CUDA LibTorch comes from its wheel (or set HPCRL_TORCH_PREFIX)"; exit 1; }
    args+=("-DCMAKE_PREFIX_PATH=$TORCH_PREFIX")
    [ -n "$NCCL_INC" ] && [ -n "$NCCL_LIB" ] && args+=("-DNCCL_INCLUDE_DIR=$NCCL_INC" "-DNCCL_LIBRARY=$NCCL_LIB")
  fi
  # shellcheck disable=SC2206  # extra flags, split on spaces
  args+=(${HPCRL_CMAKE_ARGS:-})
  echo "cmake ${args[*]}"
  cmake "${args[@]}" > "$RES/configure.log" 2>&1 || { tail -n 40 "$RES/configure.log"; exit 1; }
  grep -E "hpcrl backends|LibTorch ships" "$RES/configure.log" || true
}

build_targets() {  # the targets this check runs, of those the configured tree has
  local all t out=""
  all=$(ninja -C "$B" -t targets all 2>/dev/null | sed 's/:.*//')
  for t in hpcrl test_e2e test_rollout test_dist_nccl bench_decode bench_optimizer_step; do
    grep -qx "$t" <<< "$all" && out+=" $t"
  done
  echo "$out"
}

step_build() {
  [ $BUILD = 1 ] || { note "--no-build: the binaries of $B"; exit 3; }
  local targets rc
  targets=$(build_targets)
  echo "building$targets with $JOBS jobs$(command -v ccache >/dev/null && echo ', ccache')"
  # shellcheck disable=SC2086
  cmake --build "$B" -j"$JOBS" --target $targets -- -k 0 > "$RES/build.log" 2>&1
  rc=$?
  tail -n 3 "$RES/build.log"
  [ $rc = 0 ] || grep -m 40 -E "error|undefined reference" "$RES/build.log"
  [ -x "$B/hpcrl" ] && "$B/hpcrl" version
  return $rc
}
export -f step_configure build_targets step_build

step_test_gpu() {
  [ -x "$B/tests/distributed/test_dist_nccl" ] ||
    { echo "test_dist_nccl was not built (configured without NCCL or without a CUDA LibTorch?)"; exit 1; }
  ctest --test-dir "$B" -L '^gpu$' --output-on-failure --timeout 120 > "$RES/test-gpu.txt" 2>&1
  local rc=$?
  tail -n 30 "$RES/test-gpu.txt"
  return $rc
}

step_test_device_e2e() {
  [ -x "$B/tests/e2e/test_e2e" ] || { echo "test_e2e was not built"; exit 1; }
  cd "$ROOT" && "$B/tests/e2e/test_e2e" --gtest_filter='DeviceE2E.*' > "$RES/test-device-e2e.txt" 2>&1
  local rc=$?
  grep -E '^\[ *(OK|FAILED|PASSED|SKIPPED) ' "$RES/test-device-e2e.txt"
  [ $rc = 0 ] || tail -n 40 "$RES/test-device-e2e.txt"
  return $rc
}
step_test_gpu_decode() {
  [ -x "$B/tests/rollout/test_rollout" ] || { echo "test_rollout was not built"; exit 1; }
  cd "$ROOT" && "$B/tests/rollout/test_rollout" --gtest_filter='GpuDecode.*:FixedDecodeStep.*' \
    > "$RES/test-gpu-decode.txt" 2>&1
  local rc=$?
  grep -E '^\[ *(OK|FAILED|PASSED|SKIPPED) ' "$RES/test-gpu-decode.txt"
  [ $rc = 0 ] || tail -n 40 "$RES/test-gpu-decode.txt"
  return $rc
}
export -f step_test_gpu step_test_device_e2e step_test_gpu_decode

need_hpcrl() { [ -x "$B/hpcrl" ] || { echo "no hpcrl in $B (the build failed?)"; exit 1; }; }
export -f need_hpcrl

step_calibrate() {
  need_hpcrl
  local cap=()
  if [ "$DEV" = cuda ]; then  # calibrate cannot read a GPU's memory: nvidia-smi's MiB
    local mib
    mib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1 | tr -dc '0-9')
    [ -n "$mib" ] || { echo "nvidia-smi gave no memory.total"; exit 1; }
    cap=(--memory-capacity $((mib * 1048576)))
  fi
  cd "$ROOT" && "$B/hpcrl" calibrate --device "$DEV" "${cap[@]}" --name "$DEV-calibrated" --out "$RES/calibrated.yaml"
}

# On cpu (a rehearsal) the quickstart is shortened to a few steps of each stage.
QS_SHORT="--set stages.0.sft.steps=10 --set stages.0.sft.eval_every=10 --set stages.0.sft.stop_at_accuracy=0
  --set run.eval_sampling.prompts=16 --set stages.1.grpo.iterations=2 --set stages.1.grpo.prompts=4
  --set stages.2.distill.steps=4"
export QS_SHORT

step_quickstart() {
  need_hpcrl
  local sets="" rc smi=""
  [ "$DEV" = cpu ] && sets=$QS_SHORT
  rm -rf "$QS"
  if command -v nvidia-smi >/dev/null && [ "$DEV" = cuda ]; then  # the GPU's memory and load during the run
    nvidia-smi --query-gpu=timestamp,memory.used,utilization.gpu,power.draw --format=csv -lms 500 \
      > "$RES/quickstart-nvidia-smi.csv" 2>&1 &
    smi=$!
  fi
  echo "hpcrl run configs/quickstart.yaml --set run.device=$DEV $(echo $sets) --out $QS"
  # shellcheck disable=SC2086
  cd "$ROOT" && "$B/hpcrl" run configs/quickstart.yaml --set run.device="$DEV" $sets --out "$QS" \
    > "$RES/quickstart.log" 2>&1
  rc=$?
  [ -n "$smi" ] && kill "$smi" 2>/dev/null
  grep -v -E '\([0-9]+%\) .*ETA' "$RES/quickstart.log" | tail -n 40
  [ -s "$RES/quickstart-nvidia-smi.csv" ] && awk -F', ' 'NR > 1 {m = $2 + 0; if (m > max) max = m; u += $3 + 0; n++}
    END {if (n) printf "nvidia-smi during the run: max memory.used %d MiB, mean utilization %.1f %% (%d samples)\n",
    max, u / n, n}' "$RES/quickstart-nvidia-smi.csv"
  cp -f "$QS/metrics.jsonl" "$RES/quickstart-metrics.jsonl" 2>/dev/null
  return $rc
}

estimate_profile() {  # the calibrated profile when calibrate wrote one, else the shipped one
  if [ -s "$RES/calibrated.yaml" ]; then echo "$RES/calibrated.yaml"; elif [ "$DEV" = cuda ]; then echo h200; else echo cpu; fi
}
export -f step_calibrate step_quickstart estimate_profile

step_summarize() {
  need_hpcrl
  [ -d "$QS/trace" ] || { echo "the quickstart left no trace in $QS"; exit 1; }
  local prof
  prof=$(estimate_profile)
  cd "$ROOT" && "$B/hpcrl" trace summarize "$QS" --estimate "$prof" > "$RES/trace-summary.md" &&
    "$B/hpcrl" trace summarize "$QS" --estimate "$prof" --json > "$RES/trace-summary.json" || exit 1
  head -n 40 "$RES/trace-summary.md"
}

step_report() {
  need_hpcrl
  [ -d "$QS/trace" ] || { echo "the quickstart left no trace in $QS"; exit 1; }
  cd "$ROOT" && "$B/hpcrl" report "$QS" --out "$RES/report.html" --estimate "$(estimate_profile)" || exit 1
  echo "report.html: $(stat -c %s "$RES/report.html") bytes"
}

step_bench() {
  local bench=$B/benchmarks/rollout/bench_decode args
  [ -x "$bench" ] || { echo "bench_decode was not built"; exit 1; }
  # On the GPU: one measured call per case and 64 new Qwen tokens, to fit the check's five minutes.
  args="--device cuda --reps 1 --qwen-new-tokens 64"
  [ "$DEV" = cpu ] && args="--device cpu --quick --reps 1"
  echo "bench_decode $args"
  # shellcheck disable=SC2086
  cd "$ROOT" && "$bench" $args > "$RES/bench.txt" 2>&1
  local rc=$?
  grep -v '^JSON' "$RES/bench.txt"
  return $rc
}

step_bench_optimizer() {
  local bench=$B/benchmarks/train/bench_optimizer_step
  [ -x "$bench" ] || { echo "bench_optimizer_step was not built"; exit 1; }
  cd "$ROOT" && OMP_NUM_THREADS=1 "$bench" --device "$DEV" --rounds 20 > "$RES/bench-optimizer.txt" 2>&1
  local rc=$?
  cat "$RES/bench-optimizer.txt"
  return $rc
}

step_suite() {  # everything else under this LibTorch (only with --suite)
  cmake --build "$B" -j"$JOBS" -- -k 0 > "$RES/build-all.log" 2>&1 ||
    { grep -m 40 -E "error|undefined reference" "$RES/build-all.log"; exit 1; }
  OMP_NUM_THREADS=1 ctest --test-dir "$B" -LE '^gpu$' -E 'DeviceE2E|gpu_check_rehearsal' -j"$JOBS" --timeout 300 \
    --output-on-failure > "$RES/suite.txt" 2>&1
  local rc=$?
  tail -n 15 "$RES/suite.txt"
  return $rc
}
export -f step_summarize step_report step_bench step_bench_optimizer step_suite

# python3's torch: its CMake prefix, version, GPU, and the NCCL of its wheel (one interpreter start).
probe_python() {
  timeout 120 "$PY" - <<'PYEOF' 2>/dev/null
import glob, os, site
try:
    import torch
    print(torch.utils.cmake_prefix_path)
    info = "python torch %s, cuda %s, available %s %s" % (torch.__version__, torch.version.cuda,
        torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")
except Exception as e:
    print("")
    info = "python3 has no usable torch (%s)" % e
inc = lib = ""
for r in site.getsitepackages() + [site.getusersitepackages()]:
    for h in sorted(glob.glob(os.path.join(r, "nvidia", "**", "nccl.h"), recursive=True)):
        inc = inc or os.path.dirname(h)
    for l in sorted(glob.glob(os.path.join(r, "nvidia", "**", "libnccl.so*"), recursive=True)):
        lib = lib or l
print(inc)
print(lib)
print(info + "; NCCL of the wheel: include '%s', library '%s'" % (inc, lib))
PYEOF
}

# ---------------------------------------------------------------------------------------------------
log "hpcrl GPU check$([ $REHEARSE = 1 ] && echo ' (rehearsal on cpu)'): results in $RES, build in $B, bundle $BUNDLE," \
    "deadline ${DEADLINE_S}s, $JOBS cores"
probe_python > "$WORK/python" || true
TORCH_PREFIX=${HPCRL_TORCH_PREFIX:-$(sed -n 1p "$WORK/python")}
NCCL_INC=$(sed -n 2p "$WORK/python")
NCCL_LIB=$(sed -n 3p "$WORK/python")
sed -n '4,$p' "$WORK/python" > "$WORK/python.txt"
[ -s "$WORK/python.txt" ] || echo "python3 ($PY) did not answer" > "$WORK/python.txt"
export TORCH_PREFIX NCCL_INC NCCL_LIB
#    name            cap need gpu-only function
step env              30    0 0 step_env
step unpack          120    0 0 step_unpack
step configure       120   30 0 step_configure
step build           330   60 0 step_build
step test-gpu         90   10 1 step_test_gpu
step test-device-e2e 150   40 1 step_test_device_e2e
step test-gpu-decode  60   15 1 step_test_gpu_decode
step calibrate        60   10 0 step_calibrate
step quickstart      150   90 0 step_quickstart
step summarize        30    5 0 step_summarize
step report           30    5 0 step_report
step bench            90   30 0 step_bench
step bench-optimizer  30   10 0 step_bench_optimizer
[ $SUITE = 1 ] && step suite 3000 600 1 step_suite
log "done in $(( $(date +%s) - T0 ))s"
printf '%-16s %-56s %s\n' total "" "$(( $(date +%s) - T0 ))" >> "$WORK/steps"
cp -f "$WORK/steps" "$SUMMARY"
tee -a "$LOG" < "$SUMMARY"
! grep -q FAILED "$SUMMARY"
