#!/bin/sh
# bench/sim/run.sh: MIG placement on the Alibaba openb traces (docs/sim.md).
# Every policy on the default and gpushare20/40/100 pod lists mapped to one MIG
# model, in saturate mode on the whole 6,212-GPU cluster; replay of the default
# trace on the whole cluster and on small sub-clusters; and the exact ILP bound
# on 32-GPU sub-clusters; with IN_ORDER_SEEDS=N, also the in-order bound (the
# best a policy that places every arrival that fits can do) on N 16-GPU
# sub-clusters per trace, which GLPK solves only that small. Writes CSVs to $OUT, the plot to docs/img/, and prints
# the tables of docs/benchmarks.md. Needs `make build`, python3 and gnuplot.
#
# Usage: bench/sim/run.sh  (env: BUILD=build TRACES=../shared/traces/alibaba-openb
#        OUT=$BUILD/sim-bench MODEL=h100-80gb ILP_SEEDS=10 ILP_GPUS=32 JOBS=2
#        IN_ORDER_SEEDS=0 IN_ORDER_GPUS=16 IN_ORDER_TIME=30)
set -eu

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-$ROOT/build}
TRACES=${TRACES:-$ROOT/../shared/traces/alibaba-openb}
OUT=${OUT:-$BUILD/sim-bench}
MODEL=${MODEL:-h100-80gb}
ILP_SEEDS=${ILP_SEEDS:-10}
ILP_GPUS=${ILP_GPUS:-32}
ILP_TIME=${ILP_TIME:-60}
REPLAY_GPUS=${REPLAY_GPUS:-48}
REPLAY_SEEDS=${REPLAY_SEEDS:-5}
IN_ORDER_SEEDS=${IN_ORDER_SEEDS:-0}
IN_ORDER_GPUS=${IN_ORDER_GPUS:-16}
IN_ORDER_TIME=${IN_ORDER_TIME:-30}
JOBS=${JOBS:-2}
ISOCTL=$BUILD/isoctl
NODES=$TRACES/openb_node_list_gpu_node.csv
SAT_TRACES="default gpushare20 gpushare40 gpushare100"

if [ ! -f "$NODES" ]; then
	echo "bench/sim: no traces in $TRACES; skipped" >&2
	exit 0
fi
[ -x "$ISOCTL" ] || { echo "bench/sim: $ISOCTL missing: run 'make build' first" >&2; exit 1; }
mkdir -p "$OUT" "$ROOT/docs/img"
rm -f "$OUT"/*.json "$OUT"/*.csv
start=$(date +%s)

# One line per run: "NAME ARGS..."; JOBS of them at a time.
jobs_file=$OUT/jobs.txt
: >"$jobs_file"
for t in $SAT_TRACES; do
	echo "saturate_$t --trace $TRACES/openb_pod_list_$t.csv --mode saturate --seed 1" >>"$jobs_file"
done
echo "replay_default_all --trace $TRACES/openb_pod_list_default.csv --mode replay" >>"$jobs_file"
s=1
while [ "$s" -le "$REPLAY_SEEDS" ]; do
	echo "replay_default_g${REPLAY_GPUS}_s$s --trace $TRACES/openb_pod_list_default.csv --mode replay --gpus $REPLAY_GPUS --seed $s" >>"$jobs_file"
	s=$((s + 1))
done
# seeded_jobs NAME SEEDS ARGS...: one saturate job per trace and seed 1..SEEDS.
seeded_jobs() {
	name=$1 seeds=$2
	shift 2
	for t in $SAT_TRACES; do
		s=1
		while [ "$s" -le "$seeds" ]; do
			echo "${name}_${t}_s$s --trace $TRACES/openb_pod_list_$t.csv --mode saturate $* --seed $s" >>"$jobs_file"
			s=$((s + 1))
		done
	done
}
seeded_jobs ilp "$ILP_SEEDS" --ilp-gpus "$ILP_GPUS" --ilp-time-limit "$ILP_TIME"
seeded_jobs order "$IN_ORDER_SEEDS" --ilp-gpus "$IN_ORDER_GPUS" --ilp-in-order --ilp-time-limit "$IN_ORDER_TIME"

# shellcheck disable=SC2016
xargs -P "$JOBS" -L 1 sh -c '
	name=$1; shift
	if ! "$0" sim --nodes "'"$NODES"'" --gpu-model "'"$MODEL"'" --policy all --json "$@" \
		>"'"$OUT"'/$name.json" 2>"'"$OUT"'/$name.err"; then
		echo "bench/sim: $name failed:" >&2; cat "'"$OUT"'/$name.err" >&2; exit 255
	fi' "$ISOCTL" <"$jobs_file"

python3 "$ROOT/bench/sim/report.py" "$OUT"
gnuplot -e "dir='$OUT'; out='$ROOT/docs/img/sim_saturate.png'" "$ROOT/bench/sim/plot.gp"
grep -h "not available" "$OUT"/*.err 2>/dev/null | sort -u || true
echo "bench/sim: done in $(($(date +%s) - start)) s; CSVs in $OUT, plot in docs/img/sim_saturate.png"
