#!/bin/sh
# Installs the Debian 12 packages isostack needs, and only those that are missing,
# so that `make run` and `make test` are the whole set-up on a fresh machine.
# Usage: scripts/deps.sh run|test|run-ib
set -eu

RUN_PKGS="gcc make meson ninja-build pkg-config libmicrohttpd-dev libjansson-dev \
libsqlite3-dev libsodium-dev libfyaml-dev libcurl4-gnutls-dev libglpk-dev \
libibmad-dev libibumad-dev libibnetdisc-dev liblua5.4-dev libseccomp-dev libbpf-dev libpq-dev \
nftables libnftables-dev libnl-3-dev libnl-route-3-dev libslurm-dev"
TEST_PKGS="$RUN_PKGS libcmocka-dev python3 sqlite3 procps openssl gnuplot-nox \
opensm ibsim-utils infiniband-diags opa-fm clang libclang-rt-14-dev \
postgresql-15 slurmctld slurmd slurm-client munge containernetworking-plugins"
RUNIB_PKGS="$RUN_PKGS opensm ibsim-utils infiniband-diags"

case "${1:-run}" in
run) want="$RUN_PKGS" ;;
test) want="$TEST_PKGS" ;;
run-ib) want="$RUNIB_PKGS" ;;
*) echo "usage: $0 run|test|run-ib" >&2; exit 2 ;;
esac

# Test-only npm tools: @redocly/cli lints docs/openapi.yaml (tests/docs). The
# version is pinned in tools/redocly/package.json and package-lock.json
# (integrity hashes); it goes into tools/redocly/node_modules (git-ignored).
npm_tools() {
	dir="$(cd "$(dirname "$0")/.." && pwd)/tools/redocly"
	if ! command -v npm >/dev/null 2>&1; then
		echo "deps: npm is missing: install Node.js >= 20.19 with npm (tests/docs need it)" >&2
		exit 1
	fi
	npm_want=$(node -p "require('$dir/package.json').dependencies['@redocly/cli']")
	npm_have=$(node -p "require('$dir/node_modules/@redocly/cli/package.json').version" \
		2>/dev/null || true)
	[ "$npm_have" = "$npm_want" ] && return 0
	echo "deps: installing @redocly/cli $npm_want (npm) into tools/redocly" >&2
	(cd "$dir" && npm ci --no-audit --no-fund --ignore-scripts --omit-lockfile-registry-resolved >&2)
}
[ "${1:-run}" = test ] && npm_tools

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
