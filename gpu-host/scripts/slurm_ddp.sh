#!/usr/bin/env bash
# A real Slurm on a 2-GPU host with no network and no Slurm, and `gpu-tools trace --job` run through it on a 2-rank
# DDP job: issue 34's "the same with a real 2-GPU DDP job". As .ci/slurm does with the CUDA doubles, but with
# gpu-host/python/ddp_job.py on the GPUs:
#
#   1. Slurm and munge: used where installed, else installed from the .deb files in .gpu/debs/ (scripts/stage-slurm-
#      debs fetches them, on a Debian 12 machine) with `dpkg -i`, leaving out packages the host has already (in any
#      version, or renamed with t64 as on Ubuntu 24.04); dependencies dpkg finds missing are named and the
#      script stops. Services the packages would start are held off (policy-rc.d) while they install.
#   2. munged on a socket of its own (own key), slurmctld, and two slurmd "hosts" (gt-h1, gt-h2), each in network,
#      UTS, PID and mount namespaces of its own, each with one GPU (CUDA_VISIBLE_DEVICES 0 and 1), joined by a
#      bridge; where namespaces are refused, one slurmd (gt-h1) runs both ranks, one GPU each.
#   3. A 2-rank job, one task a host: ddp_job.py (RANK/WORLD_SIZE/LOCAL_RANK from Slurm's variables, the rendezvous
#      on gt-h1's address), rank 1 slow on purpose (--slow-rank 1: extra matrix products each step).
#   4. srun --jobid=J --overlap --nodes=N --ntasks-per-node=1 \
#        gpu-tools trace --job slurm:J --start-at +5 --duration 3 -o OUT/run-%h-%r.gputrace
#      then gpu-tools stats, stats --report stragglers (rank 1 should be named) and export --perfetto of the files.
#
# Everything is printed to $OUT/slurm_ddp.log (and the terminal). Needs root. Stage first (scripts/gpu-stage, then
# scripts/stage-slurm-debs), then on the GPU host:
#
#   bash gpu-host/scripts/slurm_ddp.sh
#
# Settings (environment): OUT (default /tmp/slurm_ddp), PYTHON (default /opt/torch/.venv/bin/python3), GT (the
# gpu-tools binary, default .gpu/bin/bin-gpu-tools), SLURM_DDP_HOSTS=1 (one slurmd even where namespaces work),
# SLURM_DDP_TASK (the job's task command instead of ddp_job.py: a dry run without a GPU; it must print
# "ready PID rank R" once running), SLURM_DDP_KEEP=1 (leave the cluster running).
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${OUT:-/tmp/slurm_ddp}
py=${PYTHON:-/opt/torch/.venv/bin/python3}
gt=${GT:-$root/.gpu/bin/bin-gpu-tools}
debs=$root/.gpu/debs
job_py=$root/.gpu/python/ddp_job.py
[ -f "$job_py" ] || job_py=$root/gpu-host/python/ddp_job.py
mkdir -p "$out"
log=$out/slurm_ddp.log
exec > >(tee "$log") 2>&1
started=$(date +%s)
say() { printf '[slurm_ddp %3ss] %s\n' "$(($(date +%s) - started))" "$*"; }
fail() {
  say "FAILED: $*"
  for f in "$out"/log/*.log "$out"/job-*.out; do
    [ -f "$f" ] && { echo "--- $f (last 30 lines)"; tail -n 30 "$f"; }
  done
  exit 1
}
say "host $(hostname), $(. /etc/os-release 2>/dev/null; echo "${PRETTY_NAME:-unknown OS}"), kernel $(uname -r)"
[ "$(id -u)" = 0 ] || fail "needs root (dpkg, the Slurm daemons, namespaces)"
[ -x "$gt" ] || fail "no gpu-tools at $gt (scripts/gpu-stage stages .gpu/bin/bin-gpu-tools)"
say "gpu-tools: $gt ($("$gt" --version 2>&1 | head -n 1))"
command -v nvidia-smi >/dev/null && nvidia-smi -L

# --- 1. packages
have_slurm() { command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null && command -v srun >/dev/null; }
if have_slurm; then
  say "Slurm already installed: $(slurmctld -V)"
else
  ls "$debs"/*.deb >/dev/null 2>&1 || fail "no Slurm here and no .deb files in $debs (scripts/stage-slurm-debs)"
  command -v dpkg >/dev/null || fail "no dpkg on this host: the .deb files cannot be installed (not Debian/Ubuntu)"
  say "installing $(ls "$debs"/*.deb | wc -l) packages ($(du -sh "$debs" | cut -f1)) from $debs with dpkg -i"
  policy=/usr/sbin/policy-rc.d
  made_policy=0
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy" && made_policy=1
  fi
  # A package the host has already (any version, or its t64 rename, as Ubuntu 24.04's libreadline8t64) is the
  # host's: installing Debian 12's over it would downgrade it, or conflict with it. Unless a staged package needs
  # exactly the staged version (munge needs its own libmunge2).
  installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }
  exact=$(for deb in "$debs"/*.deb; do dpkg-deb -f "$deb" Depends; done | tr ',' '\n' | grep -o '[a-z0-9.+-]* (= ' | cut -d' ' -f1)
  wanted=()
  for deb in "$debs"/*.deb; do
    pkg=$(dpkg-deb -f "$deb" Package)
    if { installed "$pkg" || installed "${pkg}t64"; } && ! grep -qx "$pkg" <<<"$exact"; then
      say "kept the host's own $pkg"
    else wanted+=("$deb"); fi
  done
  DEBIAN_FRONTEND=noninteractive dpkg -i "${wanted[@]}" >"$out/dpkg.txt" 2>&1
  dpkg_rc=$?
  [ "$made_policy" = 1 ] && rm -f "$policy"
  cat "$out/dpkg.txt"
  if [ "$dpkg_rc" != 0 ] || ! have_slurm; then
    echo "--- what dpkg found missing:"
    grep -E "depends on|is not installed|Version of .* on system is|dependency problems" "$out/dpkg.txt" | sort -u
    fail "dpkg -i of $debs failed (exit $dpkg_rc): the packages above need what this host lacks (stage them too, \
from the host's own distribution if it is not Debian 12); 'dpkg --configure -a' retries once they are in $debs"
  fi
  say "installed: $(slurmctld -V), munge $(munged --version 2>&1 | head -n 1)"
fi

# --- 2. the cluster
scratch=$out/cluster
# Nothing of an earlier run may be read as this one's: a job's output of the same number held its ranks' "ready"
# lines, and the trace started before this job's ranks existed (exit 1 in 64 ms, the second run on a GPU host).
rm -rf "$scratch" "$out/traces" "$out"/job-*.out "$out/trace.txt" "$out"/stragglers.*
mkdir -p "$scratch"/{state,spool,munge} "$out"/{log,traces}
chmod 700 "$scratch/munge"
hosts=(gt-h1 gt-h2)
net=10.35.0
namespaces=1
if [ "${SLURM_DDP_HOSTS:-2}" = 1 ]; then
  namespaces=0
elif ! unshare --net --uts --pid --fork --mount-proc true 2>/dev/null; then
  say "namespaces refused here (unshare --net --uts --pid): one slurmd runs both ranks"
  namespaces=0
elif ! command -v ip >/dev/null || ! ip link add gt35probe type bridge 2>/dev/null; then
  say "no bridge can be made here (ip link add type bridge): one slurmd runs both ranks"
  namespaces=0
else
  ip link del gt35probe
fi
[ "$namespaces" = 1 ] || hosts=(gt-h1)

pids=()
cleanup() {
  if [ "${SLURM_DDP_KEEP:-0}" = 1 ]; then
    say "SLURM_DDP_KEEP=1: cluster left running (SLURM_CONF=$scratch/slurm.conf)"
    return
  fi
  [ -n "${job:-}" ] && scancel "$job" 2>/dev/null
  sleep 1
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  sleep 0.5
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  for h in gt-h1 gt-h2; do ip netns del "gt35-$h" 2>/dev/null; done
  for i in 1 2; do ip link del "gt35v$i" 2>/dev/null; done
  ip link del gt35br 2>/dev/null
}
trap cleanup EXIT
for h in gt-h1 gt-h2; do ip netns del "gt35-$h" 2>/dev/null; done
for i in 1 2; do ip link del "gt35v$i" 2>/dev/null; done
ip link del gt35br 2>/dev/null

if [ "$namespaces" = 1 ]; then
  ctl_addr=$net.1
  ip link add gt35br type bridge && ip addr add "$net.1/24" dev gt35br && ip link set gt35br up \
    || fail "cannot set up the bridge"
  i=0
  for h in "${hosts[@]}"; do
    i=$((i + 1))
    ip netns add "gt35-$h" || fail "ip netns add refused"
    ip link add "gt35v$i" type veth peer name eth0 netns "gt35-$h" || fail "cannot create a veth pair"
    ip link set "gt35v$i" master gt35br up
    ip -n "gt35-$h" addr add "$net.1$i/24" dev eth0
    ip -n "gt35-$h" link set eth0 up
    ip -n "gt35-$h" link set lo up
    ip -n "gt35-$h" route add default via "$net.1"
  done
  say "network: gt35br $net.1, gt-h1 $net.11, gt-h2 $net.12"
else
  ctl_addr=127.0.0.1
fi

munge_socket=$scratch/munge/munge.socket
dd if=/dev/urandom of="$scratch/munge/munge.key" bs=1024 count=1 2>/dev/null
chmod 400 "$scratch/munge/munge.key"
munged --force --socket="$munge_socket" --key-file="$scratch/munge/munge.key" --pid-file="$scratch/munge/munged.pid" \
  --log-file="$out/log/munged.log" --seed-file="$scratch/munge/seed" || fail "munged did not start"
pids+=("$(cat "$scratch/munge/munged.pid")")
munge -S "$munge_socket" -n | unmunge -S "$munge_socket" >/dev/null || fail "munge credentials do not round-trip"

conf=$scratch/slurm.conf
# slurmctld runs on this host, under its own name (it refuses a SlurmctldHost that is not its host name).
ctl_name=$(hostname -s)
{
  cat <<EOF
ClusterName=gputools
SlurmctldHost=$ctl_name($ctl_addr)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$munge_socket
StateSaveLocation=$scratch/state
SlurmdSpoolDir=$scratch/spool/%n
SlurmctldPidFile=$scratch/slurmctld.pid
SlurmdPidFile=$scratch/slurmd-%n.pid
SlurmctldLogFile=$out/log/slurmctld.log
SlurmdLogFile=$out/log/slurmd-%n.log
SlurmctldPort=6827
SlurmdPort=6828
SlurmdParameters=config_overrides
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
KillWait=2
InactiveLimit=0
EOF
  if [ "$namespaces" = 1 ]; then
    echo "NodeName=gt-h1 NodeAddr=$net.11 NodeHostname=gt-h1 CPUs=4 State=UNKNOWN"
    echo "NodeName=gt-h2 NodeAddr=$net.12 NodeHostname=gt-h2 CPUs=4 State=UNKNOWN"
  else
    echo "NodeName=gt-h1 NodeAddr=127.0.0.1 NodeHostname=gt-h1 CPUs=4 State=UNKNOWN"
  fi
  echo "PartitionName=gpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
} >"$conf"
# slurmd's cgroup/v2 plugin asks systemd over D-Bus for a scope; a GPU host without a system bus (a container) then
# fails slurmd's start ("cannot connect to dbus system daemon ... Unable to initialize cgroup plugin", Ubuntu 24.04
# host). IgnoreSystemd makes it create its cgroup folders itself (Slurm 22.05+), CgroupAutomount enables the
# controllers on them; the plugins above use no cgroup.
cat >"$scratch/cgroup.conf" <<EOF
IgnoreSystemd=yes
IgnoreSystemdOnFailure=yes
CgroupAutomount=yes
EOF
# It makes its scope in system.slice, which a cgroup v2 host without systemd lacks ("unable to open
# /sys/fs/cgroup/system.slice/cgroup.subtree_control", the second try on the GPU host): made here, empty.
# It then enables cpuset, cpu and memory in system.slice, which needs them enabled in the root's subtree_control
# ("Controller memory is not enabled!", the third try). The root of a container's cgroup namespace holds processes,
# so the kernel refuses that (EBUSY) until they move into a leaf of their own (gt-init): done only then, and said.
if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
  cg=/sys/fs/cgroup
  [ -d $cg/system.slice ] || { mkdir $cg/system.slice && say "made $cg/system.slice (cgroup v2 without systemd)"; }
  want=$(for c in cpuset cpu memory; do grep -qw $c $cg/cgroup.controllers && printf '+%s ' $c; done)
  if [ -n "$want" ] && ! echo "$want" >$cg/cgroup.subtree_control 2>/dev/null; then
    mkdir -p $cg/gt-init
    moved=0
    while read -r p; do echo "$p" >$cg/gt-init/cgroup.procs 2>/dev/null && moved=$((moved + 1)); done <$cg/cgroup.procs
    if echo "$want" >$cg/cgroup.subtree_control; then
      say "enabled ${want}in $cg/cgroup.subtree_control after moving $moved processes into $cg/gt-init"
    else
      say "could not enable ${want}in $cg/cgroup.subtree_control; slurmd will likely refuse to start"
    fi
  fi
  say "cgroup v2: root subtree_control: $(cat $cg/cgroup.subtree_control)"
fi
export SLURM_CONF=$conf
slurmctld -D -f "$conf" >"$out/log/slurmctld.out" 2>&1 &
pids+=("$!")
disown
if [ "$namespaces" = 1 ]; then
  for h in "${hosts[@]}"; do
    mkdir -p "$scratch/spool/$h"
    nsenter --net="/run/netns/gt35-$h" unshare --uts --pid --fork --kill-child --mount-proc \
      sh -c "hostname $h && exec slurmd -D -N $h -f '$conf'" >"$out/log/slurmd-$h.out" 2>&1 &
    pids+=("$!")
    disown
  done
else
  mkdir -p "$scratch/spool/gt-h1"
  slurmd -D -N gt-h1 -f "$conf" >"$out/log/slurmd-gt-h1.out" 2>&1 &
  pids+=("$!")
  disown
fi
for _ in $(seq 1 60); do
  idle=$(timeout 5 sinfo -h -N -o '%N %t' 2>/dev/null | grep -c ' idle$')
  [ "$idle" = "${#hosts[@]}" ] && break
  sleep 0.5
done
[ "$idle" = "${#hosts[@]}" ] || fail "the nodes did not come up idle: $(timeout 5 sinfo -N 2>&1 | tr '\n' ' ')"
say "slurmctld and ${#hosts[@]} slurmd up: $(sinfo -h -N -o '%N:%t' | tr '\n' ' ')"

# --- 3. the job: 2 ranks, rank 1 slow; each its own GPU
if [ "$namespaces" = 1 ]; then
  layout=(-N 2 --ntasks-per-node=1)
  master=$net.11
else
  layout=(-N 1 --ntasks=2)
  master=127.0.0.1
fi
task=${SLURM_DDP_TASK:-"'$py' -u '$job_py' --steps 1000000 --slow-rank 1 --slow-matmuls 40"}
# One GPU a rank: the host's first for rank 0, its second for rank 1 (a slurmd "host" is not a GPU boundary here).
cat >"$scratch/task.sh" <<EOF
#!/bin/sh
export RANK=\$SLURM_PROCID WORLD_SIZE=\$SLURM_NTASKS LOCAL_RANK=0 MASTER_ADDR=$master MASTER_PORT=29535
export CUDA_VISIBLE_DEVICES=\$SLURM_PROCID
exec $task
EOF
chmod +x "$scratch/task.sh"
job=$(sbatch --parsable "${layout[@]}" --chdir="$out" -o "$out/job-%j.out" \
  --wrap "srun --kill-on-bad-exit=1 '$scratch/task.sh'") || fail "sbatch refused the job"
say "job $job submitted: $(squeue -h -j "$job" -o '%T %N' 2>&1)"
for _ in $(seq 1 240); do
  ready=$(grep -cE '^ready |: ready' "$out/job-$job.out" 2>/dev/null)
  [ "$ready" = 2 ] && break
  state=$(squeue -h -j "$job" -o %T 2>/dev/null)
  [ -z "$state" ] && fail "job $job ended before its ranks were ready"
  sleep 0.5
done
[ "$ready" = 2 ] || fail "the job's 2 ranks were not ready within 120 s"
grep -E '^ready |: ready' "$out/job-$job.out"
sleep 2

# --- 4. the recipe, through the job's own launcher
nodes=${#hosts[@]}
say "srun --jobid=$job --overlap --nodes=$nodes --ntasks-per-node=1 $gt trace --job slurm:$job --start-at +5 --duration 3 -o $out/traces/run-%h-%r.gputrace"
t0=$(date +%s%N)
timeout 120 srun --jobid="$job" --overlap --nodes="$nodes" --ntasks-per-node=1 \
  "$gt" trace --job "slurm:$job" --start-at +5 --duration 3 -o "$out/traces/run-%h-%r.gputrace" \
  >"$out/trace.txt" 2>&1
code=$?
say "srun trace exit $code in $((($(date +%s%N) - t0) / 1000000)) ms"
# Its notes and warnings, without the record listing and the summary tables.
grep -vE '^\s*[0-9]+\s|^(kernel|copy|set|memcpy|memset)  ' "$out/trace.txt" | cut -c1-300 | head -60
ls -l "$out/traces"
files=("$out"/traces/run-*.gputrace)
[ -e "${files[0]}" ] || fail "no trace file written"

say "gpu-tools stats --report processes,cuda_gpu_kern_sum"
"$gt" stats --report processes,cuda_gpu_kern_sum "${files[@]}" 2>&1 | cut -c1-250 | head -40
say "gpu-tools stats --report stragglers"
"$gt" stats --report stragglers "${files[@]}" 2>&1 | tee "$out/stragglers.txt"
"$gt" stats --report stragglers --format json "${files[@]}" >"$out/stragglers.json" 2>/dev/null
say "gpu-tools export --perfetto $out/run.pftrace"
"$gt" export --perfetto "$out/run.pftrace" "${files[@]}" 2>&1 | tail -5
ls -l "$out/run.pftrace"
if grep -q "rank 1 on [^ ]* enters collectives last" "$out/stragglers.txt"; then
  say "the straggler is named: $(grep -o 'rank 1 on [^ ]* enters collectives last[^;]*' "$out/stragglers.txt" | head -1)"
else
  say "NOTE: stats --report stragglers did not name rank 1 (the slow one) as the straggler"
fi
say "the job's output (last 10 lines):"
tail -n 10 "$out/job-$job.out"
say "done in $(($(date +%s) - started)) s; log: $log"
