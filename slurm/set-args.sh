# Sourced by the launch scripts: hpcrl_set_args ARGS... fills the array
# `set_args` with the `--set k=v` / `--set=k=v` flags among hpcrl run's ARGS,
# so that `hpcrl validate` checks the config the run will get.
hpcrl_set_args() {
  set_args=()
  while [ $# -gt 0 ]; do
    case "$1" in
      --set) set_args+=(--set "${2:-}"); shift ;;
      --set=*) set_args+=("$1") ;;
    esac
    shift
  done
}
