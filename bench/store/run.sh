#!/bin/sh
# bench/store/run.sh: the store benchmark on both backends: starts a throwaway
# PostgreSQL (scripts/pg-test-cluster.sh; fsync on, as a site runs it) in a
# private temp directory, runs bench/store/store.c's binary with --pg, and
# stops and removes the cluster. Usage: run.sh CLUSTER_SCRIPT BENCH_EXE [ARGS...]
set -u
script="$1"
exe="$2"
shift 2
dir=$(mktemp -d /tmp/iso-pgbench-XXXXXX) || exit 1
trap '"$script" stop "$dir" >/dev/null 2>&1; rm -rf "$dir"' EXIT
trap 'exit 1' INT TERM
conninfo=$("$script" start "$dir" | tail -n 1) || exit 1
"$exe" --pg "$conninfo" "$@"
