#!/usr/bin/env bash
# Brings up a single-node Slurm cluster on this machine for the Slurm executor's tests
# (issue 15): installs slurm-wlm and munge from Debian, writes a minimal slurm.conf for this
# node (proctrack/linuxproc, task/none, one partition, the node's real CPU count, jobs may
# oversubscribe the CPUs so several run at once), starts munged, slurmctld and slurmd, and waits
# until `sinfo` shows the node idle. Idempotent: a cluster that is already up is left as it is.
# Needs root. Exits non-zero, saying why, when the cluster does not come up.
#
# Checked on this kind of machine (Debian 12, slurm-wlm 22.05: three `sbatch` jobs ran at once on
# the 2-CPU node). `.ci/run` runs it before `cargo test`; the Slurm tests (tests/e2e/slurm.rs)
# skip visibly without a cluster and fail under CI=true.
set -euo pipefail

log() { echo "slurm-up: $*" >&2; }

if [ "$(id -u)" -ne 0 ]; then
  log "must run as root (it installs packages and starts daemons)"
  exit 2
fi

if command -v sinfo >/dev/null 2>&1 && timeout 10 sinfo -h -o '%T' 2>/dev/null | grep -qE '^(idle|mixed|allocated)'; then
  log "cluster already up: $(sinfo -h -o '%N %T %c')"
  exit 0
fi

if ! command -v slurmctld >/dev/null 2>&1 || ! command -v munged >/dev/null 2>&1; then
  log "installing slurm-wlm and munge"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    slurm-wlm munge >/dev/null
fi

node=$(hostname -s)
cpus=$(nproc)
# RealMemory in MiB, a little below the total so slurmd never reports less than configured.
mem_mib=$(awk '/MemTotal/ { printf "%d", $2 / 1024 * 0.9 }' /proc/meminfo)

conf_dir=/etc/slurm
mkdir -p "$conf_dir" /var/spool/slurmctld /var/spool/slurmd /var/log/slurm /run/munge
chown slurm:slurm /var/spool/slurmctld /var/log/slurm 2>/dev/null || true

cat >"$conf_dir/slurm.conf" <<CONF
# Written by ci/slurm-up.sh: a single-node test cluster.
ClusterName=apollo-test
SlurmctldHost=$node
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
# Quick turnaround for tests: jobs are polled, killed and cleaned up fast.
SchedulerParameters=sched_interval=1
MessageTimeout=10
KillWait=5
MinJobAge=300
InactiveLimit=0
NodeName=$node CPUs=$cpus RealMemory=$mem_mib State=UNKNOWN
PartitionName=debug Nodes=$node Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:8
CONF
# No cgroup.conf: proctrack/linuxproc and task/none need no cgroups (containers often lack a
# writable cgroup tree).
rm -f "$conf_dir/cgroup.conf"

# munge: a key, then the daemon.
if [ ! -s /etc/munge/munge.key ]; then
  log "creating the munge key"
  mkdir -p /etc/munge
  dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key status=none
fi
chown -R munge:munge /etc/munge /run/munge /var/lib/munge /var/log/munge 2>/dev/null || true
chmod 0700 /etc/munge; chmod 0400 /etc/munge/munge.key
if ! pgrep -x munged >/dev/null; then
  log "starting munged"
  runuser -u munge -- /usr/sbin/munged --force
fi
for _ in $(seq 1 50); do munge -n >/dev/null 2>&1 && break; sleep 0.2; done
munge -n | unmunge >/dev/null || { log "munge does not work"; exit 1; }

start_daemon() {
  local name=$1 log_file=$2
  pgrep -x "$name" >/dev/null && return 0
  log "starting $name"
  if ! "/usr/sbin/$name"; then
    log "$name did not start; the end of $log_file:"
    tail -n 20 "$log_file" >&2 || true
    exit 1
  fi
}
start_daemon slurmctld /var/log/slurm/slurmctld.log
start_daemon slurmd /var/log/slurm/slurmd.log

# Wait (up to 60 s) for the node to be idle.
for _ in $(seq 1 120); do
  state=$(timeout 10 sinfo -h -o '%T' 2>/dev/null | head -n 1 || true)
  case "$state" in
    idle|mixed|allocated) log "cluster up: $(sinfo -h -o '%P %N %T cpus=%c')"; exit 0 ;;
    down*|drain*) scontrol update nodename="$node" state=resume >/dev/null 2>&1 || true ;;
  esac
  sleep 0.5
done
log "the node did not become idle within 60 s; sinfo says: $(sinfo 2>&1 | tail -n 3)"
tail -n 20 /var/log/slurm/slurmctld.log /var/log/slurm/slurmd.log >&2 || true
exit 1
