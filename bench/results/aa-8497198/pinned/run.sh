#!/usr/bin/env bash
# Exploratory, decided after ../out: does giving the load generator and
# the servers a core each tighten the A/A scatter? bin/loadgen runs on CPU 1
# (taskset); once the suite has started its servers (its "cells of" line),
# every child process, with all its threads, is moved to CPU 0. Then item
# 6's targets and the A/A ones as ../run.sh, without the Go client's, two
# runs. Linux, taskset (util-linux). From the repository root:
#   bench/results/aa-8497198/pinned/run.sh OUT
set -eu
out=$1
mkdir -p "$out"
for r in 1 2; do
	taskset -c 1 bin/loadgen suite -weir bin/weir \
		-targets ceiling-http-aa,ceiling-http,weir-http,ceiling-grpc-aa,ceiling-grpc,weir-grpc \
		-workloads hot,uniform,zipf -callers 16,64 -seconds 5 -rounds 5 -warmup 1s \
		-out "$out/run-$r" 2>"$out/run-$r.log" &
	lg=$!
	until grep -q 'cells of' "$out/run-$r.log" 2>/dev/null; do
		kill -0 "$lg" 2>/dev/null || { cat "$out/run-$r.log" >&2; exit 1; } # the suite ended before starting its cells
		sleep 0.2
	done
	for c in $(pgrep -P "$lg"); do taskset -a -p -c 0 "$c" >/dev/null; done
	pgrep -P "$lg" | while read -r c; do echo "$c $(taskset -p "$c" | awk '{ print $NF }') $(tr '\0' ' ' <"/proc/$c/cmdline" | cut -c1-60)"; done >"$out/run-$r.pinned"
	wait "$lg"
done
for t in ceiling-http-aa weir-http ceiling-grpc-aa weir-grpc; do
	bench/readings.sh cells "$t" vs_ceiling "$out"/run-{1,2}/bench.csv
done | bench/readings.sh medians >"$out/readings.txt"
