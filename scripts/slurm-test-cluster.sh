#!/bin/bash
# slurm-test-cluster.sh: a whole Slurm cluster with isostack on one host, for
# the end-to-end tests of the Slurm integration (issue 15, tests/e2e/
# test_slurm.py) and for trying it by hand (docs/slurm.md, "Test cluster").
# Everything lives under STATE_DIR: nothing in /etc, no system socket, no
# fixed port, so several clusters (and the machine's own Slurm or munge, if
# any) never meet.
#
# Usage: scripts/slurm-test-cluster.sh start|stop|status STATE_DIR
#        scripts/slurm-test-cluster.sh restart COMPONENT STATE_DIR
#   start   brings up whatever of the cluster is not running (so a second
#           start after a component died restarts just that one) and waits
#           until it works; prints, as its LAST three lines, shell to eval:
#           export SLURM_CONF=... / ISOSTACK_URL=... / ISOSTACK_TOKEN=...
#   stop    cancels the cluster's jobs, then stops every process start
#           started (by pid file, never by name), waiting until each is
#           gone; nothing running: nothing to do. Removes nothing.
#   status  one line per component; exit 0 when all run, 3 when none, 1 else
#   restart stops one component (slurmctld, isostackd, opensm, munged, a
#           slurmd nX, an agent agent-nX) and starts it again (as start does:
#           slurmctld keeps its state, isostackd its store).
#
# What runs (pid files in STATE_DIR/run, logs in STATE_DIR/log):
#   - munged on a private socket (STATE_DIR/munge/munge.socket), its own key;
#     Slurm is pointed at it by AuthInfo=socket=...
#   - slurmctld (-D -i) and four slurmd (-D -N n1..n4) of Debian's slurm-wlm,
#     which is built with MULTIPLE_SLURMD: NodeHostname=localhost, one Port
#     each, %n in the spool dir, pid and log files. proctrack/linuxproc,
#     task/none, select/cons_tres, no accounting, SlurmUser=root (CI runs as
#     root). CPUs= per node is the host's core count; SlurmdParameters=
#     config_overrides lets all four claim the same cores.
#   - PlugStackConfig=STATE_DIR/slurm/plugstack.conf: `required
#     build/slurm/isostack.so agent_state_dir=STATE_DIR/agent/%n` (with
#     allow_no_sandbox=1 when sandboxes are off) when the plugin is built,
#     else no line (a warning).
#   - PrologSlurmctld/EpilogSlurmctld: STATE_DIR/slurm/prolog.sh, epilog.sh,
#     which exec `isoctl slurm prolog|epilog` with ISOSTACK_URL and
#     ISOSTACK_TOKEN_FILE, a cluster-admin token of its own (0600), when
#     isoctl has the slurm command, else they exit 0 (a warning).
#   - ibsim + OpenSM on the fabric of examples/cluster-slurm.yaml
#     (scripts/ibsim-fabric.sh in STATE_DIR/ib; net file by `isoctl fabric
#     ibsim-net`), isostackd with the opensm driver (cwd STATE_DIR, store in
#     STATE_DIR/isostack), one isostack-agent per node (--node nX,
#     --state-dir STATE_DIR/agent/nX, a node-agent token each) with the nvml
#     driver over the fake NVML of tests/fakes (two H100-80GB, MIG on, per
#     node; the fake's state in STATE_DIR/nvml/nX.json) and the ibsim VF
#     driver.
#   - Tenants acme and globex with quotas: acme 4 whole GPUs and 28 H100
#     slices, globex 1 whole GPU and 7 slices, no borrowing; so a 2-GPU job
#     of globex is over quota.
#
# Sandboxes (SANDBOX_MODE, chosen at the first start, kept in
# STATE_DIR/sandbox-mode):
#   off   (default) --sandbox off, and allow_no_sandbox=1 for the plugin:
#         jobs get their MIG devices and P_Key, in no sandbox.
#   real  --sandbox real: each agent (its own --state-dir) makes a sandbox
#         per member and the plugin joins each task to it. Root only;
#         STATE_DIR must not be under /tmp (a sandbox's /tmp is its own:
#         the slurmd spool and the job files would be hidden from the
#         tasks); jobs must be submitted as a user (the plugin refuses a
#         sandbox to uid 0). Test-only artifact: the four nodes are one
#         host, so each agent hands out the same cores as its own, and
#         members on different nodes overlap (never within one node).
# Environment: BUILD (build, relative to the repository), SLURMCTLD_PORT,
# SLURMD_PORT (the first of four), ISOSTACK_PORT (default: free ports,
# chosen at the first start and kept in STATE_DIR/ports), SLURM_NODE_CPUS
# (default nproc), SLURM_NODE_MEMORY_MB (default 4096), WAIT_S (60: the
# bound on each wait), PROLOG_TIMEOUT_S (30: `isoctl slurm prolog --timeout`),
# FABRIC_MODE (chosen at the first start and kept in STATE_DIR/fabric-mode):
#   ibsim       (default) ibsim + OpenSM on the 4-node fabric of
#               examples/cluster-slurm.yaml, the opensm driver;
#   sim         no ibsim, no OpenSM: isostackd's sim fabric driver, the agents'
#               sim VF driver (bench/slurm/start.py's baseline fabric);
#   ibsim-1000  ibsim + OpenSM on bench/fabric's 1,000-HCA fat tree
#               (`isoctl fabric ibsim-net --synthetic 1000 --vfs 0`), its first
#               four HCAs renamed n1..n4 and given the test nodes' class (2
#               H100, 4 VFs); the other 996 have no agent and no GPUs.
# Exit 77 when slurmctld, slurmd, munged, ibsim or opensm (ibsim modes) is
# missing (tests skip).
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-build}
case "$BUILD" in /*) ;; *) BUILD=$REPO/$BUILD ;; esac
ISOCTL=$BUILD/isoctl
FABRIC=$REPO/scripts/ibsim-fabric.sh
CONFIG_SRC=$REPO/examples/cluster-slurm.yaml
NODES=(n1 n2 n3 n4)
WAIT_S=${WAIT_S:-60}
FABRIC_MODE_ASKED=${FABRIC_MODE:-}
SANDBOX_MODE_ASKED=${SANDBOX_MODE:-}
PROLOG_TIMEOUT_S=${PROLOG_TIMEOUT_S:-30}

say() { echo "slurm-test-cluster: $*" >&2; }
die() {
	say "$*"
	exit 1
}
usage() {
	echo "usage: $0 start|stop|status STATE_DIR | restart COMPONENT STATE_DIR" >&2
	exit 2
}

[ $# -ge 2 ] || usage
cmd=$1
component=
if [ "$cmd" = restart ]; then
	[ $# -eq 3 ] || usage
	component=$2
	shift
fi
[ $# -eq 2 ] || usage
case "$2" in
/*) S=$2 ;;
*) S=$(pwd)/$2 ;;
esac
S=${S%/}

RUN=$S/run
LOG=$S/log
SLURM_DIR=$S/slurm
MUNGE_DIR=$S/munge
IB=$S/ib
ISO=$S/isostack
AGENTS=$S/agent
NVML=$S/nvml
CONF=$SLURM_DIR/slurm.conf
MUNGE_SOCK=$MUNGE_DIR/munge.socket
ADMIN_TOKEN=$ISO/admin.token
PROLOG_TOKEN=$SLURM_DIR/prolog.token
PLUGIN=$BUILD/slurm/isostack.so
FAKE_NVML=$BUILD/tests/fakes/libnvidia-ml.so.1
# munge's socket path must fit sun_path (108 bytes, with munge's ".lock").
[ ${#MUNGE_SOCK} -le 96 ] || die "STATE_DIR is too long for a unix socket path: $S"

# ---- processes ----

# A zombie counts as gone: where nobody reaps orphans, kill -0 still works on one.
running() { kill -0 "$1" 2>/dev/null && ! grep -q ') Z ' "/proc/$1/stat" 2>/dev/null; }
alive() { [ -s "$RUN/$1.pid" ] && running "$(cat "$RUN/$1.pid")"; }

# wait_for SECONDS COMMAND...: polls every 0.1 s
wait_for() {
	local n=$(($1 * 10))
	shift
	while [ "$n" -gt 0 ]; do
		if "$@"; then return 0; fi
		sleep 0.1
		n=$((n - 1))
	done
	return 1
}

# wait_up NAME SECONDS COMMAND...: wait_for, but gives up as soon as the
# process NAME (run/NAME.pid) is gone.
wait_up() {
	local name=$1 n=$(($2 * 10))
	shift 2
	while [ "$n" -gt 0 ]; do
		if "$@"; then return 0; fi
		alive "$name" || {
			say "$name exited"
			return 1
		}
		sleep 0.1
		n=$((n - 1))
	done
	return 1
}

# spawn NAME COMMAND...: runs COMMAND in the foreground of its own session
# (detached from the caller's terminal and signals), output to log/NAME.log,
# its pid in run/NAME.pid. setsid does not fork here (the subshell is no
# process group leader), so $! is the daemon's own pid.
spawn() {
	local name=$1
	shift
	(exec setsid "$@") </dev/null >>"$LOG/$name.log" 2>&1 &
	echo $! >"$RUN/$name.pid"
}

# stop_pid NAME: SIGTERM, up to 10 s, then SIGKILL; removes the pid file.
stop_pid() {
	local name=$1 pid
	if alive "$name"; then
		pid=$(cat "$RUN/$name.pid")
		kill "$pid" 2>/dev/null || true
		wait_for 10 sh -c "! kill -0 $pid 2>/dev/null || grep -q ') Z ' /proc/$pid/stat 2>/dev/null" || {
			say "$name ($pid) did not stop on SIGTERM: SIGKILL"
			kill -9 "$pid" 2>/dev/null || true
			wait_for 5 sh -c "! kill -0 $pid 2>/dev/null || grep -q ') Z ' /proc/$pid/stat 2>/dev/null" || true
		}
	fi
	rm -f "$RUN/$name.pid"
}

log_tail() {
	local f
	for f in "$@"; do
		[ -f "$f" ] || continue
		echo "--- last lines of $f:" >&2
		tail -n 15 "$f" >&2
	done
}

need_tools() {
	local t
	for t in slurmctld slurmd munged munge sinfo sbatch scontrol squeue scancel; do
		if ! command -v "$t" >/dev/null && [ ! -x "/usr/sbin/$t" ]; then
			say "$t is missing (apt-get install slurmctld slurmd slurm-client munge; scripts/deps.sh)"
			exit 77
		fi
	done
	for t in isoctl isostackd isostack-agent; do
		[ -x "$BUILD/$t" ] || die "$BUILD/$t is not built (ninja -C $BUILD)"
	done
	[ -f "$FAKE_NVML" ] || die "$FAKE_NVML is not built (ninja -C $BUILD)"
}
PATH=$PATH:/usr/sbin:/sbin

# ---- ports ----

port_free() { ! ss -Htan "( sport = :$1 )" 2>/dev/null | grep -q .; }

# free_ports N: the first of N consecutive free TCP ports, from a random start.
free_ports() {
	local n=$1 base i ok
	for _ in $(seq 200); do
		base=$((20000 + RANDOM % 30000))
		ok=1
		for i in $(seq 0 $((n - 1))); do
			port_free $((base + i)) || {
				ok=0
				break
			}
		done
		[ $ok -eq 1 ] && {
			echo $base
			return 0
		}
	done
	die "no $n consecutive free TCP ports found"
}

# The ports are chosen once and kept: a restarted component gets its old one.
load_ports() {
	if [ -f "$S/ports" ]; then
		# shellcheck disable=SC1091
		. "$S/ports"
	fi
	SLURMCTLD_PORT=${SLURMCTLD_PORT:-$(free_ports 1)}
	SLURMD_PORT=${SLURMD_PORT:-$(free_ports 4)}
	ISOSTACK_PORT=${ISOSTACK_PORT:-$(free_ports 1)}
	printf 'SLURMCTLD_PORT=%s\nSLURMD_PORT=%s\nISOSTACK_PORT=%s\n' \
		"$SLURMCTLD_PORT" "$SLURMD_PORT" "$ISOSTACK_PORT" >"$S/ports"
	URL=http://127.0.0.1:$ISOSTACK_PORT
}

# ---- the fabric ----

# The mode is chosen once and kept: a restarted cluster keeps its fabric.
load_fabric_mode() {
	local kept=
	[ -f "$S/fabric-mode" ] && kept=$(cat "$S/fabric-mode")
	FABRIC_MODE=${kept:-${FABRIC_MODE_ASKED:-ibsim}}
	case "$FABRIC_MODE" in
	ibsim | sim | ibsim-1000) ;;
	*) die "FABRIC_MODE: '$FABRIC_MODE' is not one of ibsim, sim, ibsim-1000" ;;
	esac
	[ -z "$FABRIC_MODE_ASKED" ] || [ "$FABRIC_MODE_ASKED" = "$FABRIC_MODE" ] ||
		die "FABRIC_MODE=$FABRIC_MODE_ASKED, but $S was started with $FABRIC_MODE (stop it and use a fresh STATE_DIR)"
	echo "$FABRIC_MODE" >"$S/fabric-mode"
}

has_ibsim() { [ "$FABRIC_MODE" != sim ]; }

# ---- the sandboxes ----

# The mode is chosen once and kept (STATE_DIR/sandbox-mode): a restarted
# agent serves the same kind of members it made.
load_sandbox_mode() {
	local kept=
	[ -f "$S/sandbox-mode" ] && kept=$(cat "$S/sandbox-mode")
	SANDBOX_MODE=${kept:-${SANDBOX_MODE_ASKED:-off}}
	case "$SANDBOX_MODE" in
	real | off) ;;
	*) die "SANDBOX_MODE: '$SANDBOX_MODE' is not one of real, off" ;;
	esac
	[ -z "$SANDBOX_MODE_ASKED" ] || [ "$SANDBOX_MODE_ASKED" = "$SANDBOX_MODE" ] ||
		die "SANDBOX_MODE=$SANDBOX_MODE_ASKED, but $S was started with $SANDBOX_MODE (stop it and use a fresh STATE_DIR)"
	if [ "$SANDBOX_MODE" = real ]; then
		[ "$(id -u)" -eq 0 ] || die "SANDBOX_MODE=real needs root (the agents make cgroups and namespaces)"
		# A sandbox has a /tmp of its own: a task that joined it could
		# neither exec its batch script (in the slurmd spool) nor see the
		# job's files if they were under the host's /tmp.
		case "$S/" in
		/tmp/*) die "SANDBOX_MODE=real: STATE_DIR must not be under /tmp (a job's sandbox has a private /tmp, which would hide the slurmd spool and the job's files from its tasks): use /var/tmp/..." ;;
		esac
	fi
	echo "$SANDBOX_MODE" >"$S/sandbox-mode"
}

# cluster_config: writes STATE_DIR/cluster.yaml, isostackd's inventory, for
# the mode: the example itself (ibsim), the example on the sim driver (sim),
# or the synthetic fat tree with n1..n4 in it (ibsim-1000).
cluster_config() {
	case "$FABRIC_MODE" in
	ibsim) cp "$CONFIG_SRC" "$S/cluster.yaml" ;;
	sim)
		# the same inventory; the sim driver takes none of OpenSM's keys
		sed -e 's/^  driver: opensm$/  driver: sim/' \
			-e '/^  \(partitions_file\|pid_file\|log_file\|coalesce_ms\|confirm_timeout_ms\):/d' \
			"$CONFIG_SRC" >"$S/cluster.yaml.tmp"
		grep -q '^  driver: sim$' "$S/cluster.yaml.tmp" || die "$CONFIG_SRC: no 'driver: opensm' line to replace"
		mv "$S/cluster.yaml.tmp" "$S/cluster.yaml"
		;;
	ibsim-1000)
		[ -s "$S/cluster.yaml" ] && return 0 # generated once: the net file matches it
		"$ISOCTL" fabric ibsim-net --synthetic 1000 --vfs 0 --inventory-out "$S/synthetic.yaml" \
			>/dev/null || die "isoctl fabric ibsim-net --synthetic 1000 failed"
		# The synthetic nodes n00001..n00004 (one leaf) become n1..n4 of class
		# h100x2 (the example's: 2 H100 with MIG, 4 VFs right after the PF's
		# GUID); the fabric section drives OpenSM in ./ib as the example does.
		awk '
		/^fabric:$/ { print; infab = 1; next }
		infab && /^  name: / { print; print "  driver: opensm"; next }
		infab && /^  shared_services:$/ {
			print "  partitions_file: ./ib/partitions.conf"
			print "  pid_file: ./ib/opensm.pid"
			print "  log_file: ./ib/opensm.log"
			print "  coalesce_ms: 20"
			print "  confirm_timeout_ms: 20000"
			print "  pkey_quarantine_s: 0"
			print; infab = 0; next
		}
		/^node_classes:$/ {
			print
			print "  h100x2:"
			print "    pool: gpu"
			print "    cpus: 64"
			print "    memory_gib: 256"
			print "    gpus: {model: h100-80gb, count: 2, mig: true}"
			print "    port: {device: mlx5_0, port: 1, pkey_capacity: 64, vfs: {count: 4}}"
			next
		}
		match($0, /^  - \{name: n0000[1-4], class: hca,/) {
			n = substr($0, 17, 1)
			if (!match($0, /guid: 0x[0-9a-f]+\}\}$/)) exit 1
			g = substr($0, RSTART + 6, RLENGTH - 8)
			sub(/name: n0000[1-4], class: hca,/, "name: n" n ", class: h100x2,")
			sub(/\}\}$/, ", vfs: {guid_base: " substr(g, 1, length(g) - 2) "01}}}")
			renamed++
		}
		{ print }
		END { if (renamed != 4) exit 1 }
		' "$S/synthetic.yaml" >"$S/cluster.yaml.tmp" || die "rewriting the synthetic inventory failed"
		mv "$S/cluster.yaml.tmp" "$S/cluster.yaml"
		;;
	esac
}

# ---- configuration ----

write_slurm_conf() {
	local cpus=${SLURM_NODE_CPUS:-$(nproc)} mem=${SLURM_NODE_MEMORY_MB:-4096}
	local last=$((SLURMD_PORT + ${#NODES[@]} - 1))
	cat >"$CONF.tmp" <<EOF
# Written by scripts/slurm-test-cluster.sh: the Slurm test cluster in $S.
ClusterName=isotest
SlurmctldHost=localhost
SlurmctldPort=$SLURMCTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$MUNGE_SOCK
StateSaveLocation=$SLURM_DIR/ctld
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmctldLogFile=$LOG/slurmctld.log
SlurmdSpoolDir=$SLURM_DIR/spool/%n
SlurmdPidFile=$RUN/slurmd-%n.pid
SlurmdLogFile=$LOG/slurmd-%n.log
SlurmdParameters=config_overrides
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=256
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
ReturnToService=2
SlurmdTimeout=60
InactiveLimit=0
KillWait=5
MinJobAge=30
PlugStackConfig=$SLURM_DIR/plugstack.conf
PrologSlurmctld=$SLURM_DIR/prolog.sh
EpilogSlurmctld=$SLURM_DIR/epilog.sh
NodeName=n[1-${#NODES[@]}] NodeHostname=localhost NodeAddr=127.0.0.1 Port=[$SLURMD_PORT-$last] CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=test Nodes=n[1-${#NODES[@]}] Default=YES MaxTime=INFINITE State=UP
EOF
	mv "$CONF.tmp" "$CONF"
}

write_plugstack() {
	local extra=
	# only where the agents make no sandboxes: a job may then run without one
	if [ "$SANDBOX_MODE" = off ]; then extra=" allow_no_sandbox=1"; fi
	if [ -f "$PLUGIN" ]; then
		printf '# scripts/slurm-test-cluster.sh\nrequired %s agent_state_dir=%s/%%n%s\n' \
			"$PLUGIN" "$AGENTS" "$extra" >"$SLURM_DIR/plugstack.conf"
	else
		say "warning: $PLUGIN is not built: jobs run without the isostack plugin (no --isostack-* options)"
		printf '# scripts/slurm-test-cluster.sh: %s was not built when the cluster started\n' \
			"$PLUGIN" >"$SLURM_DIR/plugstack.conf"
	fi
}

# The PrologSlurmctld/EpilogSlurmctld wrappers. slurmctld gives them a bare
# environment: they name the cluster's slurm.conf (isoctl calls scontrol and
# squeue), the controller and the token file themselves.
write_prologs() {
	local what f
	for what in prolog epilog; do
		f=$SLURM_DIR/$what.sh
		if "$ISOCTL" slurm "$what" --help >/dev/null 2>&1; then
			cat >"$f.tmp" <<EOF
#!/bin/sh
# PrologSlurmctld/EpilogSlurmctld of the test cluster (scripts/slurm-test-cluster.sh).
export SLURM_CONF='$CONF' ISOSTACK_URL='$URL' ISOSTACK_TOKEN_FILE='$PROLOG_TOKEN'
export PATH="/usr/sbin:/usr/bin:/sbin:/bin"
exec '$ISOCTL' slurm $what $([ $what = prolog ] && echo "--timeout $PROLOG_TIMEOUT_S")
EOF
		else
			say "warning: $ISOCTL has no 'slurm $what': the $what is a no-op (jobs get no allocation)"
			cat >"$f.tmp" <<EOF
#!/bin/sh
# PrologSlurmctld/EpilogSlurmctld of the test cluster: a no-op, because
# $ISOCTL had no 'slurm $what' command when the cluster started.
exit 0
EOF
		fi
		chmod 755 "$f.tmp"
		mv "$f.tmp" "$f"
	done
}

# ---- components ----

start_munge() {
	alive munged && return 0
	if [ ! -s "$MUNGE_DIR/munge.key" ]; then
		(umask 077 && dd if=/dev/urandom of="$MUNGE_DIR/munge.key" bs=1024 count=1 status=none)
	fi
	chmod 600 "$MUNGE_DIR/munge.key"
	rm -f "$MUNGE_SOCK" "$MUNGE_SOCK.lock"
	spawn munged munged -F --socket="$MUNGE_SOCK" --key-file="$MUNGE_DIR/munge.key" \
		--pid-file="$MUNGE_DIR/munged.pid" --log-file="$LOG/munged.log" \
		--seed-file="$MUNGE_DIR/munged.seed"
	wait_up munged "$WAIT_S" sh -c "munge -n -S '$MUNGE_SOCK' 2>/dev/null | unmunge -S '$MUNGE_SOCK' >/dev/null 2>&1" || {
		log_tail "$LOG/munged.log"
		die "munged did not answer on $MUNGE_SOCK"
	}
}

start_fabric() {
	has_ibsim || return 0
	alive opensm && alive ibsim && return 0
	# the fabric's own pid files are its directory's; run/ keeps links to them
	if [ -s "$IB/ibsim.pid" ] && running "$(cat "$IB/ibsim.pid")"; then
		"$FABRIC" opensm "$IB" >>"$LOG/fabric.log" 2>&1 || {
			log_tail "$IB/opensm.log"
			die "OpenSM did not come up"
		}
	else
		"$FABRIC" stop "$IB" >/dev/null 2>&1 || true
		"$ISOCTL" fabric ibsim-net --config "$S/cluster.yaml" >"$IB/ibsim.net"
		printf 'Default=0x7fff, ipoib : ALL=limited, SELF=full ;\n' >"$IB/partitions.conf"
		local rc=0 counts
		# ibsim's limits for a fabric past its defaults (the net file's counts)
		counts=$(sed -n 's/^# isostack-ibsim: .* nodes=\([0-9]*\) switches=\([0-9]*\) ports=\([0-9]*\).*/\1 \2 \3/p' "$IB/ibsim.net")
		# shellcheck disable=SC2086 # three numbers
		set -- $counts
		[ $# -eq 3 ] || die "$IB/ibsim.net has no '# isostack-ibsim:' counts line"
		IBSIM_ARGS="-N $(($1 > 2048 ? $1 : 2048)) -S $(($2 > 256 ? $2 : 256)) -P $(($3 > 13312 ? $3 : 13312))" \
			"$FABRIC" start "$IB" "$IB/ibsim.net" >>"$LOG/fabric.log" 2>&1 || rc=$?
		[ $rc -eq 77 ] && {
			say "ibsim or opensm is missing (apt-get install ibsim-utils opensm)"
			exit 77
		}
		[ $rc -eq 0 ] || {
			log_tail "$LOG/fabric.log" "$IB/opensm.log"
			die "ibsim/OpenSM did not come up"
		}
	fi
	ln -sf "$IB/ibsim.pid" "$RUN/ibsim.pid"
	ln -sf "$IB/opensm.pid" "$RUN/opensm.pid"
}

