# bench/sim/plot.gp: allocation ratio against offered demand, one panel per
# trace, one line per policy (bench/sim/run.sh sets `dir` and `out`).
set terminal pngcairo size 1400,1000 font ",11"
set output out
set datafile separator ","
set key bottom right
set grid
set xlabel "offered demand (% of the cluster's compute slices)"
set ylabel "compute slices allocated (share)"
# Below ~85% every policy places everything: the plot shows where they part.
set xrange [80:130]
set yrange [0.8:1.0]
set linetype 1 lc rgb "#7f7f7f" lw 2
set linetype 2 lc rgb "#1f77b4" lw 2
set linetype 3 lc rgb "#2ca02c" lw 2
set linetype 4 lc rgb "#ff7f0e" lw 2
set linetype 5 lc rgb "#d62728" lw 3
set multiplot layout 2,2 title "MIG placement, Alibaba openb traces mapped to H100-80GB (isoctl sim, saturate)"
do for [t in "default gpushare20 gpushare40 gpushare100"] {
	f = sprintf("%s/curve_%s.csv", dir, t)
	set title t
	stats f skip 1 nooutput
	plot for [c=2:STATS_columns] f using 1:c with lines lt (c - 1) title columnhead(c)
}
unset multiplot
