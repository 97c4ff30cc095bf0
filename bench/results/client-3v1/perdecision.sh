#!/usr/bin/env bash
# Microseconds of node CPU per decision, function by function, of two sets
# of CPU profiles: each set's profiles (8 s each, as profile.sh takes them)
# summed and divided by the decisions of 8 s at its cell's rate. Prints
# "base new new-base | flat base new  function", largest difference first.
#   bench/results/client-3v1/perdecision.sh BIN BASE_DIR NEW_DIR [ROWS]
# where each DIR is a profile.sh OUT (cpu-*.pprof and cell/bench.csv).
# BASE_BIN=bin/loadgen names the base's binary when it is another, such as
# a ceiling's profiles against a node's. OPS=N divides by N operations
# instead (each DIR's profiles then cover N operations of a benchmark, and
# need no cell/bench.csv): microseconds per operation.
set -eu
export LC_ALL=C
bin=$1 base=$2 new=$3 rows=${4:-40}
per() { # BIN DIR -> "function<TAB>cum µs<TAB>flat µs" per decision
	local rate
	if [ -n "${OPS:-}" ]; then
		rate=$(awk -v n="$OPS" 'BEGIN { print n / 8 }') # so that rate × 8 s = OPS
	else
		rate=$(tail -n +2 "$2/cell/bench.csv" | cut -d, -f8 | head -1)
	fi
	go tool pprof -top -cum -nodecount=3000 "$1" "$2"/cpu-*.pprof 2>/dev/null | awk -v d="$rate" '
	function sec(x) { if (x ~ /ms$/) { sub(/ms$/, "", x); return x / 1000 } sub(/s$/, "", x); return x + 0 }
	/Total samples/ { for (i = 1; i <= NF; i++) if ($i == "=") printf "TOTAL\t%f\t0\n", sec($(i + 1)) * 1e6 / (d * 8) }
	NF >= 6 && $1 ~ /^[0-9.]+(m?s)?$/ && $4 ~ /^[0-9.]+(m?s)?$/ { n = $6; for (i = 7; i <= NF; i++) n = n " " $i
		printf "%s\t%f\t%f\n", n, sec($4) * 1e6 / (d * 8), sec($1) * 1e6 / (d * 8) }' | sort -t "$(printf '\t')" -k1,1
}
join -t "$(printf '\t')" -a2 -e 0 -o 0,1.2,2.2,1.3,2.3 <(per "${BASE_BIN:-$bin}" "$base") <(per "$bin" "$new") |
	awk -F '\t' '{ printf "%6.2f %6.2f %6.2f | flat %5.2f %5.2f  %s\n", $2, $3, $3 - $2, $4, $5, $1 }' |
	sort -k3 -g -r | head -n "$rows"
