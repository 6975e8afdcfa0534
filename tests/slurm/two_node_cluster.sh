#!/usr/bin/env bash
# A two-node Slurm on this one machine, private to one test. Each node is a
# process holding its own network, UTS and mount namespaces: its own hostname
# (hpcrl-n1, hpcrl-n2), its own loopback, one end of a veth pair made between
# the two namespaces (10.77.0.1/24 and 10.77.0.2/24; no address anywhere else,
# nothing in the host's network namespace), an /etc/hosts naming the two nodes,
# a /dev/shm of its own (Open MPI names its shared-memory segments by host and job:
# a node of an earlier cluster with the same job id must not share them) and a
# per-node directory mounted over the cluster's TmpFS (Slurm's PMIx plugin
# names its per-step directory there by job and step only, so two nodes on one
# file system would share and delete each other's). slurmctld, munged (its own key
# and socket, tests/slurm/local_slurm.sh; node 2 reaches the socket through the file
# system) and one slurmd run in node 1's namespaces, the other slurmd in node 2's.
# Everything the cluster starts is in one of the two network namespaces, which is
# how two_node_stop, and the holders should the test die, find it all.
# Source it, then:
#   two_node_start DIR     # DIR: a fresh directory under /tmp (Unix socket paths stay short)
#   on_node N CMD...       # runs CMD in node N's namespaces (sbatch, srun, scontrol: on_node 1)
#   two_node_stop          # ends the jobs, the daemons and the namespaces; safe to call twice
# Needs root, unshare/nsenter (util-linux), ip (iproute2) and the Debian packages
# slurmctld, slurmd, slurm-client, munge. two_node_check_host says what is missing.

TWO_NODE_HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TWO_NODE_NODES=(hpcrl-n1 hpcrl-n2)
TWO_NODE_ADDRS=(10.77.0.1 10.77.0.2)
# shellcheck disable=SC2034  # read by the scripts that source this one
TWO_NODE_SUBNET=10.77.0.0/24
TWO_NODE_HOLDERS=()  # the process holding each node's namespaces
TWO_NODE_UNSHARES=() # their parents (unshare --fork), children of this shell
TWO_NODE_NETNS=()    # each node's network namespace (net:[inode]), to find what is left in it
TWO_NODE_DAEMONS=()  # slurmctld and the slurmds, in the order they started

# Prints why this machine cannot run the cluster (nothing when it can).
two_node_check_host() {
  [ "$(id -u)" -eq 0 ] || { echo "needs root (namespaces, and slurmd starts the tasks as their user)"; return; }
  local p
  for p in unshare nsenter ip; do
    command -v "$p" >/dev/null || { echo "$p is missing (apt-get install util-linux iproute2)"; return; }
  done
  for p in slurmctld slurmd munged sbatch srun scontrol scancel; do
    command -v "$p" >/dev/null || { echo "$p is missing (apt-get install slurmctld slurmd slurm-client munge)"; return; }
  done
  unshare --net --uts --mount --propagation private true 2>/dev/null ||
    { echo "this kernel or sandbox refuses new network/UTS/mount namespaces (unshare --net --uts --mount)"; return; }
  unshare --net bash -c 'ip link add hpcrl-probe0 type veth peer name hpcrl-probe1' 2>/dev/null ||
    echo "this kernel refuses veth pairs (ip link add ... type veth) inside a new network namespace"
}

# on_node N CMD...: CMD in node N's network, UTS and mount namespaces, in this directory.
on_node() {
  local pid=${TWO_NODE_HOLDERS[$(($1 - 1))]}
  shift
  nsenter --target "$pid" --net --uts --mount --wd="$PWD" "$@"
}

# Runs CMD in node N's namespaces in the background, as a child of this shell whose
# pid ($!) is CMD's own (nsenter execs it), and adds that pid to TWO_NODE_DAEMONS.
two_node_daemon() {
  local n=$1 log=$2
  shift 2
  nsenter --target "${TWO_NODE_HOLDERS[$((n - 1))]}" --net --uts --mount "$@" > "$log" 2>&1 &
  TWO_NODE_DAEMONS+=($!)
}

# Starts the process that holds node N's namespaces (two_node_holder.sh); its pid goes
# to TWO_NODE_HOLDERS, its network namespace to TWO_NODE_NETNS.
two_node_namespace() {
  local n=$1 dir=$2 name=${TWO_NODE_NODES[$(($1 - 1))]}
  mkdir -p "$dir/tmpfs-$name"
  unshare --net --uts --mount --propagation private --fork \
    bash "$TWO_NODE_HERE/two_node_holder.sh" hold "$name" "$dir" $$ &
  TWO_NODE_UNSHARES+=($!)
  for _ in $(seq 1 50); do
    [ -s "$dir/holder-$name.pid" ] && break
    sleep 0.1
  done
  [ -s "$dir/holder-$name.pid" ] || { echo "two_node: node $name's namespaces did not come up" >&2; return 1; }
  TWO_NODE_HOLDERS+=("$(cat "$dir/holder-$name.pid")")
  TWO_NODE_NETNS+=("$(readlink "/proc/${TWO_NODE_HOLDERS[-1]}/ns/net")")
}

