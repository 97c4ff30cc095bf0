#!/usr/bin/env bash
# Readings of make bench's same-run ratio cells across runs, for the
# results scripts that pool them (bench/results/make-bench-*/readings.sh).
#
#   bench/readings.sh cells TARGET COLUMN FILES...
#       one line per reading at 16 and 64 callers of TARGET's COLUMN in
#       the bench.csv FILES: "workload callers target column value", the
#       value to four decimals;
#   bench/readings.sh medians
#       reads such lines and writes one line per cell: its median and its
#       readings, lowest first ("... : median M of N: v1 v2 ...").
set -eu
case ${1:-} in
cells)
	target=$2 col=$3
	shift 3
	awk -F, -v t="$target" -v col="$col" 'FNR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
		$5 == t && ($4 == 16 || $4 == 64) && $c[col] != "" { printf "%s %s %s %s %.4f\n", $1, $4, $5, col, $c[col] }' "$@"
	;;
medians)
	sort -k1,4 -k5,5g |
		awk '{ k = $1 " " $2 " " $3 " " $4; if (k != p) { if (p != "") emit(); p = k; n = 0 } v[++n] = $5 }
		function emit(  m, i, line) { m = n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
			line = p ": median " sprintf("%.4f", m) " of " n ":"; for (i = 1; i <= n; i++) line = line " " v[i]; print line }
		END { emit() }'
	;;
*)
	echo "usage: bench/readings.sh cells TARGET COLUMN FILES... | bench/readings.sh medians" >&2
	exit 2
	;;
esac
