#!/usr/bin/env bash
# Cluster benchmark: a 3-node Weir cluster on loopback beside one node, in
# one run. Takes (hot key and 10000 keys) and lease round trips
# (Acquire+Release) at each concurrency, callers spread round robin over the
# three nodes; the cost of one forward (the hot key asked at its owner and
# at a non-owner, one caller); forwarded batch sizes from each node's
# /metrics. Prints markdown tables. See bench/README.md.
#
# Usage: bench/cluster.sh        (from anywhere; `make bench-cluster` calls it)
# Environment (all optional):
#   DURATION=5s  WARMUP=1s  CONCURRENCY="1 16 64"  KEYS="1 10000"  LEASE_KEYS=1
#   OUT=FILE (keep the raw JSON lines)  BUILD=0 (reuse bin/weir and bin/loadgen)
#   WEIR_ARGS="--replication=false" (extra `weir serve` flags for every node)
# Every port is a random free loopback port. About 2.5 minutes with the
# defaults, after the build.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

DURATION=${DURATION:-5s}
WARMUP=${WARMUP:-1s}
CONCURRENCY=${CONCURRENCY:-1 16 64}
KEYS=${KEYS:-1 10000}
LEASE_KEYS=${LEASE_KEYS:-1}
LIMITS=bench/limits.yaml
HOT=k0 # the key loadgen uses when -keys is 1

NAME=bench/cluster.sh
# shellcheck source=bench/lib.sh
source bench/lib.sh

NODES=(solo n1 n2 n3) # solo: the one-node baseline; n1..n3: the cluster
declare -A http grpc pid
for n in "${NODES[@]}"; do
	for kind in HTTP GRPC GOSSIP PEER; do pick_port "PORT_${n}_${kind}"; done
done

build_bins
# Run copies, so a rebuild of bin/ during the run changes nothing.
cp bin/weir bin/loadgen "$tmp/"
weir=$tmp/weir loadgen=$tmp/loadgen
"$weir" validate "$LIMITS" >&2

# start NAME [JOIN]: one node, every listener on loopback.
start() {
	local n=$1 v
	local args=(serve --node-name "$n" --limits "$LIMITS" --advertise-addr 127.0.0.1 --timing local)
	for v in http grpc gossip peer; do
		local var="PORT_${n}_${v^^}"
		args+=("--$v-addr" "127.0.0.1:${!var}")
	done
	[[ -z ${2:-} ]] || args+=(--join "$2")
	# shellcheck disable=SC2206 # WEIR_ARGS is a list of flags
	[[ -z ${WEIR_ARGS:-} ]] || args+=($WEIR_ARGS)
	"$weir" "${args[@]}" >"$tmp/$n.log" 2>&1 &
	pid[$n]=$!
	pids+=("$!")
	local hp="PORT_${n}_HTTP" gp="PORT_${n}_GRPC"
	http[$n]=127.0.0.1:${!hp}
	grpc[$n]=127.0.0.1:${!gp}
	wait_port "${!gp}" "${pid[$n]}" "$n" "$tmp/$n.log"
	wait_port "${!hp}" "${pid[$n]}" "$n" "$tmp/$n.log"
}
start solo
start n1
start n2 "127.0.0.1:$PORT_n1_GOSSIP"
start n3 "127.0.0.1:$PORT_n1_GOSSIP"

CL_HTTP=${http[n1]},${http[n2]},${http[n3]}
CL_GRPC=${grpc[n1]},${grpc[n2]},${grpc[n3]}
CL_PIDS=${pid[n1]},${pid[n2]},${pid[n3]}
"$loadgen" cluster-wait -addrs "${http[solo]}" -members 1 -timeout 30s >&2
"$loadgen" cluster-wait -addrs "$CL_HTTP" -members 3 -timeout 30s >&2

# The hot key's owner, as every member sees it, and a member that is not.
owner=$("$loadgen" owner -addr "${http[n1]}" -limit bench -key "$HOT")
for n in n2 n3; do
	o=$("$loadgen" owner -addr "${http[$n]}" -limit bench -key "$HOT")
	[[ $o == "$owner" ]] || die "n1 says $owner owns bench/$HOT, $n says $o"
