#!/usr/bin/env bash
# Replication's worst case (every key in debt, uniform keys, 64 callers)
# before and after the successor's lazy merge: the node of BASE (default
# 146dfd8, merge and decode on arrival) and of HEAD, alternated RUNS times
# (default 4), each run weir3-client beside weir3-client-norepl.
# Run from the repository root: bench/results/repl-lazy/run.sh [OUT]
set -euo pipefail
out=${1:-bench/results/repl-lazy}
base=${BASE:-146dfd8}
tmp=$(mktemp -d)
trap 'git worktree remove --force "$tmp/base" 2>/dev/null; rm -rf "$tmp"' EXIT
go build -o bin/loadgen ./bench/loadgen
stamp() { echo "-X main.version=$(git describe --always --dirty) -X main.commit=$(git rev-parse HEAD)"; }
CGO_ENABLED=0 go build -trimpath -ldflags "$(stamp)" -o "$tmp/weir-head" ./cmd/weir
git worktree add -q --detach "$tmp/base" "$base"
(cd "$tmp/base" && CGO_ENABLED=0 go build -trimpath -ldflags "$(stamp)" -o "$tmp/weir-base" ./cmd/weir)
for r in $(seq 1 "${RUNS:-4}"); do
	for v in base head; do
		bin/loadgen suite -weir "$tmp/weir-$v" -limit bench-debt -targets weir3-client,weir3-client-norepl \
			-workloads uniform -callers 64 -seconds 5 -out "$out/$v/run-$r" >/dev/null
	done
done
for v in base head; do
	echo "## $v"
	bin/loadgen spread "$out/$v"/run-*/bench.csv | tail -n +3
done | tee "$out/spread.md"
