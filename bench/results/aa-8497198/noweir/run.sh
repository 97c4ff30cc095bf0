#!/usr/bin/env bash
# The A/A targets without the node's: is the HTTP A/A's lean above 1 in
# ../out (17 of 24 readings) the first ceiling's turns next to weir-http, or
# the copy? Two runs of the four ceiling targets alone, otherwise as ../run.sh.
#   bench/results/aa-8497198/noweir/run.sh OUT
set -eu
out=$1
mkdir -p "$out"
for r in 1 2; do
	bin/loadgen suite -weir bin/weir -targets ceiling-http-aa,ceiling-http,ceiling-grpc-aa,ceiling-grpc \
		-workloads hot,uniform,zipf -callers 16,64 -seconds 5 -rounds 5 -warmup 1s -out "$out/run-$r" 2>"$out/run-$r.log"
done
for t in ceiling-http-aa ceiling-grpc-aa; do
	bench/readings.sh cells "$t" vs_ceiling "$out"/run-{1,2}/bench.csv
done | bench/readings.sh medians >"$out/readings.txt"
