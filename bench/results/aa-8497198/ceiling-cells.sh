#!/usr/bin/env bash
# The README's starting point: in each committed make bench run, a
# ceiling's three cells at one number of callers (hot, uniform and Zipf
# keys: the same work for an empty server) and their lowest ÷ highest
# decisions/s. From the repository root:
#   bench/results/aa-8497198/ceiling-cells.sh > bench/results/aa-8497198/ceiling-cells.txt
set -eu
for f in bench/results/make-bench-*/bench.csv; do
	awk -F, -v run="$(basename "$(dirname "$f")")" '
		$5 ~ /^ceiling-(http|grpc)$/ && ($4 == 16 || $4 == 64) { k = $5 " " $4; v[k] = v[k] " " sprintf("%.0f", $8) }
		END { for (k in v) print run, k, v[k] }' "$f"
done | sort -k2,3 -k1,1 | awk '{ lo = $4; hi = $4; for (i = 5; i <= NF; i++) { if ($i < lo) lo = $i; if ($i > hi) hi = $i }
	printf "%-22s %-13s %3s %s  lowest/highest %.3f\n", $1, $2, $3, $4 " " $5 " " $6, lo / hi }'
