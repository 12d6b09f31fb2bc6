#!/bin/bash
# run-ib.sh: the InfiniBand path without hardware (`make run-ib`). Renders an
# ibsim fabric whose GUIDs are the inventory's, starts ibsim and OpenSM on it,
# waits for SUBNET UP, then runs isostackd in the foreground with the opensm
# driver, all of them through ibsim's umad2sim preload. Ctrl-C stops
# isostackd; the trap then stops OpenSM and ibsim.
# Environment: BUILD (build), CONFIG (examples/cluster-ib.yaml), STATE_DIR
# (var/ib), LISTEN (127.0.0.1:8470), OSM_DIR (var/opensm: must match the
# inventory's partitions_file, pid_file, log_file), IBSIM_SOCKNAME.
set -euo pipefail

BUILD=${BUILD:-build}
CONFIG=${CONFIG:-examples/cluster-ib.yaml}
STATE_DIR=${STATE_DIR:-var/ib}
LISTEN=${LISTEN:-127.0.0.1:8470}
OSM_DIR=${OSM_DIR:-var/opensm}
export IBSIM_SOCKNAME=${IBSIM_SOCKNAME:-isostack-run-ib-$(id -u)}

say() { echo "run-ib: $*" >&2; }
die() { say "$*"; exit 1; }

UMAD2SIM=""
for f in /usr/lib/*/umad2sim/libumad2sim.so /usr/lib/umad2sim/libumad2sim.so; do
	[ -f "$f" ] && UMAD2SIM=$f && break
done
[ -n "$UMAD2SIM" ] || die "libumad2sim.so not found (apt-get install ibsim-utils libumad2sim0)"
command -v ibsim >/dev/null || die "ibsim not found (apt-get install ibsim-utils)"
command -v opensm >/dev/null || die "opensm not found (apt-get install opensm)"

mkdir -p "$OSM_DIR" "$STATE_DIR"
chmod 700 "$STATE_DIR"

IBSIM_PID=""
OSM_PID=""
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	if [ -n "$OSM_PID" ]; then
		kill "$OSM_PID" 2>/dev/null || true
		wait "$OSM_PID" 2>/dev/null || true
		rm -f "$OSM_DIR/opensm.pid"
	fi
	if [ -n "$IBSIM_PID" ]; then
		kill "$IBSIM_PID" 2>/dev/null || true
		wait "$IBSIM_PID" 2>/dev/null || true
	fi
	say "stopped OpenSM and ibsim"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The fabric: the inventory's GUIDs, one CA per PF, VF and service port.
"$BUILD/isoctl" fabric ibsim-net --config "$CONFIG" >"$OSM_DIR/ibsim.net"
read -r NODES SWITCHES PORTS < <(sed -n \
	's/^# isostack-ibsim: .* nodes=\([0-9]*\) switches=\([0-9]*\) ports=\([0-9]*\)$/\1 \2 \3/p' \
	"$OSM_DIR/ibsim.net")
[ -n "${PORTS:-}" ] || die "$OSM_DIR/ibsim.net: no isostack-ibsim counts line"
max() { [ "$1" -gt "$2" ] && echo "$1" || echo "$2"; }

say "starting ibsim on $OSM_DIR/ibsim.net ($NODES nodes, $SWITCHES switches; socket $IBSIM_SOCKNAME)"
ibsim -n -s -N "$(max "$NODES" 2048)" -S "$(max "$SWITCHES" 256)" -P "$(max "$PORTS" 13312)" \
	"$OSM_DIR/ibsim.net" </dev/null >"$OSM_DIR/ibsim.log" 2>&1 &
IBSIM_PID=$!
for _ in $(seq 1 100); do
	grep -q "Network simulator ready" "$OSM_DIR/ibsim.log" 2>/dev/null && break
	kill -0 "$IBSIM_PID" 2>/dev/null || die "ibsim exited: see $OSM_DIR/ibsim.log"
	sleep 0.1
done
grep -q "Network simulator ready" "$OSM_DIR/ibsim.log" || die "ibsim not ready after 10 s"

# OpenSM starts on the Default partition only; isostackd writes the rest.
printf 'Default=0x7fff, ipoib : ALL=limited, SELF=full ;\n' >"$OSM_DIR/partitions.conf"
rm -f "$OSM_DIR/opensm.log"
say "starting OpenSM (log $OSM_DIR/opensm.log)"
OSM_TMP_DIR=$OSM_DIR OSM_CACHE_DIR=$OSM_DIR LD_PRELOAD=$UMAD2SIM \
	opensm -d2 -f "$OSM_DIR/opensm.log" -P "$OSM_DIR/partitions.conf" -s 0 \
	</dev/null >"$OSM_DIR/opensm.out" 2>&1 &
OSM_PID=$!
echo "$OSM_PID" >"$OSM_DIR/opensm.pid"
for _ in $(seq 1 300); do
	grep -q "SUBNET UP" "$OSM_DIR/opensm.log" 2>/dev/null && break
	kill -0 "$OSM_PID" 2>/dev/null || die "OpenSM exited: see $OSM_DIR/opensm.log"
	sleep 0.1
done
grep -q "SUBNET UP" "$OSM_DIR/opensm.log" || die "OpenSM: no SUBNET UP after 30 s"
say "SUBNET UP"

cat >&2 <<EOF
run-ib: isostackd on $CONFIG, state in $STATE_DIR/ (Ctrl-C stops everything). Try:
  export ISOSTACK_URL=http://$LISTEN ISOSTACK_TOKEN=\$(cat $STATE_DIR/admin.token)
  $BUILD/isoctl tenant create acme
  $BUILD/isoctl alloc create --tenant acme --members 2 --whole --count 8 --pool gpu
  cat $OSM_DIR/partitions.conf       (the tenant's partition: one VF GUID per member)
Watch the P_Key tables (LIDs: ibnetdiscover, or smpquery portinfo):
  IBSIM_SOCKNAME=$IBSIM_SOCKNAME LD_PRELOAD=$UMAD2SIM ibnetdiscover | grep -- -vf
  IBSIM_SOCKNAME=$IBSIM_SOCKNAME LD_PRELOAD=$UMAD2SIM smpquery pkeys LID 1
EOF

# Not exec: the trap must outlive isostackd to stop OpenSM and ibsim.
LD_PRELOAD=$UMAD2SIM "$BUILD/isostackd" --config "$CONFIG" --state-dir "$STATE_DIR" \
	--listen "$LISTEN" || exit $?
