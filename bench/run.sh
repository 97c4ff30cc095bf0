#!/usr/bin/env bash
# Whole-system benchmark: one Weir node and one redis-server on loopback,
# driven by bench/loadgen over weir-grpc, weir-http and redis-lua at each
# concurrency, in one run; prints the machine and markdown tables with the
# Weir/Redis ratios. See bench/README.md.
#
# Usage: bench/run.sh            (from anywhere; `make bench-load` calls it)
# Environment (all optional):
#   DURATION=5s  WARMUP=1s  CONCURRENCY="1 16 64"  KEYS=1  LIMIT=bench
#   WEIR_HTTP_PORT, WEIR_GRPC_PORT, WEIR_GOSSIP_PORT, WEIR_PEER_PORT, REDIS_PORT
#     (default: random free loopback ports)
#   REDIS_SERVER=redis-server  OUT=FILE (keep the raw JSON lines)
#   BUILD=0 (reuse bin/weir and bin/loadgen instead of building them)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

DURATION=${DURATION:-5s}
WARMUP=${WARMUP:-1s}
CONCURRENCY=${CONCURRENCY:-1 16 64}
KEYS=${KEYS:-1}
LIMIT=${LIMIT:-bench}
REDIS_SERVER=${REDIS_SERVER:-redis-server}
LIMITS=bench/limits.yaml
TARGETS=(weir-grpc weir-http redis-lua)

NAME=bench/run.sh
# shellcheck source=bench/lib.sh
source bench/lib.sh

command -v "$REDIS_SERVER" >/dev/null || die "$REDIS_SERVER not found (apt-get install redis-server)"
pick_port WEIR_HTTP_PORT
pick_port WEIR_GRPC_PORT
pick_port REDIS_PORT
pick_port WEIR_GOSSIP_PORT
pick_port WEIR_PEER_PORT

build_bins
bin/weir validate "$LIMITS" >&2

# A cluster of one, as deployed (gossip and the peer service on), all on
# loopback so nothing clashes with a node already on the default ports.
bin/weir serve --node-name bench --limits "$LIMITS" \
	--http-addr "127.0.0.1:$WEIR_HTTP_PORT" --grpc-addr "127.0.0.1:$WEIR_GRPC_PORT" \
	--gossip-addr "127.0.0.1:$WEIR_GOSSIP_PORT" --peer-addr "127.0.0.1:$WEIR_PEER_PORT" \
	--advertise-addr 127.0.0.1 \
	>"$tmp/weir.log" 2>&1 &
weir_pid=$!
pids+=("$weir_pid")
wait_port "$WEIR_GRPC_PORT" "$weir_pid" weir "$tmp/weir.log"
wait_port "$WEIR_HTTP_PORT" "$weir_pid" weir "$tmp/weir.log"

"$REDIS_SERVER" --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no \
	>"$tmp/redis.log" 2>&1 &
redis_pid=$!
pids+=("$redis_pid")
wait_port "$REDIS_PORT" "$redis_pid" redis-server "$tmp/redis.log"

echo "## Machine"
echo
echo "- nproc: $(nproc); CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
echo "- $(go version); $("$REDIS_SERVER" --version)"
echo "- load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "- cells: ${DURATION} measured after ${WARMUP} warm-up; keys=${KEYS}; limit=${LIMIT} from ${LIMITS}"
echo

# Interleave the targets at each concurrency so a change in background load
# during the run hits all three alike.
for c in $CONCURRENCY; do
	for t in "${TARGETS[@]}"; do
		case $t in
		weir-grpc) addr=127.0.0.1:$WEIR_GRPC_PORT pid=$weir_pid ;;
		weir-http) addr=127.0.0.1:$WEIR_HTTP_PORT pid=$weir_pid ;;
		redis-lua) addr=127.0.0.1:$REDIS_PORT pid=$redis_pid ;;
		esac
		kill -0 "$pid" 2>/dev/null || die "the $t server (pid $pid) is gone"
		echo "running $t at concurrency $c" >&2
		bin/loadgen -target "$t" -addrs "$addr" -concurrency "$c" -duration "$DURATION" \
			-warmup "$WARMUP" -keys "$KEYS" -limit "$LIMIT" -limits "$LIMITS" \
			-server-pid "$pid" -json >>"$tmp/results.jsonl"
	done
done

echo "- load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "## Results"
echo
bin/loadgen report "$tmp/results.jsonl"
if [[ -n ${OUT:-} ]]; then cp "$tmp/results.jsonl" "$OUT"; fi
