#!/bin/sh
# run.sh: `make fuzz`. Runs each libFuzzer harness of BUILD (meson
# -Dfuzzing=true) for SECONDS, one after the other, each on one core. The
# working corpus grows in BUILD/fuzz-corpus/NAME, seeded from the committed
# tests/fuzz/corpus/NAME; crashes land in BUILD/fuzz-crashes/NAME/. A crash
# stops the run with its path: fix the parser, then keep the input under
# tests/fuzz/crashes/NAME/ so that `make test` replays it (docs/fuzzing.md).
# Usage: tests/fuzz/run.sh BUILD SECONDS [NAME...]
# FUZZ_RUNS=N also stops each harness after N inputs; FUZZ_CPU picks the core
# (default 0); FUZZ_FLAGS adds libFuzzer flags (-close_fd_mask=2 silences the
# node agent's log lines; crash reports still show).
set -eu

build=$1
seconds=$2
shift 2
src=$(dirname "$0")
[ $# -gt 0 ] || set -- inventory partitions opafm discover trace audit audit_event audit_keyset api gpu_sim \
	agent_desired agent_outbox agent_vf agent_config agent_socket sm_document

# The largest input each harness is given: about twice its largest seed, so
# that the fuzzer spends its time on structure rather than on length.
max_len() {
	case $1 in
	inventory) echo 16384 ;;
	discover) echo 24576 ;;
	audit) echo 16384 ;;
	api) echo 4096 ;;
	agent_socket) echo 2048 ;; # a request is at most 1024 bytes, a record 4096
	*) echo 8192 ;;
	esac
}

for name in "$@"; do
	bin=$build/tests/fuzz/fuzz_$name
	[ -x "$bin" ] || { echo "fuzz: $bin is not built" >&2; exit 2; }
	work=$build/fuzz-corpus/$name
	crashes=$build/fuzz-crashes/$name
	mkdir -p "$work" "$crashes"
	dict=""
	[ -f "$src/dict/$name.dict" ] && dict="-dict=$src/dict/$name.dict"
	echo "fuzz: $name for ${seconds}s (max_len $(max_len "$name"))"
	runs=""
	[ -n "${FUZZ_RUNS:-}" ] && runs="-runs=$FUZZ_RUNS"
	# One core each: the audit verifier would start a worker per core.
	# shellcheck disable=SC2086
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	LSAN_OPTIONS=suppressions=$src/lsan.supp \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
		taskset -c "${FUZZ_CPU:-0}" "$bin" -max_total_time="$seconds" -max_len="$(max_len "$name")" \
		-timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
		-artifact_prefix="$crashes/" $dict $runs ${FUZZ_FLAGS:-} "$work" "$src/corpus/$name"
done
