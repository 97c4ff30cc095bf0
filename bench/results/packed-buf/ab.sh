#!/usr/bin/env bash
# Replication's worst cell (bench-debt, uniform keys, 64 callers, replication
# on and off in 4 rounds), RUNS times each with two weir binaries, alternated:
#   bench/results/packed-buf/ab.sh BASE_BIN NEW_BIN [RUNS]
set -eu
base=$1 new=$2 runs=${3:-3} out=bench/results/packed-buf
for r in $(seq 1 "$runs"); do
	for v in base new; do
		bin=$base; [ $v = new ] && bin=$new
		bin/loadgen suite -weir "$bin" -limit bench-debt -targets weir3-client,weir3-client-norepl \
			-workloads uniform -callers 64 -seconds 8 -rounds 4 -warmup 1s -out "$out/$v-$r" >/dev/null
	done
done
for v in base new; do bin/loadgen spread "$out"/$v-*/bench.csv > "$out/$v-spread.md"; done
tail -n 1 "$out"/base-spread.md "$out"/new-spread.md
