#!/bin/sh
# Installs the Debian 12 packages isostack needs, and only those that are missing,
# so that `make run` and `make test` are the whole set-up on a fresh machine.
# Usage: scripts/deps.sh run|test|run-ib
set -eu

RUN_PKGS="gcc make meson ninja-build pkg-config libmicrohttpd-dev libjansson-dev \
libsqlite3-dev libsodium-dev libfyaml-dev libcurl4-gnutls-dev libglpk-dev \
libibmad-dev libibumad-dev libibnetdisc-dev liblua5.4-dev"
TEST_PKGS="$RUN_PKGS libcmocka-dev python3 sqlite3 procps openssl gnuplot-nox \
opensm ibsim-utils infiniband-diags opa-fm"
RUNIB_PKGS="$RUN_PKGS opensm ibsim-utils infiniband-diags"

case "${1:-run}" in
run) want="$RUN_PKGS" ;;
test) want="$TEST_PKGS" ;;
run-ib) want="$RUNIB_PKGS" ;;
*) echo "usage: $0 run|test|run-ib" >&2; exit 2 ;;
esac

missing=""
for p in $want; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing="$missing $p"
	fi
done
[ -z "$missing" ] && exit 0

echo "deps: installing$missing" >&2
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing
