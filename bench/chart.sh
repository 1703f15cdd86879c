#!/usr/bin/env bash
#
# latest.png from latest.csv: TPS per operation, pg_tenure next to today's
# approach and the reference, one panel per client count, log scale.
# bench/run.sh calls it; run it again to redraw a results directory:
#
#   bash bench/chart.sh [RESULTS_DIR]     # default bench/results; needs gnuplot
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
res=${1:-$here/results}
csv=$res/latest.csv
[ -f "$csv" ] || { echo "chart.sh: no $csv" >&2; exit 1; }
tmp=$(mktemp -d /tmp/pg_tenure-chart.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

# operation | scenarios, in the order of their bars
groups=(
	"is-leader|leader_is leader_row select1"
	"renew|renew renew_row select1"
	"acquire + release|cycle cycle_listened cycle_advisory cycle_sql"
	"fenced INSERT|insert_fenced_local insert_plain_local insert_trigger insert_for_share insert_plain"
)
color() {
	case $1 in
		leader_is | renew | cycle | cycle_listened | insert_fenced_local) echo 0x1f77b4 ;; # pg_tenure
		select1 | insert_plain | insert_plain_local | cycle_sql) echo 0xaaaaaa ;; # reference
		*) echo 0xff7f0e ;;                                                # today's approach
	esac
}
label() {
	case $1 in
		leader_is) echo "leader_is" ;;
		leader_row) echo "lease row SELECT" ;;
		select1) echo "SELECT 1" ;;
		renew) echo "renew" ;;
		renew_row) echo "lease row UPDATE" ;;
		cycle) echo "acquire+release" ;;
		cycle_listened) echo "acquire+release, a listener" ;;
		cycle_sql) echo "the same rows, plain SQL" ;;
		cycle_advisory) echo "advisory lock+unlock" ;;
		insert_fenced_local) echo "fenced (token local)" ;;
		insert_plain_local) echo "unfenced, same txn" ;;
		insert_trigger) echo "PL/pgSQL trigger" ;;
		insert_for_share) echo "epoch FOR SHARE" ;;
		insert_plain) echo "plain INSERT" ;;
		*) echo "$1" ;;
	esac
}

clients=$(awk -F, 'NR > 1 && !seen[$2]++ {print $2}' "$csv")
n=$(echo "$clients" | wc -w)
{
	echo "set terminal pngcairo size 1200,$((400 * n + 40)) noenhanced font ',10'"
	echo "set output '$res/latest.png'"
	echo "set multiplot layout $n,1 title \"pg_tenure (blue) next to today's approach (orange) and the reference (grey): median TPS, log scale\""
	echo "set logscale y"
	echo "set style fill solid 0.85 border -1"
	echo "set boxwidth 0.8"
	echo "set grid ytics"
	echo "set xtics rotate by -30 left nomirror font ',9' scale 0"
	echo "set format y '%.0s%c'"
	echo "set ylabel 'TPS'"
	echo "set bmargin 7"
	echo "set tmargin 3"
	echo "set key off"
} >"$tmp/chart.gp"
for c in $clients; do
	x=0
	: >"$tmp/$c.dat"
	labels=
	for g in "${groups[@]}"; do
		IFS='|' read -r gname ids <<<"$g"
		x0=$x
		for id in $ids; do
			t=$(awk -F, -v s="$id" -v c="$c" '$1==s && $2==c {print $3}' "$csv")
			[ -n "$t" ] && echo "$x \"$(label "$id")\" $t $(color "$id")" >>"$tmp/$c.dat"
			x=$((x + 1))
		done
		labels="$labels
set label \"$gname\" at $(awk -v a="$x0" -v b="$x" 'BEGIN {print (a + b - 1) / 2}'), graph 1.06 center font ',11'"
		x=$((x + 1))
	done
	lo=$(awk '{print $(NF - 1)}' "$tmp/$c.dat" | sort -g | head -1)
	hi=$(awk '{print $(NF - 1)}' "$tmp/$c.dat" | sort -g | tail -1)
	{
		echo "unset label"
		echo "$labels"
		echo "set label '$c client$([ "$c" = 1 ] || echo s)' at graph 0.01, graph 0.93 left font ',11'"
		echo "set xrange [-0.7:$((x - 2)).7]"
		echo "set yrange [$(awk -v l="$lo" 'BEGIN {print l / 3}'):$(awk -v h="$hi" 'BEGIN {print h * 4}')]"
		echo "plot '$tmp/$c.dat' using 1:3:4:xtic(2) with boxes lc rgb variable, \\"
		echo "     '' using 1:3:(sprintf('%.0f', \$3)) with labels offset 0,0.7 font ',8'"
	} >>"$tmp/chart.gp"
done
echo "unset multiplot" >>"$tmp/chart.gp"
gnuplot "$tmp/chart.gp"
