#!/usr/bin/env bash
# Does a node's process keep working into the next target's turn? Starts
# bin/weir (as make bench starts its node, on loopback) and an HTTP ceiling,
# drives each with 64 HTTP callers on uniform keys for 3 s, twice, and
# prints the server's CPU ticks (1/100 s, /proc/PID/stat utime + stime) in
# each 250 ms of the 3 s after the load ends. From the repository root:
#   bench/results/aa-8497198/noweir/after.sh > bench/results/aa-8497198/noweir/after.txt
set -euo pipefail
NAME=after.sh
# shellcheck source=bench/lib.sh
source bench/lib.sh
pick_port WEIR_HTTP_PORT
pick_port WEIR_GRPC_PORT
pick_port WEIR_GOSSIP_PORT
pick_port WEIR_PEER_PORT
pick_port CEILING_PORT
bin/weir serve --node-name after --limits bench/limits.yaml --http-addr "127.0.0.1:$WEIR_HTTP_PORT" \
	--grpc-addr "127.0.0.1:$WEIR_GRPC_PORT" --gossip-addr "127.0.0.1:$WEIR_GOSSIP_PORT" \
	--peer-addr "127.0.0.1:$WEIR_PEER_PORT" --advertise-addr 127.0.0.1 >"$tmp/weir.log" 2>&1 &
weir=$!
pids+=("$weir")
bin/loadgen ceiling -kind http -addr "127.0.0.1:$CEILING_PORT" >"$tmp/ceiling.log" 2>&1 &
ceil=$!
pids+=("$ceil")
wait_port "$WEIR_HTTP_PORT" "$weir" weir "$tmp/weir.log"
wait_port "$CEILING_PORT" "$ceil" ceiling "$tmp/ceiling.log"
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
for t in "weir $WEIR_HTTP_PORT $weir" "ceiling $CEILING_PORT $ceil" "weir $WEIR_HTTP_PORT $weir" "ceiling $CEILING_PORT $ceil"; do
	read -r name port pid <<<"$t"
	rate=$(bin/loadgen -target weir-http -addrs "127.0.0.1:$port" -limit bench -keys 100000 -dist uniform \
		-concurrency 64 -duration 3s -warmup 500ms | tail -1 | awk '{ print $5 }')
	prev=$(ticks "$pid") line=""
	for _ in $(seq 1 12); do
		sleep 0.25 # the sampling interval, not a wait for a condition
		now=$(ticks "$pid")
		line="$line $((now - prev))"
		prev=$now
	done
	echo "$name: $rate decisions/s; ticks in each 250 ms after:$line"
done
