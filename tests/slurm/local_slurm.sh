#!/usr/bin/env bash
# A one-node Slurm on this machine, private to one test: its own munge key and
# socket, a generated slurm.conf (this machine's CPUs and memory, free TCP ports,
# proctrack/linuxproc, no cgroups), slurmctld and slurmd in the foreground as
# children of this shell. Source it, then:
#   slurm_start DIR      # DIR: a fresh directory for config, state, spool and logs
#   ...                  # sbatch/srun/squeue/scontrol see the cluster through SLURM_CONF
#   slurm_stop           # ends the daemons (also on EXIT when the caller traps it)
# Needs root (slurmd launches jobs as their submitting user) and the Debian
# packages slurmctld, slurmd, slurm-client, munge.

slurm_free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# munged with a key of its own and a socket of its own (DIR/munge/munge.socket), so
# that nothing of the host's munge is used; slurm.conf names the socket in AuthInfo.
#   slurm_munge_start DIR [LAUNCHER...]   (LAUNCHER: a command prefix munged runs under)
slurm_munge_start() {
  local dir=$1
  shift
  mkdir -p "$dir"/{munge,log}
  chmod 700 "$dir/munge"
  dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
  chmod 400 "$dir/munge/munge.key"
  "$@" munged --force --socket="$dir/munge/munge.socket" --key-file="$dir/munge/munge.key" \
    --pid-file="$dir/munge/munged.pid" --seed-file="$dir/munge/munged.seed" --log-file="$dir/log/munged.log"
}

slurm_start() {
  local dir=$1
  mkdir -p "$dir"/{munge,state,spool,log}
  SLURM_TEST_DIR=$(cd "$dir" && pwd)
  dir=$SLURM_TEST_DIR
  slurm_munge_start "$dir"
  local cpus mem_mb ctld_port slurmd_port host
  cpus=$(getconf _NPROCESSORS_ONLN)  # not nproc: it obeys OMP_NUM_THREADS
  mem_mb=$(awk '/MemTotal/ {print int($2 / 1024 / 2)}' /proc/meminfo)
  ctld_port=$(slurm_free_port)
  slurmd_port=$(slurm_free_port)
  host=$(hostname -s)
  cat > "$dir/slurm.conf" <<CONF
ClusterName=hpcrl-test
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
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
NodeName=hpcrl-node NodeHostname=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN
PartitionName=debug Nodes=hpcrl-node Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
CONF
  export SLURM_CONF=$dir/slurm.conf
  slurmctld -D -i -f "$SLURM_CONF" > "$dir/log/slurmctld.stdout" 2>&1 &
  SLURMCTLD_PID=$!
  slurmd -D -N hpcrl-node -f "$SLURM_CONF" > "$dir/log/slurmd.stdout" 2>&1 &
  SLURMD_PID=$!
  local i
  for i in $(seq 1 60); do
    if sinfo -h -N -o '%T' 2>/dev/null | grep -q -E '^(idle|mixed|allocated)'; then return 0; fi
    sleep 1
  done
  echo "local_slurm: the node did not come up in 60 s; logs in $dir/log:" >&2
  tail -n 20 "$dir"/log/*.log >&2
  return 1
}

slurm_stop() {
  [ -n "${SLURM_TEST_DIR:-}" ] || return 0
  scancel --full --signal=KILL --user=root 2>/dev/null || true
  [ -n "${SLURMD_PID:-}" ] && kill "$SLURMD_PID" 2>/dev/null && wait "$SLURMD_PID" 2>/dev/null
  [ -n "${SLURMCTLD_PID:-}" ] && kill "$SLURMCTLD_PID" 2>/dev/null && wait "$SLURMCTLD_PID" 2>/dev/null
  [ -f "$SLURM_TEST_DIR/munge/munged.pid" ] && kill "$(cat "$SLURM_TEST_DIR/munge/munged.pid")" 2>/dev/null
  SLURM_TEST_DIR=
  return 0
}
