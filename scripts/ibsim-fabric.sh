#!/bin/sh
# ibsim-fabric.sh: a simulated InfiniBand fabric with a real OpenSM on it, for
# the end-to-end tests of the opensm driver and for trying isostack by hand.
# ibsim models the fabric's management plane; OpenSM and every libibumad
# program (smpquery, isostackd's SMP reader) reach it through umad2sim's
# LD_PRELOAD. Each run gets its own IBSIM_SOCKNAME so runs never meet.
#
#   scripts/ibsim-fabric.sh start DIR NETFILE   # prints the env to export
#   scripts/ibsim-fabric.sh stop DIR
#   scripts/ibsim-fabric.sh opensm DIR          # (re)start only OpenSM
#
# DIR gets ibsim.pid, opensm.pid, opensm.log, partitions.conf (created with
# just the Default rule when absent) and env (IBSIM_SOCKNAME, LD_PRELOAD).
# Exit 77 when ibsim or opensm is not installed (the tests then skip).
# IBSIM_ARGS (optional) goes to ibsim as extra arguments, for fabrics past its
# default limits: e.g. IBSIM_ARGS="-N 2192 -S 256 -P 13312", the counts that
# `isoctl fabric ibsim-net` prints on its `# isostack-ibsim:` line.
set -eu

PRELOAD=${UMAD2SIM:-/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so}
IBSIM=$(command -v ibsim || true)
OPENSM=$(command -v opensm || echo /usr/sbin/opensm)

usage() {
	echo "usage: $0 start DIR NETFILE | stop DIR | opensm DIR" >&2
	exit 2
}

need_tools() {
	if [ -z "$IBSIM" ] || [ ! -x "$OPENSM" ] || [ ! -f "$PRELOAD" ]; then
		echo "ibsim-fabric: ibsim, opensm or $PRELOAD missing (apt-get install ibsim-utils opensm)" >&2
		exit 77
	fi
}

# wait_for SECONDS COMMAND...: polls every 0.05 s
wait_for() {
	n=$(($1 * 20))
	shift
	while [ "$n" -gt 0 ]; do
		if "$@"; then return 0; fi
		sleep 0.05
		n=$((n - 1))
	done
	return 1
}

# A zombie counts as gone: where nobody reaps orphans, kill -0 still works on one.
running() { kill -0 "$1" 2>/dev/null && ! grep -q ') Z ' "/proc/$1/stat" 2>/dev/null; }
alive() { [ -s "$1" ] && running "$(cat "$1")"; }

start_opensm() {
	dir=$1
	. "$dir/env"
	[ -f "$dir/partitions.conf" ] ||
		echo "Default=0x7fff, ipoib : ALL=limited, SELF=full ;" >"$dir/partitions.conf"
	# OpenSM truncates its log when it starts: keep the last run's beside it.
	[ ! -f "$dir/opensm.log" ] || mv "$dir/opensm.log" "$dir/opensm.log.1"
	# -d2: no daemon fork, log flushed line by line; -s 0: sweep only on
	# events and SIGHUP, so every table change in the tests is ours.
	OSM_TMP_DIR=$dir OSM_CACHE_DIR=$dir LD_PRELOAD=$PRELOAD IBSIM_SOCKNAME=$IBSIM_SOCKNAME \
		"$OPENSM" -d2 -e -f "$dir/opensm.log" -P "$dir/partitions.conf" -s 0 \
		</dev/null >"$dir/opensm.out" 2>&1 &
	echo $! >"$dir/opensm.pid"
	if ! wait_for 20 grep -q 'SUBNET UP' "$dir/opensm.log" 2>/dev/null; then
		echo "ibsim-fabric: OpenSM did not reach SUBNET UP (see $dir/opensm.log)" >&2
		exit 1
	fi
}

case "${1:-}" in
start)
	[ $# -eq 3 ] || usage
	need_tools
	dir=$(cd "$2" && pwd)
	net=$3
	sock="isostack-$$-$(date +%s%N)"
	printf 'IBSIM_SOCKNAME=%s\nLD_PRELOAD=%s\nexport IBSIM_SOCKNAME LD_PRELOAD\n' "$sock" "$PRELOAD" >"$dir/env"
	# </dev/null and -n: without them ibsim spins a core on its console.
	# shellcheck disable=SC2086 # IBSIM_ARGS is a list of words
	IBSIM_SOCKNAME=$sock "$IBSIM" -n -s ${IBSIM_ARGS:-} "$net" </dev/null >"$dir/ibsim.log" 2>&1 &
	echo $! >"$dir/ibsim.pid"
	wait_for 10 sh -c "IBSIM_SOCKNAME=$sock LD_PRELOAD=$PRELOAD smpquery nodeinfo -D 0 >/dev/null 2>&1" || {
		echo "ibsim-fabric: ibsim did not come up (see $dir/ibsim.log)" >&2
		exit 1
	}
	start_opensm "$dir"
	cat "$dir/env"
	;;
opensm)
	[ $# -eq 2 ] || usage
	need_tools
	start_opensm "$(cd "$2" && pwd)"
	;;
stop)
	[ $# -ge 2 ] || usage
	dir=$2
	for p in opensm ibsim; do
		if alive "$dir/$p.pid"; then
			kill "$(cat "$dir/$p.pid")" 2>/dev/null || true
			wait_for 5 sh -c "! kill -0 $(cat "$dir/$p.pid") 2>/dev/null || grep -q ') Z ' /proc/$(cat "$dir/$p.pid")/stat" ||
				kill -9 "$(cat "$dir/$p.pid")" 2>/dev/null || true
		fi
		rm -f "$dir/$p.pid"
	done
	;;
*)
	usage
	;;
esac
