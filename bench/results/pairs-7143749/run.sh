#!/usr/bin/env bash
# The cells of issue 19's items 4a and 6 with only the target and what it is
# divided by, five rounds per cell, three runs each; 2026-12-06 00:13-00:37 UTC,
# bin/weir and bin/loadgen built from the clean tree at 7143749. Run from the
# repository root after make build and go build -o bin/loadgen ./bench/loadgen:
#   bench/results/pairs-7143749/run.sh OUT
set -eu
out=$1
for r in 1 2 3; do
	bin/loadgen suite -weir bin/weir -targets ceiling-http,weir-http -workloads hot,uniform,zipf \
		-callers 16,64 -seconds 10 -rounds 5 -warmup 1s -out "$out/http/run-$r"
done
for r in 1 2 3; do
	bin/loadgen suite -weir bin/weir -targets weir-client,weir3-client -workloads hot,uniform,zipf \
		-callers 64 -seconds 10 -rounds 5 -warmup 1s -out "$out/3v1/run-$r"
done
for r in 1 2 3; do
	bin/loadgen suite -weir bin/weir -targets ceiling-grpc,weir-grpc -workloads hot,uniform,zipf \
		-callers 16,64 -seconds 10 -rounds 5 -warmup 1s -out "$out/grpc/run-$r"
done
for k in http 3v1 grpc; do bin/loadgen spread "$out/$k"/run-{1,2,3}/bench.csv >"$out/$k/spread.md"; done
