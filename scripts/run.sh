#!/bin/bash
# run.sh: `make run`. Serves the example cluster as a real site would run it:
# isostackd, and one isostack-agent with the sim GPU driver acting as the
# agent of every node of the inventory (--node per node, the admin token as
# its credential, its own state dir), so that allocations go active through
# the provisioning gate and show the MIG UUIDs a tenant receives
# (docs/agents.md). Ctrl-C stops both; if either exits, the other is stopped.
# Environment: BUILD (build), CONFIG (examples/cluster.yaml), STATE_DIR (var),
# LISTEN (127.0.0.1:8470), AGENT_STATE_DIR ($STATE_DIR/agent).
set -euo pipefail

BUILD=${BUILD:-build}
CONFIG=${CONFIG:-examples/cluster.yaml}
STATE_DIR=${STATE_DIR:-var}
LISTEN=${LISTEN:-127.0.0.1:8470}
AGENT_STATE_DIR=${AGENT_STATE_DIR:-$STATE_DIR/agent}
URL=http://$LISTEN
TOKEN_FILE=$STATE_DIR/admin.token

say() { echo "run: $*" >&2; }
# shellcheck source=scripts/agent-lib.sh
. "$(dirname "$0")/agent-lib.sh"

mkdir -p "$STATE_DIR" "$AGENT_STATE_DIR"
chmod 700 "$STATE_DIR" "$AGENT_STATE_DIR"

daemon='' agent=''
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	stop_agent_and_daemon
	say "stopped"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

"$BUILD/isostackd" --config "$CONFIG" --state-dir "$STATE_DIR" --listen "$LISTEN" &
daemon=$!

# The agent needs the admin token (written at the first start) and the node
# names, which the running daemon lists.
start_sim_agent --vf-driver sim || exit 1

cat >&2 <<MSG
run: isostackd on $CONFIG, state in $STATE_DIR/; one sim agent for $agent_nodes nodes,
run: state in $AGENT_STATE_DIR/ (Ctrl-C stops both). Try:
  export ISOSTACK_URL=$URL ISOSTACK_TOKEN=\$(cat $TOKEN_FILE)
  $BUILD/isoctl capacity
MSG

# Either one exiting ends the run (the trap stops the other).
wait -n
