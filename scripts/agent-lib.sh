# agent-lib.sh: sourced by scripts/run.sh and scripts/run-ib.sh. stop_agent_and_daemon
# stops $agent then $daemon (either may be empty) and waits for both. start_sim_agent
# waits until isostackd ($daemon) answers and has written its admin token
# ($TOKEN_FILE), then starts one isostack-agent with sim GPUs for every node
# the daemon lists, with the extra agent flags given, and sets $agent and
# $agent_nodes. Uses BUILD, URL, AGENT_STATE_DIR and the caller's say.
# shellcheck shell=bash disable=SC2034,SC2154  # daemon is the caller's; agent, agent_nodes are for it

start_sim_agent() {
	local n
	local -a nodes args
	for _ in $(seq 100); do
		kill -0 "$daemon" 2>/dev/null || { say "isostackd exited"; return 1; }
		[ -s "$TOKEN_FILE" ] && "$BUILD/isoctl" --url "$URL" health >/dev/null 2>&1 && break
		sleep 0.1
	done
	mapfile -t nodes < <("$BUILD/isoctl" --url "$URL" --token-file "$TOKEN_FILE" node list -o id)
	[ "${#nodes[@]}" -gt 0 ] || { say "isostackd lists no nodes"; return 1; }
	for n in "${nodes[@]}"; do
		args+=(--node "$n")
	done
	"$BUILD/isostack-agent" --controller "$URL" --token-file "$TOKEN_FILE" --gpu-driver sim \
		--state-dir "$AGENT_STATE_DIR" "$@" "${args[@]}" &
	agent=$!
	agent_nodes=${#nodes[@]}
}

stop_agent_and_daemon() {
	local pid
	for pid in $agent $daemon; do
		kill "$pid" 2>/dev/null || true
	done
	for pid in $agent $daemon; do
		wait "$pid" 2>/dev/null || true
	done
}
