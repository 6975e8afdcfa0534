#!/usr/bin/env bash
# hpcrl across two Slurm nodes, on this one machine: a two-node Slurm whose nodes
# are network/UTS/mount namespaces joined by a veth pair (tests/slurm/two_node_cluster.sh).
# Checks, in order:
#   1. `srun -N 2 --ntasks-per-node 2` puts two tasks on each node, by its own hostname;
#   2. `hpcrl plan --world 4 --gpus-per-node 2` warns about a tp group that crosses
#      the nodes (tp = 4) and not about tp = 2 with dp across the nodes;
#   3. `hpcrl calibrate` under `srun -N 2` measures the intra- and inter-node links
#      and its profile loads in `hpcrl plan --estimate --hardware FILE`;
#   4. `sbatch -N 2 --ntasks-per-node 2 slurm/cpu.sbatch tests/slurm/two_node.yaml` (the
#      quickstart's SFT and GRPO, shortened; tp = 2 within a node, dp = 2 across)
#      preempted during GRPO with `scancel --signal=USR1 --batch`: all four ranks log the
#      signal and exit 75, the job requeues itself, the next attempt resumes and
#      finishes; every rank reports the node and local rank `hpcrl plan` gave it;
#   5. its metrics.jsonl equals an uninterrupted -N 2 run's line for line (timing aside);
#   6. SIGKILL of rank 3 (node 2, local rank 1) during a run ends the job within
#      30 s, and the job's output names the node and the task.
#   tests/slurm/two_node_slurm.sh     (as root; exit 77 = skipped; under CI=true a skip fails)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HPCRL=${HPCRL:-$ROOT/build/hpcrl}
source "$ROOT/tests/slurm/local_slurm.sh"
source "$ROOT/tests/slurm/two_node_cluster.sh"
skip() {
  if [ "${CI:-}" = true ]; then
    echo "two_node_slurm: FAILED: cannot run under CI: $*" >&2
    exit 1
  fi
  echo "two_node_slurm: SKIPPED: $*"
  exit 77
}
why=$(two_node_check_host)
[ -z "$why" ] || skip "$why"
[ -x "$HPCRL" ] || { echo "two_node_slurm: no hpcrl binary at $HPCRL" >&2; exit 1; }
# Open MPI between the nodes over the test's veth only; ranks yield while they wait
# (four ranks share this machine's cores; spinning ones starve the rest).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE
export OMPI_MCA_mpi_yield_when_idle=1 OMPI_MCA_btl_tcp_if_include=$TWO_NODE_SUBNET
export OMPI_MCA_oob_tcp_if_include=$TWO_NODE_SUBNET

started=$SECONDS
step() { echo "== two_node_slurm [$((SECONDS - started)) s] $*"; }
fail() {
  echo "two_node_slurm: FAILED: $*" >&2
  for f in "$work"/checkout/slurm-*.out "$work"/slurm/log/slurm*.log; do
    [ -f "$f" ] && { echo "--- $f (last 30 lines)" >&2; tail -n 30 "$f" >&2; }
  done
  exit 1
}
# Under /tmp, not $TMPDIR: munge and slurmd put Unix sockets in it (paths under 108 bytes).
work=$(mktemp -d /tmp/hpcrl-2node.XXXXXX)
trap 'two_node_stop; rm -rf "$work"' EXIT
step "starting a two-node Slurm in $work/slurm"
two_node_start "$work/slurm" || fail "the cluster did not start"
on_node 1 sinfo -N -o '%N %c CPUs %m MB %T'

# 1. Where srun puts four tasks.
hosts=$(on_node 1 srun -N 2 --ntasks-per-node 2 -l hostname | sort | tr '\n' ' ')
step "srun -N 2 --ntasks-per-node 2 hostname: $hosts"
[ "$hosts" = "0: hpcrl-n1 1: hpcrl-n1 2: hpcrl-n2 3: hpcrl-n2 " ] || fail "tasks placed as: $hosts"

# A checkout the jobs run from, as a user's (the submit directory), without runs/.
mkdir -p "$work/checkout/build"
for d in slurm configs data; do ln -s "$ROOT/$d" "$work/checkout/$d"; done
ln -s "$HPCRL" "$work/checkout/build/hpcrl"
cd "$work/checkout"
# The pipeline: tests/slurm/two_node.yaml, the quickstart shortened to SFT and GRPO with
# policy and reference at tp = 2 (tp groups [0,1] and [2,3], one per node; dp across them).
config=$ROOT/tests/slurm/two_node.yaml

