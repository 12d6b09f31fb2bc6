#!/bin/sh
# openapi_lint.sh: lints docs/openapi.yaml with a real OpenAPI validator,
# @redocly/cli, pinned in tools/redocly/package-lock.json and installed into
# tools/redocly/node_modules by `scripts/deps.sh test` (make test does it).
# Fails on any error or warning. Works offline: telemetry and the update
# check are switched off, so nothing leaves the machine.
# Usage: tests/docs/openapi_lint.sh SOURCE_ROOT
set -eu
root=${1:-.}
redocly="$root/tools/redocly/node_modules/.bin/redocly"
if [ ! -x "$redocly" ]; then
	echo "openapi_lint: $redocly is missing: run 'scripts/deps.sh test' (make test does)" >&2
	exit 1
fi
export REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true NO_COLOR=1
out=$("$redocly" lint "$root/docs/openapi.yaml" --format stylish 2>&1) && rc=0 || rc=$?
printf '%s\n' "$out"
if [ "$rc" -ne 0 ]; then
	echo "openapi_lint: docs/openapi.yaml has errors (redocly exit $rc)" >&2
	exit 1
fi
if printf '%s\n' "$out" | grep -q ' warning '; then
	echo "openapi_lint: docs/openapi.yaml has warnings" >&2
	exit 1
fi
echo "openapi_lint: docs/openapi.yaml is valid OpenAPI 3.0.3"