iso() { "$ISOCTL" --url "$URL" --token-file "$ADMIN_TOKEN" "$@"; }

start_isostackd() {
	if ! alive isostackd; then
		(
			cd "$S"
			# shellcheck disable=SC1091 # the fabric's IBSIM_SOCKNAME and LD_PRELOAD
			if has_ibsim; then . "$IB/env"; fi
			spawn isostackd "$BUILD/isostackd" --config "$S/cluster.yaml" --state-dir "$ISO" \
				--listen "127.0.0.1:$ISOSTACK_PORT"
		)
	fi
	wait_up isostackd "$WAIT_S" sh -c "[ -s '$ADMIN_TOKEN' ] && '$ISOCTL' --url '$URL' health >/dev/null 2>&1" || {
		log_tail "$LOG/isostackd.log"
		die "isostackd did not answer on $URL"
	}
}

# token_file FILE ARGS...: a token issued once with ARGS, kept in FILE (0600).
token_file() {
	local f=$1
	shift
	[ -s "$f" ] && return 0
	(umask 077 && iso token issue "$@" -o token >"$f.tmp" 2>>"$LOG/isoctl.log") || {
		rm -f "$f.tmp"
		die "token issue $* failed"
	}
	mv "$f.tmp" "$f"
}

start_agents() {
	local n vf
	if has_ibsim; then
		vf=(--vf-driver ibsim --ibsim-net "$IB/ibsim.net")
	else
		vf=(--vf-driver sim)
	fi
	for n in "${NODES[@]}"; do
		alive "agent-$n" && continue
		mkdir -p "$AGENTS/$n"
		chmod 700 "$AGENTS/$n"
		token_file "$AGENTS/$n.token" --role node-agent --node "$n" --description "agent of $n"
		# each node's own UUID numbers (n1: 1000001.., n2: 2000001..), so a
		# task handed another node's member is caught by its UUIDs
		[ -f "$NVML/$n-config.json" ] ||
			echo "{\"gpus\": [{\"model\": \"H100-80GB\"}, {\"model\": \"H100-80GB\"}], \"uuid_base\": ${n#n}000001}" >"$NVML/$n-config.json"
		ISOSTACK_NVML_LIBRARY=$FAKE_NVML ISOSTACK_FAKE_NVML_CONFIG=$NVML/$n-config.json \
			ISOSTACK_FAKE_NVML_STATE=$NVML/$n.json \
			spawn "agent-$n" "$BUILD/isostack-agent" --controller "$URL" \
			--token-file "$AGENTS/$n.token" --node "$n" --gpu-driver nvml \
			"${vf[@]}" --state-dir "$AGENTS/$n" \
			--heartbeat-s 1 --sandbox "$SANDBOX_MODE"
	done
	# Every node's agent connected (isostackd shows its lease).
	for n in "${NODES[@]}"; do
		wait_up "agent-$n" "$WAIT_S" sh -c "'$ISOCTL' --url '$URL' --token-file '$ADMIN_TOKEN' -o json node get $n 2>/dev/null | grep -q '\"connected\": true'" || {
			log_tail "$LOG/agent-$n.log"
			die "the agent of $n did not connect to isostackd"
		}
	done
}