# 2. The rank map: tp = 2 stays in a node, tp = 4 crosses and is warned about.
step "hpcrl plan --world 4 --gpus-per-node 2 at tp = 2 and tp = 4"
"$HPCRL" plan "$config" --world 4 --gpus-per-node 2 --json > "$work/plan-tp2.json" ||
  fail "hpcrl plan at tp = 2 failed"
python3 - "$work/plan-tp2.json" <<'PY' || fail "the tp = 2 plan is not one tp group per node"
import json, sys
plan = json.load(open(sys.argv[1]))
policy = plan["roles"]["policy"]
assert policy["groups"]["tp"] == [[0, 1], [2, 3]], policy["groups"]["tp"]
assert policy["groups"]["dp"] == [[0, 2], [1, 3]], policy["groups"]["dp"]
crossing = [w for w in plan["warnings"] if "groups span nodes" in w]
assert not crossing, crossing
PY
"$HPCRL" plan "$config" --world 4 --gpus-per-node 2 --set models.policy.parallel.tp=4 \
  --set models.reference.parallel.tp=4 > "$work/plan-tp4.txt" 2>&1 || fail "hpcrl plan at tp = 4 failed"
grep -q "^warning: policy: 1 of 1 tp groups span nodes" "$work/plan-tp4.txt" ||
  fail "no warning for a tp = 4 group across 2 nodes of 2: $(grep warning "$work/plan-tp4.txt")"
grep "^warning: policy:" "$work/plan-tp4.txt"
# hpcrl run says the same on the real 2 + 2 launch (one SFT step).
on_node 1 srun --mpi=pmix -N 2 --ntasks-per-node 2 "$HPCRL" run "$config" --set models.policy.parallel.tp=4 \
  --set models.reference.parallel.tp=4 --set 'stages=[{sft: {model: policy, data: arith, steps: 1, batch: 8}}]' \
  --set run.eval_before_train=false --set run.eval_sampling.prompts=4 --out "$work/tp4-run" \
  > "$work/tp4-run.log" 2>&1 || { tail -n 20 "$work/tp4-run.log"; fail "hpcrl run at tp = 4 across the nodes failed"; }
grep -q "policy: 1 of 1 tp groups span nodes" "$work/tp4-run.log" ||
  fail "hpcrl run at tp = 4 on 2 nodes of 2 did not warn: $(grep -i warn "$work/tp4-run.log" | head -5)"

# 3. The links, measured across the two nodes.
step "srun -N 2 --ntasks-per-node 2 hpcrl calibrate"
on_node 1 srun --mpi=pmix -N 2 --ntasks-per-node 2 "$HPCRL" calibrate --out "$work/two-node.yaml" --name two-node \
  > "$work/calibrate.log" 2>&1 || { tail -n 20 "$work/calibrate.log"; fail "calibrate under srun -N 2 failed"; }
python3 - "$work/two-node.yaml" <<'PY' || { cat "$work/two-node.yaml"; fail "the profile's links are not two measured ones"; }
import re, sys
text = open(sys.argv[1]).read()
def link(name):  # calibrate writes each link on one line: `intra_node: {bandwidth: B, latency_s: L, ...}`
    m = re.search(r"^%s: \{(.*)\}$" % name, text, re.M)
    assert m, f"no {name} in the profile"
    return {k: float(v) for k, v in re.findall(r"(\w+): ([^,]+)", m.group(1))}
assert re.search(r"^gpus_per_node: 2$", text, re.M), "gpus_per_node is not 2"
assert "# inter_node: all-reduce over one rank per node (2 nodes)" in text, "the inter-node link was not measured"
intra, inter = link("intra_node"), link("inter_node")
for values in (intra, inter):
    for key in ("bandwidth", "latency_s", "p2p_bandwidth", "p2p_latency_s"):
        assert values.get(key, 0) > 0, (key, values)
