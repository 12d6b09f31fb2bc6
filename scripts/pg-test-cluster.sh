#!/bin/sh
# pg-test-cluster.sh: a throwaway PostgreSQL for tests (issue 16), so that every
# store test can run against a real server without touching the machine's own
# clusters (/etc/postgresql, pg_ctlcluster) or any TCP port.
#
# Usage: scripts/pg-test-cluster.sh start|stop|status DIR
#   start  initdb --no-sync -A trust into DIR/data (once), then pg_ctl start with
#          listen_addresses='' and a private unix socket in DIR/sock; prints the
#          libpq conninfo as its LAST line. Already running: prints it again.
#   stop   pg_ctl stop -m fast; nothing running: nothing to do.
#   status exit 0 when running (and print the conninfo), 3 when not.
# initdb refuses to run as root and CI runs as root: then the server runs as an
# unprivileged system user `isopg`, created here when missing, and owns DIR.
# PG_BIN overrides the binaries' directory (default /usr/lib/postgresql/15/bin).
# PG_FSYNC=off turns fsync off for speed (default on: the real thing).
set -eu

PG_BIN="${PG_BIN:-/usr/lib/postgresql/15/bin}"
PG_FSYNC="${PG_FSYNC:-on}"
PG_USER=isopg

die() {
	echo "pg-test-cluster: $*" >&2
	exit 1
}

[ $# -eq 2 ] || die "usage: $0 start|stop|status DIR"
cmd="$1"
case "$2" in
/*) dir="$2" ;;
*) dir="$(pwd)/$2" ;;
esac
data="$dir/data"
sock="$dir/sock"
# libpq's socket path .s.PGSQL.5432 must fit sun_path (107 bytes).
[ ${#sock} -le 90 ] || die "DIR is too long for a unix socket path: $dir"

# Runs a command as the cluster's owner: ourselves, or isopg when we are root.
as_owner() {
	if [ "$(id -u)" -eq 0 ]; then
		runuser -u "$PG_USER" -- "$@"
	else
		"$@"
	fi
}

conninfo() {
	echo "host=$sock port=5432 user=postgres dbname=postgres"
}

running() {
	[ -f "$data/PG_VERSION" ] && as_owner "$PG_BIN/pg_ctl" -D "$data" status >/dev/null 2>&1
}

start() {
	[ -x "$PG_BIN/initdb" ] && [ -x "$PG_BIN/pg_ctl" ] ||
		die "no PostgreSQL binaries in $PG_BIN (Debian: apt-get install postgresql-15; scripts/deps.sh test)"
	if [ "$(id -u)" -eq 0 ] && ! id -u "$PG_USER" >/dev/null 2>&1; then
		useradd --system --no-create-home --home-dir /nonexistent \
			--shell /usr/sbin/nologin "$PG_USER" ||
			id -u "$PG_USER" >/dev/null 2>&1 || die "cannot create the user $PG_USER"
	fi
	mkdir -p "$dir"
	if [ "$(id -u)" -eq 0 ]; then
		chown "$PG_USER" "$dir"
		chmod 700 "$dir"
		as_owner test -w "$dir" ||
			die "$PG_USER cannot write $dir (a parent directory is closed to it)"
	fi
	if running; then
		conninfo
		return 0
	fi
	if [ ! -f "$data/PG_VERSION" ]; then
		rm -rf "$data"
		as_owner "$PG_BIN/initdb" -D "$data" -A trust -U postgres --no-sync -E UTF8 \
			--locale=C >"$dir/initdb.log" 2>&1 ||
			die "initdb failed: $(tail -n 5 "$dir/initdb.log")"
	fi
	as_owner mkdir -p "$sock"
	as_owner "$PG_BIN/pg_ctl" -D "$data" -l "$dir/server.log" -w -t 30 \
		-o "-c listen_addresses='' -k $sock -c fsync=$PG_FSYNC" start >/dev/null ||
		die "pg_ctl start failed: $(tail -n 5 "$dir/server.log" 2>/dev/null)"
	conninfo
}

stop() {
	[ -f "$data/PG_VERSION" ] || return 0
	running || return 0
	as_owner "$PG_BIN/pg_ctl" -D "$data" -m fast -w stop >/dev/null ||
		die "pg_ctl stop failed"
}

case "$cmd" in
start) start ;;
stop) stop ;;
status)
	if running; then
		conninfo
	else
		exit 3
	fi
	;;
*) die "usage: $0 start|stop|status DIR" ;;
esac
