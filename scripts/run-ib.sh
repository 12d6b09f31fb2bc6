#!/bin/bash
# run-ib.sh: the InfiniBand path without hardware (`make run-ib`). Renders an
# ibsim fabric whose GUIDs are the inventory's (`isoctl fabric ibsim-net`),
# brings up ibsim and OpenSM on it with scripts/ibsim-fabric.sh (which waits
# for SUBNET UP), then runs isostackd in the foreground with the opensm driver
# through the same umad2sim preload, and one isostack-agent for every node
# (sim GPUs; VFs read from the net file with --vf-driver ibsim, so a member
# is ready once its VF's CA has the GUID its partition names). Ctrl-C stops
# the agent and isostackd; the trap then stops OpenSM and ibsim.
# Environment: BUILD (build), CONFIG (examples/cluster-ib.yaml), STATE_DIR
# (var/ib), LISTEN (127.0.0.1:8470), OSM_DIR (var/opensm: where the
# inventory's partitions_file, pid_file and log_file point), AGENT_STATE_DIR
# ($STATE_DIR/agent).
set -euo pipefail

BUILD=${BUILD:-build}
CONFIG=${CONFIG:-examples/cluster-ib.yaml}
STATE_DIR=${STATE_DIR:-var/ib}
LISTEN=${LISTEN:-127.0.0.1:8470}
OSM_DIR=${OSM_DIR:-var/opensm}
AGENT_STATE_DIR=${AGENT_STATE_DIR:-$STATE_DIR/agent}
URL=http://$LISTEN
TOKEN_FILE=$STATE_DIR/admin.token
FABRIC=$(dirname "$0")/ibsim-fabric.sh

say() { echo "run-ib: $*" >&2; }
# shellcheck source=scripts/agent-lib.sh
. "$(dirname "$0")/agent-lib.sh"

mkdir -p "$OSM_DIR" "$STATE_DIR" "$AGENT_STATE_DIR"
chmod 700 "$STATE_DIR" "$AGENT_STATE_DIR"

daemon='' agent=''
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	stop_agent_and_daemon
	"$FABRIC" stop "$OSM_DIR" || true
	say "stopped OpenSM and ibsim"
	exit "$rc"
}

# The fabric: the inventory's GUIDs, one CA per PF, VF and service port.
"$BUILD/isoctl" fabric ibsim-net --config "$CONFIG" >"$OSM_DIR/ibsim.net"
say "$(grep '^# isostack-ibsim:' "$OSM_DIR/ibsim.net" | cut -c3-)"

# OpenSM starts on the Default partition only; isostackd writes the rest.
printf 'Default=0x7fff, ipoib : ALL=limited, SELF=full ;\n' >"$OSM_DIR/partitions.conf"
trap cleanup EXIT
trap 'exit 130' INT TERM
say "starting ibsim and OpenSM (logs in $OSM_DIR/)"
"$FABRIC" start "$OSM_DIR" "$OSM_DIR/ibsim.net" >/dev/null || {
	rc=$?
	[ "$rc" -eq 77 ] && say "install ibsim-utils and opensm first (scripts/deps.sh run-ib)"
	exit 1
}
say "SUBNET UP"

cat >&2 <<EOF
run-ib: isostackd on $CONFIG, state in $STATE_DIR/ (Ctrl-C stops everything). Try:
  export ISOSTACK_URL=http://$LISTEN ISOSTACK_TOKEN=\$(cat $STATE_DIR/admin.token)
  $BUILD/isoctl tenant create acme
  $BUILD/isoctl alloc create --tenant acme --members 2 --whole --count 8 --pool gpu
  cat $OSM_DIR/partitions.conf       (the tenant's partition: one VF GUID per member)
Watch the P_Key tables (. $OSM_DIR/env sets IBSIM_SOCKNAME and LD_PRELOAD):
  (. $OSM_DIR/env; ibnetdiscover | grep '"gpu-a01-vf0 ')     # its LID
  (. $OSM_DIR/env; smpquery pkeys LID 1)
EOF

# isostackd alone gets the fabric's IBSIM_SOCKNAME and LD_PRELOAD (umad2sim
# leaves a sys-PID directory behind every preloaded process that is killed).
# A subshell, not exec: the trap must outlive isostackd to stop the fabric.
(
	# shellcheck disable=SC1091
	. "$OSM_DIR/env"
	exec "$BUILD/isostackd" --config "$CONFIG" --state-dir "$STATE_DIR" --listen "$LISTEN"
) &
daemon=$!

# The agent (scripts/agent-lib.sh): the admin token, every node the daemon
# lists, sim GPUs, and the VF GUIDs as the ibsim net file gives them.
start_sim_agent --vf-driver ibsim --ibsim-net "$OSM_DIR/ibsim.net" || exit 1
say "one agent for $agent_nodes nodes (sim GPUs, VFs from the ibsim net file), state in $AGENT_STATE_DIR/"

# Either one exiting ends the run (the trap stops the other and the fabric).
wait -n
