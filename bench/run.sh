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

tmp=$(mktemp -d)
pids=()
cleanup() {
	local rc=$? p f
	if ((rc != 0)); then
		for f in "$tmp"/*.log; do
			[[ -e $f ]] || continue
			echo "--- last lines of $(basename "$f"):" >&2
			tail -n 20 "$f" >&2
		done
	fi
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

die() { echo "bench/run.sh: $*" >&2; exit 1; }

# port_open PORT: true when something accepts connections on 127.0.0.1:PORT.
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# wait_port PORT PID NAME LOG: wait up to 10 s for PORT to accept, failing
# early when the process PID has exited.
wait_port() {
	local deadline=$((SECONDS + 10))
	until port_open "$1"; do
		kill -0 "$2" 2>/dev/null || { cat "$4" >&2; die "$3 exited before listening on $1"; }
		((SECONDS < deadline)) || { cat "$4" >&2; die "$3 not listening on $1 after 10 s"; }
		sleep 0.05
	done
}

# pick_port VAR: unless VAR is set, set it to a random loopback port that
# nothing listens on and no other VAR holds. (A process may still take it
# before ours binds; the server then exits and wait_port says so.)
taken=" "
pick_port() {
	local p i
	if [[ -n ${!1:-} ]]; then
		! port_open "${!1}" || die "$1=${!1} is already in use"
		taken+="${!1} "
		return
	fi
	for i in {1..100}; do
		p=$((20000 + RANDOM % 40000))
		if [[ $taken != *" $p "* ]] && ! port_open "$p"; then
			printf -v "$1" %s "$p"
			taken+="$p "
			return
		fi
	done
	die "no free port found for $1"
}

command -v "$REDIS_SERVER" >/dev/null || die "$REDIS_SERVER not found (apt-get install redis-server)"
pick_port WEIR_HTTP_PORT
pick_port WEIR_GRPC_PORT
pick_port REDIS_PORT
pick_port WEIR_GOSSIP_PORT
pick_port WEIR_PEER_PORT

if [[ ${BUILD:-1} != 0 ]]; then
	echo "building bin/weir and bin/loadgen" >&2
	mkdir -p bin
	CGO_ENABLED=0 go build -o bin/weir ./cmd/weir
	CGO_ENABLED=0 go build -o bin/loadgen ./bench/loadgen
fi
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
