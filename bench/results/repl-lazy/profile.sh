#!/usr/bin/env bash
# CPU profiles of the nodes of TARGET (default weir3-client; a one-node
# target such as weir-client profiles the single node, a ceiling such as
# ceiling-http the ceiling's process) in one
# 20 s cell at $CALLERS callers (default 64): 8 s of each node from about the cell's 7th
# second (the cluster settles 6 s and warms up 1 s after its debug
# listeners come up; this waits 14 s from then). Run from the repository
# root after make build:
#   bench/results/repl-lazy/profile.sh OUT [TARGET] [LIMIT] [WORKLOAD] [WEIR]
# then: go tool pprof -top -cum bin/weir OUT/cpu-*.pprof
# WARMUP=12s warms the cell up that long first (whole seconds; default 1s), as
# make bench-repl's warm row does; the profile starts as many seconds later.
# PPROF=trace takes a 3 s execution trace of each node at the same moment
# instead (OUT/trace-PORT.out; read with go tool trace -pprof=sync|sched|net|syscall);
# PPROF=allocs what each node allocated in the same 8 s (OUT/allocs-PORT.pprof;
# read with go tool pprof -sample_index=alloc_objects or alloc_space).
set -u
case ${PPROF:-profile} in
profile) endpoint='profile?seconds=8' file=cpu ext=pprof ;;
trace) endpoint='trace?seconds=3' file=trace ext=out ;;
allocs) endpoint='allocs?seconds=8' file=allocs ext=pprof ;;
*) echo "PPROF=$PPROF: want profile, trace or allocs" >&2; exit 2 ;;
esac
warm=${WARMUP:-1s}
[[ $warm =~ ^[0-9]+s$ ]] || { echo "WARMUP=$warm: want whole seconds, such as 12s" >&2; exit 2; }
out=$1 target=${2:-weir3-client} limit=${3:-bench-debt} wl=${4:-uniform} weir=${5:-bin/weir}
pat='weir-n[123]-*.log' nodes=3
case $target in
*norepl*) pat='weir-r[123]-*.log' ;;
weir3-*) ;;
weir-*) pat='weir-solo-*.log' nodes=1 ;;
ceiling-*) pat="$target-*.log" nodes=1 ;;
esac
rm -rf /tmp/weir-bench-* "$out"
mkdir -p "$out"
WEIR_DEBUG_ADDR=127.0.0.1:0 bin/loadgen suite -weir "$weir" -limit "$limit" -targets "$target" \
	-workloads "$wl" -callers "${CALLERS:-64}" -seconds 20 -warmup "$warm" -out "$out/cell" >"$out/suite.log" 2>&1 &
suite=$!
for _ in $(seq 1 240); do
	[ "$(grep -l 'debug listener' /tmp/weir-bench-*/$pat 2>/dev/null | wc -l)" -ge "$nodes" ] && break
	sleep 0.5
done
sleep $((14 + ${warm%s} - 1))
for a in $(grep -h 'debug listener' /tmp/weir-bench-*/$pat | grep -o 'addr=[0-9.:]*' | cut -d= -f2); do
	curl -s -o "$out/$file-${a##*:}.$ext" "http://$a/debug/pprof/$endpoint" &
done
wait "$suite"
wait
