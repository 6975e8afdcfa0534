#!/usr/bin/env bash
# The process that holds one node of tests/slurm/two_node_cluster.sh, and the sweep
# that ends what runs in a node's namespaces.
#   unshare --net --uts --mount --propagation private --fork two_node_holder.sh hold NAME DIR OWNER
#     in the new namespaces: hostname NAME; DIR/hosts over /etc/hosts; DIR/tmpfs-NAME
#     over DIR/tmpfs; a fresh /dev/shm; loopback up; its pid in DIR/holder-NAME.pid.
#     Then it waits while process OWNER (the test's shell) lives: should the test
#     die without cleaning up (SIGKILL, a CTest timeout), the holder ends every
#     process left in its network namespace, so no daemon outlives the test.
#   two_node_holder.sh sweep NETNS... -- [PID...]
#     ends every process in the network namespaces NETNS (as readlink /proc/PID/ns/net
#     prints them) but the PIDs: SIGTERM, then SIGKILL to what is left after 3 s.

# The pids in the network namespaces NETNS... but the PIDs: netns_pids NETNS... -- PID...
# One find over /proc (a readlink per process takes seconds on a busy machine); `?`
# stands for the brackets of net:[N] in find's pattern.
netns_pids() {
  local names=() path p
  while [ $# -gt 0 ] && [ "$1" != -- ]; do
    [ ${#names[@]} -gt 0 ] && names+=(-o)
    names+=(-lname "${1//[][]/?}")
    shift
  done
  shift
  while read -r path; do
    p=${path#/proc/}
    p=${p%%/*}
    case " $* $BASHPID " in *" $p "*) continue ;; esac
    echo "$p"
  done < <(find /proc -mindepth 3 -maxdepth 3 -path '/proc/[0-9]*/ns/net' \( "${names[@]}" \) 2>/dev/null)
  return 0
}

# sweep NETNS... -- PID...: SIGTERM to every process in the namespaces but the PIDs,
# SIGKILL to what is left 3 s later (a slurmd waiting for its steps ignores SIGTERM).
sweep() {
  local i left
  for i in $(seq 1 12); do
    left=$(netns_pids "$@")
    [ -z "$left" ] && return 0
    # shellcheck disable=SC2086  # a list of pids
    if [ "$i" -le 6 ]; then kill $left 2>/dev/null; else kill -KILL $left 2>/dev/null; fi
    sleep 0.5
  done
  return 0
}

hold() {
  local name=$1 dir=$2 owner=$3
  set -e
  hostname "$name"
  mount --bind "$dir/hosts" /etc/hosts
  mount --bind "$dir/tmpfs-$name" "$dir/tmpfs"
  mount -t tmpfs -o mode=1777,size=25% "shm-$name" /dev/shm
  ip link set lo up
  echo $$ > "$dir/holder-$name.pid"
  set +e
  while kill -0 "$owner" 2>/dev/null; do sleep 1; done
  sweep "$(readlink /proc/$$/ns/net)" -- $$ "$PPID"
}

case "${1:-}" in
  hold) hold "$2" "$3" "$4" ;;
  sweep) shift; sweep "$@" ;;
  *) echo "usage: two_node_holder.sh hold NAME DIR OWNER | sweep NETNS... -- [PID...]" >&2; exit 2 ;;
esac