# The veth pair between the two nodes, made in node 1 with its peer placed straight into node 2.
two_node_link() {
  on_node 1 ip link add veth-n1 type veth peer name veth-n2 netns "${TWO_NODE_HOLDERS[1]}"
  local n
  for n in 1 2; do
    on_node "$n" ip addr add "${TWO_NODE_ADDRS[$((n - 1))]}/24" dev "veth-n$n"
    on_node "$n" ip link set "veth-n$n" up
  done
}

# slurm.conf: the two nodes at their veth addresses, each claiming this machine's CPUs
# (at least 2, for --ntasks-per-node 2) and a quarter of its memory; fixed ports (each
# node's network namespace is the test's own, so nothing else listens there).
two_node_conf() {
  local dir=$1 cpus mem_mb
  cpus=$(getconf _NPROCESSORS_ONLN)  # not nproc: it obeys OMP_NUM_THREADS
  [ "$cpus" -ge 2 ] || cpus=2
  mem_mb=$(awk '/MemTotal/ {print int($2 / 1024 / 4)}' /proc/meminfo)
  cat > "$dir/slurm.conf" <<CONF
ClusterName=hpcrl-two-node
SlurmctldHost=${TWO_NODE_NODES[0]}(${TWO_NODE_ADDRS[0]})
SlurmctldPort=6817
SlurmdPort=6818
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd-%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
TmpFS=$dir/tmpfs
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
MpiDefault=none
ReturnToService=2
JobRequeue=1
KillWait=30
MinJobAge=3600
SlurmctldTimeout=30
SlurmdTimeout=60
InactiveLimit=0
NodeName=${TWO_NODE_NODES[0]} NodeHostname=${TWO_NODE_NODES[0]} NodeAddr=${TWO_NODE_ADDRS[0]} CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN
NodeName=${TWO_NODE_NODES[1]} NodeHostname=${TWO_NODE_NODES[1]} NodeAddr=${TWO_NODE_ADDRS[1]} CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN
PartitionName=debug Nodes=${TWO_NODE_NODES[0]},${TWO_NODE_NODES[1]} Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
CONF
}

# Waits until sinfo lists both nodes as usable.
two_node_wait_up() {
  local dir=$1
  for _ in $(seq 1 60); do
    [ "$(on_node 1 sinfo -h -N -o '%T' 2>/dev/null | grep -c -E '^(idle|mixed|allocated)')" = 2 ] && return 0
    sleep 1
  done
  echo "two_node: the nodes did not come up in 60 s; logs in $dir/log:" >&2
  tail -n 20 "$dir"/log/*.log >&2
  return 1
}

two_node_start() {
  local dir=$1 n
  mkdir -p "$dir"/{state,spool,log,tmpfs}
  TWO_NODE_DIR=$(cd "$dir" && pwd)
  dir=$TWO_NODE_DIR
  printf '127.0.0.1 localhost\n%s %s\n%s %s\n' "${TWO_NODE_ADDRS[0]}" "${TWO_NODE_NODES[0]}" \
    "${TWO_NODE_ADDRS[1]}" "${TWO_NODE_NODES[1]}" > "$dir/hosts"
  two_node_namespace 1 "$dir" || return 1
  two_node_namespace 2 "$dir" || return 1
  two_node_link || return 1
  # munged in node 1 (its socket is a file: node 2 reaches it too), so that the holder's
  # sweep covers it should the test die without cleaning up.
  slurm_munge_start "$dir" on_node 1 || return 1
  two_node_conf "$dir"
  export SLURM_CONF=$dir/slurm.conf
  two_node_daemon 1 "$dir/log/slurmctld.stdout" slurmctld -D -i -f "$SLURM_CONF"
  for n in 1 2; do
    two_node_daemon "$n" "$dir/log/slurmd-${TWO_NODE_NODES[$((n - 1))]}.stdout" \
      slurmd -D -N "${TWO_NODE_NODES[$((n - 1))]}" -f "$SLURM_CONF"
  done
  two_node_wait_up "$dir"
}

# Ends what two_node_start made: the holders, then everything in the nodes' network
# namespaces (slurmctld, the slurmds, munged, job steps and their tasks, srun), SIGTERM
# first and SIGKILL 3 s later; a namespace, its veth end, its /dev/shm and its bind mounts go away with its
# last process. Never fails (it runs from an EXIT trap, maybe under set -e).
two_node_stop() {
  [ -n "${TWO_NODE_DIR:-}" ] || return 0
  local errexit=${-//[^e]/} pid
  set +e
  # Not daemon by daemon: a slurmd waits for its job steps, and they for slurmctld.
  for pid in "${TWO_NODE_HOLDERS[@]}"; do kill "$pid" 2>/dev/null; done
  [ ${#TWO_NODE_NETNS[@]} -gt 0 ] && bash "$TWO_NODE_HERE/two_node_holder.sh" sweep "${TWO_NODE_NETNS[@]}" --
  for pid in "${TWO_NODE_DAEMONS[@]}" "${TWO_NODE_UNSHARES[@]}"; do wait "$pid" 2>/dev/null; done
  TWO_NODE_DAEMONS=()
  TWO_NODE_HOLDERS=()
  TWO_NODE_UNSHARES=()
  TWO_NODE_NETNS=()
  TWO_NODE_DIR=
  [ -n "$errexit" ] && set -e
  return 0
}
