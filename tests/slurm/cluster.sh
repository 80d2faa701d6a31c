#!/usr/bin/env bash
# A single-node SLURM on this machine, for the slurm test tier (tests/slurm/, `make test-slurm`):
#   tests/slurm/cluster.sh up     install what is missing, then start munged, MariaDB, slurmdbd, slurmctld, slurmd
#   tests/slurm/cluster.sh down   end them, by the process ids in their pid files, in the reverse order
#   tests/slurm/cluster.sh env    the line to source: export SLURM_CONF=...
# Everything lives under $ALIGN_KIT_SLURM_DIR (default /var/lib/align-kit-slurm): its own slurm.conf (clients find it
# through SLURM_CONF), munge key, database, spool and logs; no file in /etc is written (munged's socket is the default
# one in /run/munge, where every client looks). `up` on a running
# cluster checks it and changes nothing. Needs root and apt-get (Debian's slurm-wlm 22.05, munge, slurmdbd,
# mariadb-server). Accounting (slurmdbd over MariaDB) is part of it because submitit follows its jobs with sacct:
# without it a job that the scheduler ends before it writes its result (scancel, a time limit) is never seen to end.
set -euo pipefail

DIR=${ALIGN_KIT_SLURM_DIR:-/var/lib/align-kit-slurm}
CONF=$DIR/etc/slurm.conf
HOST=$(hostname -s)
CLUSTER=alignkit
DB_PORT=${ALIGN_KIT_SLURM_DB_PORT:-3317}
PACKAGES=(slurm-wlm slurmdbd munge mariadb-server)
# What each daemon's binary is, to tell a live daemon from a reused process id.
declare -A BINARY=([munged]=munged [mariadbd]=mariadbd [slurmdbd]=slurmdbd [slurmctld]=slurmctld [slurmd]=slurmd)

say() { echo "slurm cluster: $*" >&2; }
die() { say "$*"; exit 1; }

# The pid in $1's pid file when that process is alive and is the daemon $2 (not another process given its id).
live_pid() {
	local file=$1 name=$2 pid
	[ -s "$file" ] || return 1
	pid=$(tr -dc 0-9 <"$file")
	[ -n "$pid" ] && [ -r "/proc/$pid/comm" ] || return 1
	[ "$(cat "/proc/$pid/comm")" = "${BINARY[$name]}" ] && echo "$pid"
}

# Wait up to $2 seconds for the command $1 to succeed; the log $3 is shown when it never does.
wait_for() {
	local what=$1 seconds=$2 log=$3
	for _ in $(seq $((seconds * 5))); do
		if eval "$what" >/dev/null 2>&1; then return 0; fi
		sleep 0.2
	done
	say "gave up after ${seconds}s waiting for: $what"
	[ -f "$log" ] && tail -20 "$log" >&2
	return 1
}

