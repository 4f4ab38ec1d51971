# Draws bench/run's plots from the data files it writes next to them:
#   handoff_<system>.dat     "latency_us fraction": a 200-point CDF of the handoff
#                            latency (two sessions ping-pong), all rounds merged
#   throughput_<system>.dat  "contenders median min max": acquisitions/s, across rounds
#   herd_<recipe>.dat        "waiters notifications_per_release requests_per_grant handoff_p50_us"
#
#   gnuplot -e "dir='bench/results'; systems='zkasio curator kazoo'; bound=570" bench/plot.gp
#
# systems: the CDFs to draw; tsystems: the throughput lines (default: systems);
# hrecipes: the herd's recipes (mutex race; default: none);
# bound: the floor handoff bound in microseconds (floor notify p50 + floor
# get_children p50), drawn as a dashed line; 0 for none.
if (!exists("dir")) dir = "bench/results"
if (!exists("systems")) systems = "zkasio curator kazoo"
if (!exists("tsystems")) tsystems = systems
if (!exists("bound")) bound = 0
if (!exists("hrecipes")) hrecipes = ""

if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
  set terminal pngcairo size 900,600 enhanced font "sans,10"
} else {
  set terminal png size 900,600
}
# One colour per system, the same in both plots.
colour(s) = (s eq "zkasio") ? 1 : (s eq "curator") ? 2 : (s eq "kazoo") ? 3 : 4
set grid
set key bottom right

if (words(systems) > 0) {
  set output dir."/handoff_cdf.png"
  set title "Lock handoff latency, two sessions ping-pong (CDF, all rounds)"
  set xlabel "handoff latency: release stamped to acquire returned (microseconds)"
  set ylabel "fraction of handoffs"
  set logscale x
  set yrange [0:1]
  if (bound > 0) {
    set arrow 1 from bound, graph 0 to bound, graph 1 nohead dt 2 lw 1.5 lc rgb "gray30"
    set label 1 "floor bound" at bound, graph 0.9 offset 0.5, 0 tc rgb "gray30"
  }
  plot for [s in systems] dir."/handoff_".s.".dat" using 1:2 with lines lw 2 lt colour(s) title s
  unset arrow 1
  unset label 1
}

if (words(tsystems) > 0) {
  set output dir."/throughput.png"
  set title "Throughput on one lock (hold 0 us, sessions = min(contenders, 8)); median and range across rounds"
  set xlabel "contenders"
  set ylabel "acquisitions per second"
  set logscale x 2
  set xrange [0.8:80]
  set xtics ("1" 1, "4" 4, "16" 16, "64" 64)
  set autoscale y
  set yrange [0:*]
  set key center right
  plot for [s in tsystems] dir."/throughput_".s.".dat" using 1:2:3:4 with yerrorlines lw 2 pt 7 lt colour(s) title s
}

if (words(hrecipes) > 0) {
  set output dir."/herd.png"
  set title "The herd: per release of one lock, W waiters each on its own session"
  set xlabel "waiters"
  set ylabel "per release"
  set logscale x 10
  set logscale y 10
  set xrange [0.8:130]
  set xtics ("1" 1, "10" 10, "100" 100)
  set autoscale y
  set key top left
  plot for [r in hrecipes] dir."/herd_".r.".dat" using 1:2 with linespoints lw 2 pt 7 title r." notifications", \
       for [r in hrecipes] dir."/herd_".r.".dat" using 1:3 with linespoints lw 2 pt 5 dt 2 title r." requests"
}