assert intra != inter, "inter_node repeats intra_node"
print(f"intra_node {intra}\ninter_node {inter}")
PY
"$HPCRL" plan "$config" --world 4 --estimate --hardware "$work/two-node.yaml" > "$work/estimate.txt" 2>&1 ||
  { tail -n 20 "$work/estimate.txt"; fail "plan --estimate does not load the profile"; }
grep -m1 "per node" "$work/estimate.txt"

job_field() { on_node 1 scontrol show job "$1" | grep -o "$2=[^ ]*" | head -1 | cut -d= -f2; }
grpo_lines() {
  python3 - "$1" <<'PY'
import json, sys
try:
    lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
except FileNotFoundError:
    lines = []
print(sum(1 for j in lines if j.get("stage") == "grpo" and "reward/mean" in j))
PY
}
# wait_for_grpo JOB RUN N: until the job's run has trained N GRPO iterations.
wait_for_grpo() {
  local jid=$1 run=$2 n=$3 t0=$SECONDS
  until [ "$(grpo_lines "$run/metrics.jsonl")" -ge "$n" ]; do
    case "$(job_field "$jid" JobState)" in FAILED | CANCELLED | TIMEOUT | NODE_FAIL | COMPLETED)
      fail "job $jid ended $(job_field "$jid" JobState) before GRPO iteration $n" ;;
    esac
    [ $((SECONDS - t0)) -lt 600 ] || fail "no GRPO iteration $n of job $jid within 600 s"
    sleep 1
  done
}
wait_for_state() {  # JOB STATE LIMIT_S
  local t0=$SECONDS state
  # One read a round: the job may end between two reads (a failure once read "ended COMPLETED, not COMPLETED").
  while state=$(job_field "$1" JobState); [ "$state" != "$2" ]; do
    case "$state" in FAILED | CANCELLED | TIMEOUT | NODE_FAIL | COMPLETED)
      fail "job $1 ended $state, not $2" ;;
    esac
    [ $((SECONDS - t0)) -lt "$3" ] || fail "job $1 not $2 within $3 s (state $state)"
    sleep 1
  done
}
submit() {  # NAME RUN [hpcrl run options]: the job id
  local name=$1 run=$2
  shift 2
  on_node 1 sbatch --parsable -N 2 --ntasks-per-node 2 -J "$name" slurm/cpu.sbatch "$config" --out "$run" "$@"
}

# 4. Preempted during GRPO, requeued, resumed.
step "sbatch -N 2 --ntasks-per-node 2 slurm/cpu.sbatch tests/slurm/two_node.yaml"
jid=$(submit hpcrl-2node runs/two-node)
out=$work/checkout/slurm-hpcrl-2node-$jid.out
wait_for_grpo "$jid" runs/two-node 3
step "preempting job $jid: scancel --signal=USR1 --batch"
on_node 1 scancel --signal=USR1 --batch "$jid"
t0=$SECONDS
until [ "$(job_field "$jid" Restarts)" -ge 1 ] && [ "$(job_field "$jid" JobState)" = PENDING ]; do
  [ $((SECONDS - t0)) -lt 300 ] || fail "job $jid was not requeued within 300 s"
  sleep 1
done
# Slurm 22.05 holds a requeued job 2 minutes (BeginTime); start it now, past the
# second in which the previous attempt's credential was revoked (slurm_e2e.sh).
sleep 2
on_node 1 scontrol update JobId="$jid" StartTime=now
wait_for_state "$jid" COMPLETED 900
step "job $jid: $(job_field "$jid" JobState), exit code $(job_field "$jid" ExitCode), restarts $(job_field "$jid" Restarts)"
[ "$(job_field "$jid" ExitCode)" = 0:0 ] || fail "exit code $(job_field "$jid" ExitCode)"
[ "$(job_field "$jid" Restarts)" = 1 ] || fail "$(job_field "$jid" Restarts) restarts, expected 1"
for rank in 0 1 2 3; do
  grep -q "^\[rank $rank\] SIGUSR1 received" "$out" || fail "rank $rank did not log SIGUSR1"
done
# srun reports the tasks of a node that end together as one range
# ("srun: error: hpcrl-n2: tasks 2-3: Exited with exit code 75"), apart one by one.
for task in 0 1 2 3; do
  node=hpcrl-n$((task / 2 + 1))
  grep -qE "srun: error: $node: tasks? ($task|$((task / 2 * 2))-$((task / 2 * 2 + 1))): Exited with exit code 75" "$out" ||
    fail "task $task did not exit 75 on $node: $(grep 'Exited with exit code' "$out" | tr '\n' ';')"
