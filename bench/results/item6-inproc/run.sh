#!/usr/bin/env bash
# Issue 19 item 6's two fronts against their ceilings in one process, on
# uniform keys at 16 callers: node's BenchmarkHTTPServeVsCeiling and
# BenchmarkGRPCServeVsCeiling serve the same takes from a started node's
# public server and from the empty server make bench divides by (package
# ceiling), behind one client, so neither a second process's scheduling
# nor the machine's drift between cells enters the ratio.
#
# 1. N (default 10) interleaved runs of each target, a process per run:
#    bench.txt, benchstat.txt, pairs.txt (ceiling ÷ weir of the process's
#    CPU per take, and of the wall time per take, pair by pair, sorted).
# 2. cachegrind (valgrind, this machine's caches: 32 KiB L1i, 48 KiB L1d,
#    1 MiB L2 as the last level) of each target at OPS and 2×OPS takes;
#    the difference, divided by OPS, is one take without the start-up:
#    instructions (Ir), L1 instruction misses (I1mr), L1 data misses
#    (D1mr) and L2 misses (ILmr + DLmr), by where the code lives
#    (cachegrind.txt; per-function lists of Weir's code in weir-*.txt).
#    Counts, not seconds: the same whatever else the machine does, except
#    where the runtime spins or the scheduler's choices differ.
#
# Needs benchstat and valgrind on PATH. From the repository root:
#   bench/results/item6-inproc/run.sh OUT
set -eu
out=$(realpath -m "$1")
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bin=$tmp/node.test
go test -c -o "$bin" ./node
benches="HTTPServeVsCeiling GRPCServeVsCeiling"

# pairs FILE BENCH: ceiling ÷ weir of each interleaved pair of BENCH.
pairs() {
	for col in 5:cpu 3:rate; do
		printf '%s %s:' "$2" "${col#*:}"
		awk -v f="${col%:*}" -v b="$2" '$0 ~ b"/target=ceiling" { c = $f } $0 ~ b"/target=weir" { printf " %.3f\n", c / $f }' "$1" | sort -n | tr -d '\n'
		echo
	done
}

cd node # the benchmark's node reads ../bench/limits.yaml
for _ in $(seq 1 "${N:-10}"); do
	for b in $benches; do
		for t in ceiling weir; do
			"$bin" -test.run '^$' -test.bench "$b/target=$t\$" -test.benchtime 100000x | grep '^Benchmark'
		done
	done
done >"$out/bench.txt"
benchstat -col /target "$out/bench.txt" >"$out/benchstat.txt"
for b in $benches; do pairs "$out/bench.txt" "$b"; done >"$out/pairs.txt"

ops=${OPS:-20000}
for b in $benches; do
	for t in ceiling weir; do
		for n in "$ops" $((2 * ops)); do
			valgrind --tool=cachegrind --cache-sim=yes --I1=32768,8,64 --D1=49152,12,64 --LL=1048576,16,64 \
				--cachegrind-out-file="$tmp/$b-$t-$n.cg" "$bin" -test.run '^$' -test.bench "$b/target=$t\$" \
				-test.benchtime "${n}x" >/dev/null 2>&1
			cg_annotate --show=Ir,I1mr,ILmr,D1mr,DLmr --show-percs=no --threshold=0 --auto=no "$tmp/$b-$t-$n.cg" |
				awk 'NF == 6 && $6 ~ /:/ { for (i = 1; i <= 5; i++) gsub(",", "", $i); print }' >"$tmp/$b-$t-$n.txt"
		done
	done
done
cd ..
# per take, by where the code lives (group): the 2×OPS run minus the OPS
# run, over OPS. weir is Weir's server code (api/weirv1's generated stubs
# count with gRPC); bench-client the benchmark's own caller; runtime
# includes the collector and the scheduler, whose instruction counts
# under valgrind's one-thread-at-a-time scheduling include spinning (read
# its misses, not its instructions).
{
	printf '%-22s %-8s %-12s %9s %8s %8s %8s\n' benchmark target group Ir I1mr D1mr L2miss
	for b in $benches; do
		for t in ceiling weir; do
			awk -v ops="$ops" -v b="$b" -v t="$t" '
				function group(f) {
					if (f ~ /weir-rl\/weir\/(node_test|internal\/apitest)/) return "bench-client"
					if (f ~ /weir-rl\/weir\/internal\/ceiling/) return "ceiling"
					if (f ~ /weir-rl\/weir\/api\/weirv1|google\.golang\.org|golang\.org\/x\/net/) return "grpc+proto"
					if (f ~ /weir-rl\/weir\//) return "weir"
					if (f ~ /\/net\/http\/|\/net\/textproto\/|\/bufio\/|\/net\/url\//) return "net/http"
					if (f ~ /\/runtime\/|internal\/runtime|\/sync\//) return "runtime"
					return "other"
				}
				FNR == 1 { run++ }
				{ g = group($6); s = (run == 1 ? -1 : 1)
				  ir[g] += s * $1; i1[g] += s * $2; d1[g] += s * $4; l2[g] += s * ($3 + $5)
				  IR += s * $1; I1 += s * $2; D1 += s * $4; L2 += s * ($3 + $5) }
				END {
					for (g in ir) printf "%-22s %-8s %-12s %9.0f %8.1f %8.1f %8.1f\n", b, t, g, ir[g] / ops, i1[g] / ops, d1[g] / ops, l2[g] / ops
					printf "%-22s %-8s %-12s %9.0f %8.1f %8.1f %8.1f\n", b, t, "ALL", IR / ops, I1 / ops, D1 / ops, L2 / ops
				}' "$tmp/$b-$t-$ops.txt" "$tmp/$b-$t-$((2 * ops)).txt" | sort -k3
		done
	done
} >"$out/cachegrind.txt"
# Weir's own functions per take in the weir runs, most L1 instruction misses first.
for b in $benches; do
	awk -v ops="$ops" 'FNR == 1 { run++ } $6 ~ /weir-rl\/weir\// && $6 !~ /node_test|apitest|weirv1/ {
			s = (run == 1 ? -1 : 1); ir[$6] += s * $1; i1[$6] += s * $2 }
		END { for (f in ir) { n = split(f, p, ":"); printf "%8.1f %7.1f  %s\n", ir[f] / ops, i1[f] / ops, p[n] } }' \
		"$tmp/$b-weir-$ops.txt" "$tmp/$b-weir-$((2 * ops)).txt" | sort -k2 -nr >"$out/weir-$b.txt"
done
