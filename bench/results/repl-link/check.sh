#!/bin/bash
# That replication as built sends what it should under the worst cell's
# load: three nodes of BIN (replication on), 64 gRPC callers spread over
# them taking bench-debt on uniform keys for SECONDS, then each node's
# replication counters (entries sent, batches not acknowledged, bytes,
# replica entries held) and its peer protocol version.
#
# usage: check.sh BIN [SECONDS]   (from the repository root; prints the counters)
set -eu
bin=$1
secs=${2:-8}
dir=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; wait 2>/dev/null; rm -rf "$dir"' EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
join=""
for i in 1 2 3; do
	h[$i]=127.0.0.1:$(port); g[$i]=127.0.0.1:$(port); s=127.0.0.1:$(port); p=127.0.0.1:$(port)
	"$bin" serve --node-name "c$i" --limits bench/limits.yaml --http-addr "${h[$i]}" --grpc-addr "${g[$i]}" \
		--gossip-addr "$s" --peer-addr "$p" --advertise-addr 127.0.0.1 $join >"$dir/c$i.log" 2>&1 &
	pids+=($!)
	[ -z "$join" ] && join="--join $s"
	sleep 0.3 # the seed's gossip port must be listening before the others join
done
bin/loadgen cluster-wait -addrs "${h[1]},${h[2]},${h[3]}" -members 3 -timeout 30s
bin/loadgen -target weir-grpc -addrs "${g[1]},${g[2]},${g[3]}" -limit bench-debt -keys 100000 \
	-concurrency 64 -duration "${secs}s" | tail -n 3
sleep 1 # a last flush: the replication interval is 20 ms
for i in 1 2 3; do
	echo "c$i:"
	curl -s "http://${h[$i]}/metrics" | grep -E '^weir_(replication_(sent_entries|errors|sent_bytes)|replica_entries|peer_protocol_version)' | sed 's/^/  /'
done
