#!/usr/bin/env bash
# Issue 19's open cells (item 6: weir-http and weir-grpc ÷ their own-process
# ceilings at 16 and 64 callers; item 4a: three nodes ÷ one through the Go
# client at 64 callers) read beside an A/A reading of each ceiling: a second
# process of the same empty server, ÷ the first, in the same rounds
# (bench/loadgen/suite_aa.go). Four runs of one suite each, five rounds per
# cell, 5 s cells as make bench has them; the decision rules in README.md
# were written before the first run. From the repository root after make
# build and go build -o bin/loadgen ./bench/loadgen:
#   bench/results/aa-8497198/run.sh OUT
set -eu
out=$1
mkdir -p "$out"
targets=ceiling-http-aa,ceiling-http,weir-http,ceiling-grpc-aa,ceiling-grpc,weir-grpc,weir-client,weir3-client
for r in 1 2 3 4; do
	bin/loadgen suite -weir bin/weir -targets "$targets" -workloads hot,uniform,zipf \
		-callers 16,64 -seconds 5 -rounds 5 -warmup 1s -out "$out/run-$r" 2>"$out/run-$r.log"
done
bin/loadgen spread "$out"/run-{1,2,3,4}/bench.csv >"$out/spread.md"
# One line per cell and ratio: median of the four runs and the readings.
for t in ceiling-http-aa weir-http ceiling-grpc-aa weir-grpc; do
	bench/readings.sh cells "$t" vs_ceiling "$out"/run-{1,2,3,4}/bench.csv
done | bench/readings.sh medians >"$out/readings.txt"
bench/readings.sh cells weir3-client vs_one_node "$out"/run-{1,2,3,4}/bench.csv | awk '$2 == 64' |
	bench/readings.sh medians >>"$out/readings.txt"