install() {
	local missing=()
	command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v sbatch >/dev/null || missing+=(slurm-wlm)
	command -v slurmdbd >/dev/null || missing+=(slurmdbd)
	command -v munged >/dev/null || missing+=(munge)
	command -v mariadbd >/dev/null || missing+=(mariadb-server)
	[ ${#missing[@]} -eq 0 ] && return 0
	[ "$(id -u)" = 0 ] || die "not root: cannot install ${missing[*]} (apt-get install ${PACKAGES[*]} as root)"
	command -v apt-get >/dev/null || die "no apt-get: install ${missing[*]} (Debian's packages) by hand"
	say "installing ${missing[*]} with apt-get"
	export DEBIAN_FRONTEND=noninteractive
	# Debian's postinst scripts would start the daemons with the packaged configs: policy-rc.d denies that.
	local policy=/usr/sbin/policy-rc.d kept=""
	[ -e $policy ] && kept=$(mktemp) && cp -p $policy "$kept"
	printf '#!/bin/sh\nexit 101\n' >$policy && chmod 755 $policy
	{ apt-get install -y -qq "${missing[@]}" >/dev/null 2>&1 ||
		{ apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq "${missing[@]}" >/dev/null 2>&1; }; } ||
		{ restore_policy "$kept"; die "apt-get could not install ${missing[*]}"; }
	restore_policy "$kept"
}

restore_policy() {
	if [ -n "$1" ]; then mv "$1" /usr/sbin/policy-rc.d; else rm -f /usr/sbin/policy-rc.d; fi
}

write_configs() {
	mkdir -p "$DIR"/{etc,log,run,state,spool,munge,db}
	chmod 755 "$DIR"
	local memory
	memory=$(awk '/MemTotal/ {print int($2 / 1024 * 0.9)}' /proc/meminfo) # a little under the machine's
	cat >"$CONF" <<EOF
# Written by tests/slurm/cluster.sh: one node, CPUs=2, accounting through slurmdbd.
ClusterName=$CLUSTER
SlurmctldHost=$HOST
SlurmUser=root
AuthType=auth/munge
# A requeued job is held this long before it may start again (120 s by default): 10 keeps the tier short.
AuthInfo=cred_expire=10
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
SlurmctldPort=6817
SlurmdPort=6818
ReturnToService=2
MpiDefault=none
# A job's steps get SIGTERM, then SIGKILL this many seconds later (scancel, a time limit); 30 by default.
KillWait=10
InactiveLimit=0
MinJobAge=300
JobRequeue=1
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=6819
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
NodeName=$HOST CPUs=2 RealMemory=$memory State=UNKNOWN
PartitionName=debug Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
EOF
	# slurmdbd reads slurmdbd.conf beside slurm.conf (SLURM_CONF's folder); it holds a password: root only.
	(
		umask 077
		cat >"$DIR/etc/slurmdbd.conf" <<EOF
AuthType=auth/munge
DbdHost=localhost
DbdPort=6819
SlurmUser=root
PidFile=$DIR/run/slurmdbd.pid
LogFile=$DIR/log/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=align-kit-test
StorageLoc=slurm_acct_db
EOF
	)
	chmod 600 "$DIR/etc/slurmdbd.conf"
}

start_munge() {
	live_pid "$DIR/munge/munged.pid" munged >/dev/null && return 0
	chown munge: "$DIR/munge" && chmod 700 "$DIR/munge"
	if [ ! -s "$DIR/munge/munge.key" ]; then
		head -c 1024 /dev/urandom >"$DIR/munge/munge.key"
	fi
	chown munge: "$DIR/munge/munge.key" && chmod 400 "$DIR/munge/munge.key"
	# Munge's default socket: every client (sacctmgr among them) looks there, whatever slurm.conf says.
	mkdir -p /run/munge && chown munge: /run/munge && chmod 755 /run/munge
	runuser -u munge -- munged --key-file="$DIR/munge/munge.key" --socket=/run/munge/munge.socket.2 \
		--pid-file="$DIR/munge/munged.pid" --log-file="$DIR/munge/munged.log" --seed-file="$DIR/munge/munged.seed"
	wait_for "live_pid $DIR/munge/munged.pid munged" 10 "$DIR/munge/munged.log"
}

start_database() {
	live_pid "$DIR/run/mariadbd.pid" mariadbd >/dev/null && return 0
	chown mysql: "$DIR/db"
	if [ ! -d "$DIR/db/mysql" ]; then
		mariadb-install-db --user=mysql --datadir="$DIR/db" --skip-test-db --auth-root-authentication-method=socket \
			>"$DIR/log/mariadb-install.log" 2>&1 || { tail -20 "$DIR/log/mariadb-install.log" >&2; die "mariadb-install-db failed"; }
	fi
	cat >"$DIR/etc/db-init.sql" <<EOF
CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'align-kit-test';
CREATE DATABASE IF NOT EXISTS slurm_acct_db;
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
EOF
	chown mysql: "$DIR/etc/db-init.sql"
	touch "$DIR/log/mariadb.log" && chown mysql: "$DIR/log/mariadb.log" "$DIR/run"
	setsid mariadbd --no-defaults --user=mysql --datadir="$DIR/db" --socket="$DIR/run/mariadbd.sock" \
		--pid-file="$DIR/run/mariadbd.pid" --log-error="$DIR/log/mariadb.log" --bind-address=127.0.0.1 \
		--port="$DB_PORT" --init-file="$DIR/etc/db-init.sql" --innodb-buffer-pool-size=64M \
		--innodb-log-file-size=64M --innodb-lock-wait-timeout=900 </dev/null >/dev/null 2>&1 &
	wait_for "live_pid $DIR/run/mariadbd.pid mariadbd && [ -S $DIR/run/mariadbd.sock ]" 60 "$DIR/log/mariadb.log"
}

start_slurm() {
	export SLURM_CONF=$CONF
	if ! live_pid "$DIR/run/slurmdbd.pid" slurmdbd >/dev/null; then
		slurmdbd
		wait_for "sacctmgr -n show cluster" 60 "$DIR/log/slurmdbd.log"
	fi
	if ! live_pid "$DIR/run/slurmctld.pid" slurmctld >/dev/null; then
		slurmctld
		wait_for "scontrol ping | grep -q UP" 30 "$DIR/log/slurmctld.log"
	fi
	if ! live_pid "$DIR/run/slurmd.pid" slurmd >/dev/null; then
		slurmd
	fi
	wait_for "sinfo -h -N -o %t | grep -Eq '^(idle|mix|alloc)'" 60 "$DIR/log/slurmd.log"
	wait_for "sacctmgr -n -P show cluster format=cluster | grep -qx $CLUSTER" 30 "$DIR/log/slurmctld.log"
}

stop_one() {
	local file=$1 name=$2 pid
	pid=$(live_pid "$file" "$name") || return 0
	kill "$pid"
	for _ in $(seq 100); do
		[ -d "/proc/$pid" ] || return 0
		sleep 0.1
	done
	say "$name ($pid) still running after 10 s: SIGKILL"
	kill -KILL "$pid" 2>/dev/null || true
}

case ${1:-} in
up)
	install
	write_configs
	start_munge
	start_database
	start_slurm
	say "up: $(SLURM_CONF=$CONF sinfo -h -o '%P %a %D nodes %t, %c CPUs')  (SLURM_CONF=$CONF)"
	;;
down)
	if live_pid "$DIR/run/slurmctld.pid" slurmctld >/dev/null; then # no job step outlives the cluster
		jobs=$(SLURM_CONF=$CONF squeue -h -o %A | sort -u | tr '\n' ' ')
		[ -z "$jobs" ] || { SLURM_CONF=$CONF scancel $jobs && sleep 1; }
	fi
	stop_one "$DIR/run/slurmd.pid" slurmd
	stop_one "$DIR/run/slurmctld.pid" slurmctld
	stop_one "$DIR/run/slurmdbd.pid" slurmdbd
	stop_one "$DIR/run/mariadbd.pid" mariadbd
	stop_one "$DIR/munge/munged.pid" munged
	say "down"
	;;
env)
	echo "export SLURM_CONF=$CONF"
	;;
*)
	echo "usage: $0 up|down|env" >&2
	exit 2
	;;
esac
