set terminal pngcairo size 2220,1000 font 'sans,10'
set output 'results/h200/bench-report-moe/bench.png'
set multiplot layout 2,1 title 'standin bench (cuda), 2026-12-06 08:21 UTC'
set style data histogram
set style fill solid 0.85 border -1
set key outside right top
set grid ytics
set xtics noenhanced
set key noenhanced
set bmargin 4
set style histogram errorbars gap 2 lw 1
set logscale y
set ylabel 'tokens/s (log scale)'
set yrange [535.455:*]
set title 'throughput: mean and standard deviation over 2 repetitions'
plot 'results/h200/bench-report-moe/bench.dat' using 2:3:xtic(1) title 'real', 'results/h200/bench-report-moe/bench.dat' using 5:6 title 'standalone', 'results/h200/bench-report-moe/bench.dat' using 8:9 title 'interposed-none'
unset logscale y
set style histogram clustered gap 2
set yrange [0:*]
set ylabel 'ratio to real'
set title 'ratio to real: upper quartiles of t/s (1 = same speed)'
plot 'results/h200/bench-report-moe/bench.dat' using 4:xtic(1) title 'real', 'results/h200/bench-report-moe/bench.dat' using 7 title 'standalone', 'results/h200/bench-report-moe/bench.dat' using 10 title 'interposed-none', 1 with lines dt 2 lc 'black' notitle
unset multiplot
