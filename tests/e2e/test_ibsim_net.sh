#!/bin/bash
# test_ibsim_net.sh: the net file that `isoctl fabric ibsim-net` renders for
# examples/cluster-ib.yaml, run under the real ibsim, discovered with the real
# ibnetdiscover: every port GUID of the inventory (PF, VF, service; read from
# the YAML here, independently of the renderer) must be a CA port exactly
# once, plus the SM's HCA and nothing else; then `isoctl fabric discover`
# must turn that output back into the 16 nodes with their VFs.
# Usage: test_ibsim_net.sh ISOCTL CLUSTER_IB_YAML. Exit 77 (skip) only when
# ibsim is not installed.
set -euo pipefail

ISOCTL=$1
CONFIG=$2

command -v ibsim >/dev/null || { echo "skip: ibsim not installed"; exit 77; }
UMAD2SIM=""
for f in /usr/lib/*/umad2sim/libumad2sim.so /usr/lib/umad2sim/libumad2sim.so; do
	[ -f "$f" ] && UMAD2SIM=$f && break
done
[ -n "$UMAD2SIM" ] || { echo "skip: libumad2sim.so not installed"; exit 77; }
IBNETDISCOVER=$(command -v ibnetdiscover || echo /usr/sbin/ibnetdiscover)
[ -x "$IBNETDISCOVER" ] || { echo "FAIL: ibsim is installed but ibnetdiscover is not"; exit 1; }

TMP=$(mktemp -d)
IBSIM_PID=""
cleanup() {
	local rc=$?
	if [ -n "$IBSIM_PID" ]; then
		kill "$IBSIM_PID" 2>/dev/null || true
		wait "$IBSIM_PID" 2>/dev/null || true
	fi
	rm -rf "$TMP"
	exit "$rc"
}
trap cleanup EXIT
export IBSIM_SOCKNAME="isostack-e2e-ibsim-net-$$"

"$ISOCTL" fabric ibsim-net --config "$CONFIG" >"$TMP/net"

# The inventory's port GUIDs, straight from the YAML: PF guids, each
# guid_base run of the class's VF count, service guid lists.
python3 - "$CONFIG" >"$TMP/want" <<'EOF'
import re, sys
text = open(sys.argv[1]).read()
text = re.sub(r'#.*', '', text)
count = int(re.search(r'vfs: \{count: (\d+)\}', text).group(1))
guids = [int(g, 16) for g in re.findall(r'\bguid: (0x[0-9a-fA-F]+)', text)]
for base in re.findall(r'guid_base: (0x[0-9a-fA-F]+)', text):
    guids += [int(base, 16) + i for i in range(count)]
for lst in re.findall(r'\bguids: \[([^\]]*)\]', text):
    guids += [int(g, 16) for g in lst.split(',')]
assert len(guids) == len(set(guids)) and len(guids) > 16, len(guids)
for g in sorted(guids):
    print('%x' % g)
EOF

ibsim -n -s "$TMP/net" </dev/null >"$TMP/ibsim.log" 2>&1 &
IBSIM_PID=$!
for _ in $(seq 1 100); do
	grep -q "Network simulator ready" "$TMP/ibsim.log" && break
	kill -0 "$IBSIM_PID" 2>/dev/null || { cat "$TMP/ibsim.log"; echo "FAIL: ibsim exited"; exit 1; }
	sleep 0.1
done
grep -q "Network simulator ready" "$TMP/ibsim.log" || { echo "FAIL: ibsim not ready"; exit 1; }
if grep -q "ibwarn.*parse\|fatal" "$TMP/ibsim.log"; then
	cat "$TMP/ibsim.log"
	echo "FAIL: ibsim complained about the net file"
	exit 1
fi

LD_PRELOAD=$UMAD2SIM "$IBNETDISCOVER" >"$TMP/disc" 2>"$TMP/disc.err" ||
	{ cat "$TMP/disc.err"; echo "FAIL: ibnetdiscover"; exit 1; }

# CA port lines: [1](946dae0300a1b001) ...
sed -n 's/^\[[0-9]*\](\([0-9a-f]*\)).*/\1/p' "$TMP/disc" | sort >"$TMP/got"
sort "$TMP/want" >"$TMP/want.sorted"
echo "2c90300000001" >>"$TMP/want.sorted" # the SM's HCA (default --sm-guid)
sort -o "$TMP/want.sorted" "$TMP/want.sorted"
if ! diff -u "$TMP/want.sorted" "$TMP/got" >"$TMP/diff"; then
	head -40 "$TMP/diff"
	echo "FAIL: discovered CA port GUIDs differ from the inventory's"
	exit 1
fi
echo "ok: $(wc -l <"$TMP/got") CA port GUIDs on the simulated fabric, each the inventory's"

"$ISOCTL" fabric discover --file "$TMP/disc" >"$TMP/yaml"
nodes=$(grep -c "vfs: {count: 8, guid_base: 0x946dae0300a2" "$TMP/yaml" || true)
[ "$nodes" -eq 16 ] || { cat "$TMP/yaml"; echo "FAIL: discover gave $nodes nodes with 8 VFs"; exit 1; }
grep -q "name: gpu-b08$" "$TMP/yaml" || { echo "FAIL: discover lost gpu-b08"; exit 1; }
echo "ok: isoctl fabric discover folds the VF stand-ins back into 16 nodes"
