#!/usr/bin/env bash
# Does a node's process keep working into the next target's turn? Starts
# bin/weir (as make bench starts its node, on loopback) and an HTTP ceiling,
# drives each with 64 HTTP callers on uniform keys for 3 s, twice, and
# prints the server's CPU ticks (1/100 s, /proc/PID/stat utime + stime) in
# each 250 ms of the 3 s after the load ends. From the repository root:
#   bench/results/aa-8497198/noweir/after.sh > bench/results/aa-8497198/noweir/after.txt
set -eu
dir=$(mktemp -d)
bin/weir serve --node-name after --limits bench/limits.yaml --http-addr 127.0.0.1:18080 \
	--grpc-addr 127.0.0.1:18081 --gossip-addr 127.0.0.1:18946 --peer-addr 127.0.0.1:18082 \
	--advertise-addr 127.0.0.1 >"$dir/weir.log" 2>&1 &
weir=$!
bin/loadgen ceiling -kind http -addr 127.0.0.1:18093 >"$dir/ceiling.log" 2>&1 &
ceil=$!
trap 'kill $weir $ceil; rm -rf "$dir"' EXIT
sleep 2
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
for t in "weir 127.0.0.1:18080 $weir" "ceiling 127.0.0.1:18093 $ceil" "weir 127.0.0.1:18080 $weir" "ceiling 127.0.0.1:18093 $ceil"; do
	set -- $t
	rate=$(bin/loadgen -target weir-http -addrs "$2" -limit bench -keys 100000 -dist uniform \
		-concurrency 64 -duration 3s -warmup 500ms | tail -1 | awk '{ print $5 }')
	prev=$(ticks "$3") line=""
	for _ in $(seq 1 12); do
		sleep 0.25
		now=$(ticks "$3")
		line="$line $((now - prev))"
		prev=$now
	done
	echo "$1: $rate decisions/s; ticks in each 250 ms after:$line"
done
