#!/usr/bin/env bash
# Where a live node's CPU goes: starts one `weir serve` on loopback, drives
# it with bench/loadgen (one target, one number of callers, one hot key),
# records the node process with `perf record -g` during the measured phase,
# and prints the top symbols by self time and the self time grouped by
# package (kernel, Go runtime, net/http, gRPC, protobuf, Weir, other). See
# bench/README.md, "Where the time goes".
#
# Usage: bench/profile.sh [TARGET ...]     (default: weir-http weir-grpc)
# Environment (all optional):
#   CALLERS=64  SECONDS_=8 (measured seconds)  FREQ=999 (perf samples/s)
#   TOP=25  OUT=DIR (keep perf.data and the reports there)
#   BUILD=0 (reuse bin/weir and bin/loadgen instead of building them)
# Needs perf (apt-get install linux-perf) and permission to profile the
# node (root, or kernel.perf_event_paranoid <= 1).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

CALLERS=${CALLERS:-64}
SECONDS_=${SECONDS_:-8}
FREQ=${FREQ:-999}
TOP=${TOP:-25}
LIMITS=bench/limits.yaml
targets=("$@")
((${#targets[@]})) || targets=(weir-http weir-grpc)

NAME=bench/profile.sh
# shellcheck source=bench/lib.sh
source bench/lib.sh
out=${OUT:-$tmp}
mkdir -p "$out"

command -v perf >/dev/null || die "perf not found (apt-get install linux-perf)"
pick_port WEIR_HTTP_PORT
pick_port WEIR_GRPC_PORT
pick_port WEIR_GOSSIP_PORT
pick_port WEIR_PEER_PORT
build_bins

bin/weir serve --node-name profile --limits "$LIMITS" \
	--http-addr "127.0.0.1:$WEIR_HTTP_PORT" --grpc-addr "127.0.0.1:$WEIR_GRPC_PORT" \
	--gossip-addr "127.0.0.1:$WEIR_GOSSIP_PORT" --peer-addr "127.0.0.1:$WEIR_PEER_PORT" \
	--advertise-addr 127.0.0.1 >"$tmp/weir.log" 2>&1 &
weir_pid=$!
pids+=("$weir_pid")
wait_port "$WEIR_GRPC_PORT" "$weir_pid" weir "$tmp/weir.log"
wait_port "$WEIR_HTTP_PORT" "$weir_pid" weir "$tmp/weir.log"

# group_self reads `perf report --sort dso,sym` lines (percent, dso, [k|.],
# symbol) and sums the self time per package group.
group_self() {
	awk '
	/^ *[0-9.]+%/ {
		pct = $1; sub("%", "", pct)
		line = $0
		if (line ~ /\[k\]/) { g = "kernel (syscalls, TCP loopback, scheduler)" }
		else {
			sym = line; sub(/^.*\[\.\] */, "", sym)
			if (sym ~ /^github\.com\/weir-rl\/weir\//) g = "weir (github.com/weir-rl/weir/...)"
			else if (sym ~ /^google\.golang\.org\/grpc/) g = "gRPC (google.golang.org/grpc)"
			else if (sym ~ /^google\.golang\.org\/protobuf/) g = "protobuf"
			else if (sym ~ /^golang\.org\/x\/net\/http2/ || sym ~ /^net\/http\.http2/) g = "HTTP/2 framing (x/net/http2)"
			else if (sym ~ /^net\/http/) g = "net/http"
			else if (sym ~ /^(runtime|internal\/runtime|gcWriteBarrier|aeshash|memeqbody|indexbyte|cmpbody)/) g = "Go runtime (scheduler, GC, malloc, maps)"
			else if (sym ~ /^(syscall|internal\/poll|net\.|internal\/syscall)/) g = "syscall wrappers, netpoll (Go side)"
			else if (sym ~ /^github\.com\/prometheus/) g = "prometheus client"
			else g = "other Go (bufio, sync, strconv, encoding, time, ...)"
		}
		sum[g] += pct
	}
	END { for (g in sum) printf "| %s | %.1f %% |\n", g, sum[g] }' | sort -t'|' -k3 -rn
}

for t in "${targets[@]}"; do
	case $t in
	weir-http) addr=127.0.0.1:$WEIR_HTTP_PORT ;;
	weir-grpc) addr=127.0.0.1:$WEIR_GRPC_PORT ;;
	*) die "target $t: want weir-http or weir-grpc" ;;
	esac
	echo "== $t, $CALLERS callers, 1 hot key: perf record -F $FREQ -g -p $weir_pid for ${SECONDS_} s" >&2
	bin/loadgen -target "$t" -addrs "$addr" -concurrency "$CALLERS" -warmup 1s \
		-duration "$((SECONDS_ + 2))s" -server-pid "$weir_pid" >"$out/$t.loadgen.txt" &
	lg=$!
	pids+=("$lg")
	sleep 1.5
	perf record -q -F "$FREQ" -g -p "$weir_pid" -o "$out/$t.perf.data" -- sleep "$SECONDS_" 2>/dev/null
	wait "$lg"
	echo "### $t, $CALLERS callers (node process, self time)"
	echo
	echo '```'
	cat "$out/$t.loadgen.txt"
	echo '```'
	echo
	echo "| package group | self time |"
	echo "| --- | ---: |"
	perf report -i "$out/$t.perf.data" --no-children --sort dso,sym --stdio 2>/dev/null | group_self
	echo
	echo "Top $TOP symbols by self time:"
	echo
	echo '```'
	perf report -i "$out/$t.perf.data" --no-children --sort sym --stdio 2>/dev/null |
		grep -E '^ *[0-9.]+%' | head -n "$TOP" || true
	echo '```'
	echo
	echo "Weir's own code, inclusive (children) time:"
	echo
	echo '```'
	perf report -i "$out/$t.perf.data" --children --sort sym --stdio 2>/dev/null |
		grep -E '^ *[0-9.]+% +[0-9.]+%.*github\.com/weir-rl/weir/' | head -n 12 || true
	echo '```'
	echo
done
