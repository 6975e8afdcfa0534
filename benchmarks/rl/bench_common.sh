# Shared by the RL placement benchmarks (bench_placement.sh, bench_partial.sh); sourced, not run.

# Checks that $HPCRL and $REPORT are built, sets one thread per rank (and root's
# mpirun permission), makes $WORK (removed on exit) named after $1, and enters $ROOT.
bench_setup() {
  local exe
  for exe in "$HPCRL" "$REPORT"; do
    [ -x "$exe" ] || { echo "$exe not built (cmake -DHPCRL_BUILD_BENCHMARKS=ON; build hpcrl bench_placement_report)" >&2; exit 2; }
  done
  export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE OMPI_MCA_mpi_yield_when_idle=1
  if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
  WORK=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX")
  trap 'rm -rf "$WORK"' EXIT
  cd "$ROOT"
}

# The quickstart's GRPO stage (configs/quickstart.yaml, without its student and
# other stages) on the SFT policy at $1, as run name $2, written to $3.
quickstart_grpo_config() {
  local policy=$1 name=$2 out=$3
  sed -e "/^stages:/,\$d" -e "/^  student:/d" -e "s|policy:    {init: {preset: tiny}}.*|policy:    {init: {path: $policy}, tokenizer: byte}|" \
      -e "s|name: quickstart|name: $name|" configs/quickstart.yaml > "$out"
  sed -n "/^  - grpo:/,/^  - distill:/p" configs/quickstart.yaml | sed '$d' | sed '1s/^/stages:\n/' >> "$out"
  printf 'trace: {chrome: true, metrics: true, comm: false}\n' >> "$out"
}