done
grep 'Exited with exit code 75' "$out"
grep -q "requeueing job $jid" "$out" || fail "the job did not requeue itself"
grep -q "attempt 2 of job $jid: resuming" "$out" || fail "attempt 2 did not resume"
grep -q '(resuming)' "$out" || fail "hpcrl did not resume"
# Each rank's place as `hpcrl plan --world 4 --gpus-per-node 2` gives it (node = rank / 2,
# local device = rank % 2), in the words of the line every attempt of a rank logs.
python3 - "$work/plan-tp2.json" > "$work/planned-layout.txt" <<'PY'
import json, sys
plan = json.load(open(sys.argv[1]))
world, per_node = plan["world"], plan["gpus_per_node"]
for r in plan["roles"]["policy"]["ranks"]:
    print(f"rank {r['rank']} of {world}: node {r['node']} of {(world + per_node - 1) // per_node}, "
          f"local rank {r['local_device']} of {per_node}")
PY
for rank in 0 1 2 3; do
  layout=$(grep -o "rank $rank of [0-9]*: node [0-9]* of [0-9]*, local rank [0-9]* of [0-9]*" \
    "runs/two-node/logs/rank-0000$rank.log" | sort -u)
  expected=$(sed -n "$((rank + 1))p" "$work/planned-layout.txt")
  [ "$layout" = "$expected" ] || fail "rank $rank reported '$layout' (every attempt), the plan says '$expected'"
  echo "rank $rank: $layout (as planned)"
done

# 5. The same run, uninterrupted.
step "the same run uninterrupted (sbatch -N 2)"
ref=$(submit hpcrl-2node-ref runs/two-node-ref)
wait_for_state "$ref" COMPLETED 900
python3 "$ROOT/tests/slurm/metrics_equal.py" runs/two-node-ref/metrics.jsonl runs/two-node/metrics.jsonl ||
  fail "the preempted run's metrics differ from the uninterrupted run's"

# 6. A rank on the second node killed.
step "SIGKILL of rank 3 (node hpcrl-n2, local rank 1) during SFT"
kill_job=$(submit hpcrl-2node-kill runs/two-node-kill)
kill_out=$work/checkout/slurm-hpcrl-2node-kill-$kill_job.out
t0=$SECONDS
until grep -q '"stage": *"sft"' runs/two-node-kill/metrics.jsonl 2>/dev/null; do
  [ "$(job_field "$kill_job" JobState)" = RUNNING ] || [ $((SECONDS - t0)) -lt 120 ] ||
    fail "job $kill_job not running after 120 s"
  [ $((SECONDS - t0)) -lt 300 ] || fail "job $kill_job wrote no SFT metrics within 300 s"
  sleep 1
done
pid=$(grep -o 'rank 3 of 4: node 1 of 2, local rank 1 of 2, pid [0-9]*' runs/two-node-kill/logs/rank-00003.log |
  grep -o '[0-9]*$')
[ -n "$pid" ] || fail "rank 3's log names no pid on node 1, local rank 1"
killed_at=$(date +%s.%N)
kill -KILL "$pid"
t0=$SECONDS
while [ "$(job_field "$kill_job" JobState)" = RUNNING ]; do
  [ $((SECONDS - t0)) -lt 30 ] || fail "job $kill_job still running 30 s after rank 3 was killed"
  sleep 0.2
done
ended=$(python3 -c "import sys,time; print(f'{time.time() - float(sys.argv[1]):.1f}')" "$killed_at")
step "job $kill_job stopped running ${ended} s after the kill"
wait_for_state "$kill_job" FAILED 30
step "job $kill_job: $(job_field "$kill_job" JobState), exit code $(job_field "$kill_job" ExitCode)"
grep -q "srun: error: hpcrl-n2: task 3: Killed" "$kill_out" || fail "the job's output does not name task 3 on hpcrl-n2"
# What else the job printed about it (Open MPI's peer-lost notice, srun's task lines).
grep -E "^srun: error: hpcrl-n|Local host|Peer host|fatal" "$kill_out" | sort -u
step "passed"
