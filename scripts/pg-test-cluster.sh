#!/bin/sh
# pg-test-cluster.sh: a throwaway PostgreSQL for tests (issue 16), so that every
# store test can run against a real server without touching the machine's own
# clusters (/etc/postgresql, pg_ctlcluster) or any TCP port.
#
# Usage: scripts/pg-test-cluster.sh start|stop|status|promote DIR
#        scripts/pg-test-cluster.sh standby PRIMARY_DIR STANDBY_DIR
#   start  initdb --no-sync -A trust into DIR/data (once), then pg_ctl start with
#          listen_addresses='' and a private unix socket in DIR/sock; prints the
#          libpq conninfo as its LAST line. Already running: prints it again.
#   stop   pg_ctl stop -m fast; nothing running: nothing to do.
#   status exit 0 when running (and print the conninfo), 3 when not.
#   standby  a synchronous streaming standby of the running cluster in
#          PRIMARY_DIR: pg_basebackup -R over the primary's unix socket into
#          STANDBY_DIR/data (once; application_name = the standby's name, see
#          below), started on its own socket STANDBY_DIR/sock; then the
#          primary's synchronous_standby_names is set to that name (ALTER
#          SYSTEM, reloaded), so that every commit on the primary waits for the
#          standby to flush its WAL. Prints the standby's conninfo LAST.
#          Already made or running: started if needed, the setting made again.
#   promote  pg_ctl promote -w: the standby in DIR becomes a primary (read-
#          write). Already a primary: nothing to do. Not running: an error.
# A standby's name is its directory's base name with every character outside
# [A-Za-z0-9_] made "_", prefixed "s_".
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

usage="usage: $0 start|stop|status|promote DIR, or $0 standby PRIMARY_DIR STANDBY_DIR"
[ $# -ge 2 ] || die "$usage"
cmd="$1"
absolute() {
	case "$1" in
	/*) echo "$1" ;;
	*) echo "$(pwd)/$1" ;;
	esac
}
if [ "$cmd" = standby ]; then
	[ $# -eq 3 ] || die "$usage"
	primary_dir="$(absolute "$2")"
	dir="$(absolute "$3")"
	[ "$primary_dir" != "$dir" ] || die "standby: PRIMARY_DIR and STANDBY_DIR are the same"
else
	[ $# -eq 2 ] || die "$usage"
	dir="$(absolute "$2")"
fi
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
	prepare
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
	server_start
	conninfo
}

# The binaries are there, and when we are root the unprivileged owner exists
# and owns DIR (initdb and pg_basebackup refuse to run as root).
prepare() {
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
}

# Runs the server of DIR/data on its socket DIR/sock.
server_start() {
	as_owner mkdir -p "$sock"
	as_owner "$PG_BIN/pg_ctl" -D "$data" -l "$dir/server.log" -w -t 30 \
		-o "-c listen_addresses='' -k $sock -c fsync=$PG_FSYNC" start >/dev/null ||
		die "pg_ctl start failed: $(tail -n 5 "$dir/server.log" 2>/dev/null)"
}

standby() {
	psock="$primary_dir/sock"
	name="s_$(basename "$dir" | tr -c 'A-Za-z0-9_\n' '_')"
	if ! [ -f "$primary_dir/data/PG_VERSION" ] ||
		! as_owner "$PG_BIN/pg_ctl" -D "$primary_dir/data" status >/dev/null 2>&1; then
		die "standby: no PostgreSQL running in $primary_dir (start it first)"
	fi
	prepare
	if [ ! -f "$data/PG_VERSION" ]; then
		rm -rf "$data"
		# -R writes standby.signal and primary_conninfo (with the
		# application_name the primary's synchronous_standby_names names);
		# -X stream takes the WAL of the copy over a second connection.
		as_owner "$PG_BIN/pg_basebackup" -D "$data" -R -X stream -c fast \
			-d "host=$psock port=5432 user=postgres application_name=$name" \
			>"$dir/basebackup.log" 2>&1 ||
			die "pg_basebackup failed: $(tail -n 5 "$dir/basebackup.log")"
		# The copy carries the primary's postgresql.auto.conf; a standby
		# that kept synchronous_standby_names would, once promoted, wait
		# for a standby it does not have at every commit.
		as_owner sed -i '/^synchronous_standby_names/d' "$data/postgresql.auto.conf"
	fi
	running || server_start
	as_owner "$PG_BIN/psql" -XqAt -h "$psock" -p 5432 -U postgres -d postgres \
		-c "ALTER SYSTEM SET synchronous_standby_names = '$name'" \
		-c "SELECT pg_reload_conf()" >/dev/null ||
		die "standby: setting synchronous_standby_names on the primary failed"
	conninfo
}

promote() {
	[ -f "$data/PG_VERSION" ] || die "promote: no cluster in $dir"
	running || die "promote: the cluster in $dir is not running"
	[ -f "$data/standby.signal" ] || return 0
	as_owner "$PG_BIN/pg_ctl" -D "$data" -w -t 30 promote >/dev/null ||
		die "pg_ctl promote failed: $(tail -n 5 "$dir/server.log" 2>/dev/null)"
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
standby) standby ;;
promote) promote ;;
status)
	if running; then
		conninfo
	else
		exit 3
	fi
	;;
*) die "$usage" ;;
esac
