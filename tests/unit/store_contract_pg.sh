#!/bin/sh
# store_contract_pg.sh: runs the store contract suite against a real
# PostgreSQL: starts a throwaway cluster (scripts/pg-test-cluster.sh) in a
# private temp directory, runs the suite with ISOSTACK_TEST_PG set to its
# conninfo, and stops and removes the cluster whatever the outcome.
# Usage: store_contract_pg.sh CLUSTER_SCRIPT TEST_EXE
# Exit 77 (meson: SKIP, with the reason printed) only when the PostgreSQL
# binaries are not installed; scripts/deps.sh test installs them, so under
# `make test` the PostgreSQL half always runs.
set -u
script="$1"
exe="$2"
bin="${PG_BIN:-/usr/lib/postgresql/15/bin}"
if [ ! -x "$bin/initdb" ]; then
	echo "SKIPPED: no PostgreSQL server binaries in $bin (apt-get install postgresql-15)"
	exit 77
fi
dir=$(mktemp -d /tmp/iso-pg-XXXXXX) || exit 1
cleanup() {
	"$script" stop "$dir" >/dev/null 2>&1
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
out=$("$script" start "$dir") || {
	echo "the throwaway PostgreSQL did not start:" >&2
	cat "$dir/server.log" "$dir/initdb.log" 2>/dev/null | tail -n 20 >&2
	exit 1
}
conninfo=$(printf '%s\n' "$out" | tail -n 1)
echo "store contract against PostgreSQL at: $conninfo"
ISOSTACK_TEST_PG="$conninfo" "$exe"
