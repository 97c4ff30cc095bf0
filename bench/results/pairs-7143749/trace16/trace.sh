#!/usr/bin/env bash
# A 3 s execution trace of one node serving weir-http at 16 callers, from about
# the cell's 7th second (as profile.sh); run from the repository root after make build:
#   bench/results/pairs-7143749/trace16/trace.sh OUT WORKLOAD
# then go tool trace -pprof=sync|sched|net|syscall OUT/trace.out > X.pprof
# (the traces themselves, 6.6 MB each, are not kept).
set -u
out=$1 wl=$2
rm -rf /tmp/weir-bench-* "$out"; mkdir -p "$out"
WEIR_DEBUG_ADDR=127.0.0.1:0 bin/loadgen suite -weir bin/weir -limit bench -targets weir-http -workloads "$wl" -callers 16 -seconds 20 -out "$out/cell" >"$out/suite.log" 2>&1 &
suite=$!
for _ in $(seq 1 240); do
	[ "$(grep -l 'debug listener' /tmp/weir-bench-*/weir-solo-*.log 2>/dev/null | wc -l)" -ge 1 ] && break
	sleep 0.5
done
sleep 14
a=$(grep -h 'debug listener' /tmp/weir-bench-*/weir-solo-*.log | grep -o 'addr=[0-9.:]*' | cut -d= -f2 | head -1)
curl -s -o "$out/trace.out" "http://$a/debug/pprof/trace?seconds=3"
wait "$suite"