# Tenants and quotas, made when missing (a restarted cluster keeps its store).
setup_tenants() {
	local t
	for t in acme globex; do
		iso tenant get "$t" >/dev/null 2>&1 || iso tenant create "$t" >/dev/null ||
			die "tenant create $t failed"
	done
	local q
	for q in "acme gpus 4" "acme h100-80gb 28" "globex gpus 1" "globex h100-80gb 7"; do
		# shellcheck disable=SC2086 # three words
		set -- $q
		iso quota set "$1" --kind "$2" --guaranteed "$3" --borrow-limit 0 >/dev/null ||
			die "quota set $1 --kind $2 failed"
	done
	token_file "$PROLOG_TOKEN" --role cluster-admin --description "slurm PrologSlurmctld of $S"
}

start_slurmctld() {
	alive slurmctld || spawn slurmctld slurmctld -D -i -f "$CONF"
	wait_up slurmctld "$WAIT_S" sh -c "SLURM_CONF='$CONF' scontrol ping 2>/dev/null | grep -q 'is UP'" || {
		log_tail "$LOG/slurmctld.log"
		die "slurmctld did not answer on port $SLURMCTLD_PORT"
	}
}

start_slurmds() {
	local n
	for n in "${NODES[@]}"; do
		alive "slurmd-$n" && continue
		mkdir -p "$SLURM_DIR/spool/$n"
		spawn "slurmd-$n" slurmd -D -N "$n" -f "$CONF"
	done
}