done
[[ -n ${grpc[$owner]:-} && $owner != solo ]] || die "owner $owner is not a cluster member"
for n in n1 n2 n3; do [[ $n == "$owner" ]] || { other=$n; break; }; done

# cpu_ticks PID...: user+system CPU of the processes, summed, in 1/100 s.
cpu_ticks() {
	local t=0 p f
	for p; do
		read -r -a f <"/proc/$p/stat" # the command name, weir, holds no space
		t=$((t + f[13] + f[14]))
	done
	echo "$t"
}
# What the servers burn doing nothing (gossip, timers): it is part of every
# cell's server CPU, and weighs most at 1 caller.
IDLE=${IDLE:-3}
idle_solo=$(cpu_ticks "${pid[solo]}") idle_cl=$(cpu_ticks "${pid[n1]}" "${pid[n2]}" "${pid[n3]}")
sleep "$IDLE"
idle_solo=$((($(cpu_ticks "${pid[solo]}") - idle_solo) * 10 / IDLE))
idle_cl=$((($(cpu_ticks "${pid[n1]}" "${pid[n2]}" "${pid[n3]}") - idle_cl) * 10 / IDLE))

echo "## Machine"
echo
echo "- nproc: $(nproc); CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
echo "- $(go version)"
echo "- load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "- cells: ${DURATION} measured after ${WARMUP} warm-up; take keys: ${KEYS}; lease keys: ${LEASE_KEYS}; limits from ${LIMITS}"
echo "- cluster n1, n2, n3 (3 alive members on every node); owner of bench/$HOT: $owner; non-owner asked: $other"
echo "- idle server CPU over ${IDLE} s (10 ms resolution): 1 node ${idle_solo} ms/s, 3 nodes ${idle_cl} ms/s"
echo

# cell LABEL ADDRS PIDS METRICS ARGS...: one loadgen cell, JSON appended to
# the results, after checking the servers are still up.
cell() {
	local label=$1 addrs=$2 spids=$3 metrics=$4 p
	shift 4
	for p in ${spids//,/ }; do kill -0 "$p" 2>/dev/null || die "server pid $p is gone"; done
	echo "running $label: $*" >&2
	"$loadgen" -addrs "$addrs" -server-pid "$spids" -metrics "$metrics" \
		-duration "$DURATION" -warmup "$WARMUP" -json -label "$label" "$@" >>"$tmp/results.jsonl"
}
solo() { cell "1 node" "${grpc[solo]}" "${pid[solo]}" "${http[solo]}" "$@"; }
trio() { cell "3 nodes" "$CL_GRPC" "$CL_PIDS" "$CL_HTTP" -rotate "$@"; }

# Takes: one node and the cluster interleaved at each concurrency, so a
# change in background load hits both alike.
for k in $KEYS; do
	for c in $CONCURRENCY; do
		solo -target weir-grpc -limit bench -keys "$k" -concurrency "$c"
		trio -target weir-grpc -limit bench -keys "$k" -concurrency "$c"
	done
done
# The cost of one forward: the hot key at its owner, then at a non-owner.
for label in owner non-owner; do
	a=${grpc[$owner]}
	[[ $label == owner ]] || a=${grpc[$other]}
	cell "$label" "$a" "$CL_PIDS" "$CL_HTTP" -target weir-grpc -limit bench -keys 1 -concurrency 1
done
# Lease round trips.
for c in $CONCURRENCY; do
	solo -target weir-lease-grpc -limit bench-lease -keys "$LEASE_KEYS" -concurrency "$c"
	trio -target weir-lease-grpc -limit bench-lease -keys "$LEASE_KEYS" -concurrency "$c"
done

echo "- load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "## 3 nodes against 1 node (takes and lease round trips)"
echo
"$loadgen" report -compare "3 nodes" -to "1 node" "$tmp/results.jsonl"
echo
echo "## The cost of one forward (hot key, 1 caller, owner $owner vs non-owner $other)"
echo
"$loadgen" report -compare non-owner -to owner "$tmp/results.jsonl"
echo
echo "## Every cell"
echo
"$loadgen" report "$tmp/results.jsonl"
if [[ -n ${OUT:-} ]]; then cp "$tmp/results.jsonl" "$OUT"; fi
