#!/usr/bin/env bash
# The counts and ranges the READMEs of this directory quote that are not
# read straight off a readings.txt: per set of runs, each target's single
# vs_ceiling readings (lowest-highest, how many >= 1); in out/, Weir's
# server CPU per decision ÷ its ceiling's in the same cell, and the server
# CPU per decision of one node and three through the Go client at 64
# callers; the HTTP ceiling's decisions/s on uniform keys at 16 callers.
# From the repository root:
#   bench/results/aa-8497198/summary.sh > bench/results/aa-8497198/summary.txt
set -eu
d=bench/results/aa-8497198
for set in out noweir pinned; do
	echo "## $set: vs_ceiling, single readings at 16 and 64 callers"
	awk -F, 'FNR > 1 && $21 != "" && ($4 == 16 || $4 == 64) {
			n[$5]++; ge[$5] += ($21 >= 1)
			if (!($5 in lo) || $21 < lo[$5]) lo[$5] = $21
			if ($21 > hi[$5]) hi[$5] = $21 }
		END { for (t in n) printf "%-16s %.3f-%.3f, %d of %d >= 1\n", t, lo[t], hi[t], ge[t], n[t] }' \
		"$d/$set"/run-*/bench.csv | sort
	echo "HTTP ceiling, uniform, 16 callers, decisions/s:" \
		"$(awk -F, '$5 == "ceiling-http" && $1 == "uniform" && $4 == 16 { printf " %.0f", $8 }' "$d/$set"/run-*/bench.csv)"
done
echo "## out: server CPU per decision, Weir ÷ its ceiling in the same cell"
for f in "$d"/out/run-*/bench.csv; do
	awk -F, '$5 ~ /^(ceiling|weir)-(http|grpc)$/ { split($5, a, "-"); k = $1 " " $4 " " a[2]
			if (a[1] == "ceiling") c[k] = $14; else w[k] = $14 }
		END { for (k in w) { split(k, p, " "); print p[3], w[k] / c[k] } }' "$f"
done | awk '{ if (!($1 in lo) || $2 < lo[$1]) lo[$1] = $2; if ($2 > hi[$1]) hi[$1] = $2 }
	END { for (f in lo) printf "%-5s %.2f-%.2f\n", f, lo[f], hi[f] }' | sort
echo "## out: server CPU µs per decision at 64 callers (lowest-highest of four runs)"
awk -F, '$4 == 64 && ($5 == "weir-client" || $5 == "weir3-client") { k = $1 " " $5
		if (!(k in lo) || $14 < lo[k]) lo[k] = $14; if ($14 > hi[k]) hi[k] = $14 }
	END { for (k in lo) printf "%-22s %.1f-%.1f\n", k, lo[k], hi[k] }' "$d"/out/run-*/bench.csv | sort