# Every node answers: idle, or busy with a job (a restarted slurmctld).
nodes_idle() {
	local states
	states=$(SLURM_CONF=$CONF sinfo -h -N -o '%N %t' 2>/dev/null | sort -u) || return 1
	[ "$(echo "$states" | grep -cE ' (idle|alloc|mix|comp)$')" -eq ${#NODES[@]} ] &&
		[ "$(echo "$states" | grep -c .)" -eq ${#NODES[@]} ]
}

wait_nodes() {
	local n
	wait_for "$WAIT_S" nodes_idle || {
		for n in "${NODES[@]}"; do alive "slurmd-$n" || say "slurmd -N $n exited"; done
		SLURM_CONF=$CONF sinfo -N >&2 || true
		log_tail "$LOG/slurmctld.log" "$LOG"/slurmd-n*.log
		die "the nodes did not come up idle within ${WAIT_S}s"
	}
}

print_env() {
	echo "export SLURM_CONF='$CONF'"
	echo "export ISOSTACK_URL='$URL'"
	echo "export ISOSTACK_TOKEN='$(cat "$ADMIN_TOKEN")'"
}

components() {
	local n
	echo munged
	if has_ibsim; then echo ibsim opensm; fi
	echo isostackd
	for n in "${NODES[@]}"; do echo "agent-$n"; done
	echo slurmctld
	for n in "${NODES[@]}"; do echo "slurmd-$n"; done
}

start() {
	need_tools
	mkdir -p "$S" "$RUN" "$LOG" "$SLURM_DIR/ctld" "$SLURM_DIR/spool" "$MUNGE_DIR" "$IB" \
		"$ISO" "$AGENTS" "$NVML"
	# munged wants its socket's directories open to all (x); the secrets
	# (key, tokens, the store) are in files and directories of mode 0600/0700.
	chmod 755 "$S" "$MUNGE_DIR"
	chmod 700 "$ISO" "$AGENTS"
	load_ports
	load_fabric_mode
	load_sandbox_mode
	cluster_config
	start_munge
	start_fabric
	start_isostackd
	start_agents
	setup_tenants
	write_slurm_conf
	write_plugstack
	write_prologs
	start_slurmctld
	start_slurmds
	wait_nodes
	say "up: slurmctld :$SLURMCTLD_PORT, slurmd n1..n4 :$SLURMD_PORT.., isostackd $URL, fabric $FABRIC_MODE; logs in $LOG"
	print_env
}

# The cluster's slurmstepd (a job's step daemon outlives its slurmd): each
# keeps the slurmd log of its node open, which is in this STATE_DIR.
stepds() {
	local p fd
	for p in $(pgrep -x slurmstepd || true); do
		for fd in /proc/"$p"/fd/*; do
			case "$(readlink "$fd" 2>/dev/null)" in
			"$LOG"/slurmd-*)
				echo "$p"
				break
				;;
			esac
		done
	done
	return 0
}

# No agent holds a sandbox record (STATE_DIR/agent/nX/sandboxes/*.json).
sandboxes_gone() { ! compgen -G "$AGENTS/*/sandboxes/*.json" >/dev/null; }

# After the agents stopped: what a record still names (an allocation not
# released, isostackd down) goes, as iso_sandbox_destroy would: its holder
# (only when it is this cluster's: an iso-holder cloned by an agent of this
# STATE_DIR, whose command line it keeps), the processes left in its
# cgroup, the cgroup (every v1 hierarchy, or the v2 tree), the record.
remove_sandboxes_left() {
	local rec name pid d p
	for rec in "$AGENTS"/*/sandboxes/*.json; do
		[ -f "$rec" ] || continue
		name=$(basename "$rec" .json)
		say "warning: removing the sandbox $name left behind"
		pid=$(sed -n 's/.*"holder_pid": *\([0-9]*\).*/\1/p' "$rec")
		if [ -n "$pid" ] && [ "$pid" -gt 0 ] &&
			[ "$(cat "/proc/$pid/comm" 2>/dev/null)" = iso-holder ] &&
			tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF "$AGENTS/"; then
			kill -9 "$pid" 2>/dev/null || true
			wait_for 5 sh -c "! kill -0 $pid 2>/dev/null || grep -q ') Z ' /proc/$pid/stat 2>/dev/null" ||
				say "warning: the holder $pid of $name did not exit"
		fi
		for d in /sys/fs/cgroup/*/"$name" /sys/fs/cgroup/"$name"; do
			[ -d "$d" ] || continue
			while read -r p; do kill -9 "$p" 2>/dev/null || true; done <"$d/cgroup.procs"
			wait_for 5 rmdir "$d" 2>/dev/null || say "warning: cannot remove the cgroup $d"
		done
		rm -f "$rec"
	done
}

stop() {
	local n p
	[ -d "$RUN" ] || return 0
	# The jobs first, while slurmctld and the slurmd run: their step daemons
	# and tasks are nobody's children here.
	if alive slurmctld; then
		# every user's jobs (real sandboxes run the tests' jobs as nobody)
		local ids
		ids=$(SLURM_CONF=$CONF squeue -h -t R,PD,S -o %i 2>/dev/null || true)
		if [ -n "$ids" ]; then
			# shellcheck disable=SC2086 # job ids
			SLURM_CONF=$CONF scancel --quiet --full $ids 2>/dev/null || true
			# shellcheck disable=SC2086
			SLURM_CONF=$CONF scancel --quiet $ids 2>/dev/null || true
		fi
		wait_for 20 sh -c "[ -z \"\$(SLURM_CONF='$CONF' squeue -h -t R,PD,CG,S -o %i 2>/dev/null)\" ]" ||
			say "warning: jobs still listed after scancel"
	fi
	for n in "${NODES[@]}"; do stop_pid "slurmd-$n"; done
	stop_pid slurmctld
	for p in $(stepds); do
		say "killing a step daemon left behind ($p)"
		pkill -9 -P "$p" 2>/dev/null || true
		kill -9 "$p" 2>/dev/null || true
	done
	# The jobs' sandboxes go with their allocations (the epilog released
	# them): the agents remove them while they still run.
	if alive isostackd && ! wait_for 20 sandboxes_gone; then
		say "warning: sandboxes still there 20 s after the jobs ended"
	fi
	for n in "${NODES[@]}"; do stop_pid "agent-$n"; done
	remove_sandboxes_left
	stop_pid isostackd
	"$FABRIC" stop "$IB" >/dev/null 2>&1 || true
	rm -f "$RUN/opensm.pid" "$RUN/ibsim.pid"
	stop_pid munged
	return 0
}

status() {
	local c up=0 down=0 pid
	if [ -f "$S/fabric-mode" ]; then load_fabric_mode; else FABRIC_MODE=ibsim; fi
	for c in $(components); do
		if alive "$c"; then
			pid=$(cat "$RUN/$c.pid")
			echo "$c running (pid $pid)"
			up=$((up + 1))
		else
			echo "$c stopped"
			down=$((down + 1))
		fi
	done
	if [ -f "$S/ports" ]; then
		load_ports
		echo "slurmctld port $SLURMCTLD_PORT, slurmd ports $SLURMD_PORT-$((SLURMD_PORT + 3)), isostackd $URL"
	fi
	[ $down -eq 0 ] && return 0
	[ $up -eq 0 ] && return 3
	return 1
}

restart() {
	case "$component" in
	munged | slurmctld | isostackd | slurmd-n[1-4] | agent-n[1-4]) stop_pid "$component" ;;
	n[1-4]) stop_pid "slurmd-$component" ;;
	opensm)
		[ "$(cat "$S/fabric-mode" 2>/dev/null || echo ibsim)" != sim ] || die "restart: the sim fabric has no opensm"
		alive opensm && kill "$(cat "$RUN/opensm.pid")" && wait_for 10 sh -c "! kill -0 $(cat "$RUN/opensm.pid") 2>/dev/null" ;;
	*) die "restart: unknown component '$component' (munged, opensm, isostackd, agent-nX, slurmctld, nX)" ;;
	esac
	start
}

case "$cmd" in
start) start ;;
stop) stop ;;
status) status ;;
restart) restart ;;
*) usage ;;
esac
