#!/usr/bin/env bash
# Where weir-http's distance to its ceiling goes: the node as built, the
# node without net/http's read, write and idle timeouts (no-timeouts.patch,
# a diagnostic build, never a release), and each with --legacy-headers=false.
# Two runs of the four variants, alternated; run from the repository root on
# a clean tree: bench/results/http-gap/run.sh [OUT]
set -euo pipefail
out=${1:-bench/results/http-gap}
tmp=$(mktemp -d)
trap 'git checkout -q node/listeners.go; rm -rf "$tmp"' EXIT
go build -o bin/loadgen ./bench/loadgen
CGO_ENABLED=0 go build -trimpath -o "$tmp/weir-built" ./cmd/weir
git apply bench/results/http-gap/no-timeouts.patch
CGO_ENABLED=0 go build -trimpath -o "$tmp/weir-notimeouts" ./cmd/weir
git checkout -q node/listeners.go
for v in built notimeouts; do
	for lg in on off; do
		flag=""
		[ "$lg" = off ] && flag="--legacy-headers=false"
		printf '#!/bin/sh\nif [ "$1" = serve ]; then exec %s "$@" %s; fi\nexec %s "$@"\n' \
			"$tmp/weir-$v" "$flag" "$tmp/weir-$v" >"$tmp/$v-legacy-$lg"
		chmod +x "$tmp/$v-legacy-$lg"
	done
done
for r in 1 2; do
	for v in built-legacy-on notimeouts-legacy-on built-legacy-off notimeouts-legacy-off; do
		bin/loadgen suite -weir "$tmp/$v" -targets ceiling-http,weir-http -workloads hot,uniform \
			-callers 16,64 -seconds 5 -out "$out/$v/run-$r" >/dev/null
	done
done
for v in built-legacy-on notimeouts-legacy-on built-legacy-off notimeouts-legacy-off; do
	echo "## $v"
	bin/loadgen spread "$out/$v"/run-*/bench.csv | tail -n +3
done | tee "$out/spread.md"
