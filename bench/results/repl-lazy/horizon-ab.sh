#!/usr/bin/env bash
# Is the owners' flush slower because of the replica log's horizon?
# Alternates PAIRS profiles (profile.sh, bench-debt, uniform keys, 64
# callers) of the node built at REV as it is and with logHorizon an hour
# (the log's behaviour before 0f1d55b), and prints, for each, the cell's
# decisions/s and the three nodes' seconds in the owner's flush, its
# bucket snapshots and the successor's settling. Run from the repository
# root after make build; about 75 s a profile:
#   bench/results/repl-lazy/horizon-ab.sh OUT [REV] [PAIRS]
set -eu
out=$1 rev=${2:-HEAD} pairs=${3:-3}
mkdir -p "$out"
wt=$(mktemp -d)
git worktree add -q --detach "$wt" "$rev"
(cd "$wt" && CGO_ENABLED=0 go build -trimpath -o "$out/weir-2s" ./cmd/weir &&
	sed -i 's/^const logHorizon = 2 \* time.Second$/const logHorizon = time.Hour/' node/cluster/replicalog.go &&
	grep -q '^const logHorizon = time.Hour$' node/cluster/replicalog.go &&
	CGO_ENABLED=0 go build -trimpath -o "$out/weir-1h" ./cmd/weir)
git worktree remove --force "$wt"
for i in $(seq 1 "$pairs"); do for h in 2s 1h; do
	o=$out/$h-$i
	bench/results/repl-lazy/profile.sh "$o" weir3-client bench-debt uniform "$out/weir-$h"
	go tool pprof -top -cum -nodecount=3000 "$out/weir-$h" "$o"/cpu-*.pprof 2>/dev/null >"$o/top.txt"
	printf '%s run %s: %.0f decisions/s; ' "$h" "$i" "$(tail -n +2 "$o/cell/bench.csv" | cut -d, -f8)"
	grep -E 'Cluster\).flush$|Engine\).SnapshotBucket$|replicaLog\).settle$' "$o/top.txt" |
		awk '{ n = $6; sub(/.*\)\./, "", n); printf "%s %s; ", n, $4 }'
	grep -m1 -o 'Total samples = [0-9.]*s' "$o/top.txt"
done; done | tee "$out/summary.txt"
