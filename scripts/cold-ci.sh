#!/usr/bin/env bash
# scripts/cold-ci.sh REV OUT: what CI costs on a machine that has never
# built Weir. It runs .ci/run (CI=true) in a fresh clone of this repository
# at REV with Go's build cache and golangci-lint's cache empty (the module
# cache and the Debian packages stay: downloading them is not CI's work),
# and writes its output to OUT with each line prefixed by the seconds since
# the start, and "rc=N secs=S" last. Root, as .ci/run is.
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 REV OUT" >&2; exit 2; }
rev=$1
out=$(realpath -m "$2")
repo=$(git rev-parse --show-toplevel)
work=$(mktemp -d /tmp/weir-cold-ci.XXXX)
trap 'rm -rf "$work"' EXIT
git clone -q "$repo" "$work/weir"
git -C "$work/weir" checkout -q "$rev"
export GOCACHE=$work/gocache GOLANGCI_LINT_CACHE=$work/lintcache
start=$(date +%s)
set +e
(cd "$work/weir" && env CI=true bash .ci/run 2>&1) | while IFS= read -r l; do
	echo "$(($(date +%s) - start)) $l"
done >"$out"
rc=${PIPESTATUS[0]}
echo "rc=$rc secs=$(($(date +%s) - start))" >>"$out"
exit "$rc"
