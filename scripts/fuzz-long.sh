#!/usr/bin/env bash
# fuzz-long.sh runs every fuzz target of the module for FUZZTIME each; it is
# what `make fuzz-long` runs.
#
#   FUZZTIME     how long each target runs (default 10m)
#   FUZZJOBS     how many targets run at once (default 1)
#   FUZZWORKERS  fuzzing workers per target, go test -parallel (default: cores)
#   FUZZLOG      directory for one log per target (default: a new temp dir)
#
# On two cores, FUZZJOBS=2 FUZZWORKERS=1 halves the wall time of the campaign
# at the same CPU time per target. New corpus entries stay in the build cache;
# a crasher is written to the package's testdata/fuzz and fails the run. A
# nonzero exit that wrote no crasher is Go's fuzz-coordinator deadline race
# (golang/go#75804, fixed in Go 1.27): reported, not fatal. The last line
# prints one summary row per target: package, target, execs, new corpus
# entries, result.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

export FUZZTIME=${FUZZTIME:-10m}
jobs=${FUZZJOBS:-1}
export FUZZWORKERS=${FUZZWORKERS:-$(nproc)}
export FUZZLOG=${FUZZLOG:-$(mktemp -d -t weir-fuzz.XXXXXX)}
export GO=${GO:-go}
mkdir -p "$FUZZLOG"

# targets prints "package dir target" for every Fuzz function.
targets() {
	local pkg dir fn
	for pkg in $("$GO" list ./...); do
		dir=$("$GO" list -f '{{.Dir}}' "$pkg")
		for fn in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u); do
			echo "$pkg $dir $fn"
		done
	done
}

# one fuzzes one target and prints its summary row.
one() {
	local pkg=$1 dir=$2 fn=$3 before log result last execs interesting
	log="$FUZZLOG/$(echo "$pkg" | tr / _).$fn.log"
	before=$(find "$dir/testdata/fuzz/$fn" -type f 2>/dev/null | wc -l)
	result=ok
	if ! "$GO" test -run '^$' -fuzz "^$fn\$" -fuzztime "$FUZZTIME" -parallel "$FUZZWORKERS" -timeout 0 "$pkg" >"$log" 2>&1; then
		if [ "$(find "$dir/testdata/fuzz/$fn" -type f 2>/dev/null | wc -l)" -gt "$before" ]; then
			result="CRASHER (new input in $dir/testdata/fuzz/$fn)"
		else
			result="deadline race, no crasher (golang/go#75804)"
		fi
	fi
	last=$(grep -E '^fuzz: elapsed: .*execs: ' "$log" | tail -1 || true)
	execs=$(echo "$last" | sed -nE 's/.*execs: ([0-9]+).*/\1/p')
	interesting=$(echo "$last" | sed -nE 's/.*new interesting: ([0-9]+ \(total: [0-9]+\)).*/\1/p')
	echo "| ${pkg#github.com/weir-rl/weir/} | $fn | ${execs:-?} | ${interesting:-?} | $result |"
}
export -f one

echo "fuzz-long: FUZZTIME=$FUZZTIME FUZZJOBS=$jobs FUZZWORKERS=$FUZZWORKERS, logs in $FUZZLOG" >&2
echo "| package | target | execs | new interesting (total corpus) | result |"
echo "| --- | --- | ---: | ---: | --- |"
targets | xargs -P "$jobs" -L 1 bash -c 'one "$@"' _ | tee "$FUZZLOG/summary.md"
! grep -q CRASHER "$FUZZLOG/summary.md"
