#!/bin/sh
# build-ref.sh REF OUT: builds weir as of the git ref REF (make build in a
# temporary git worktree, so the checkout here is untouched) and copies the
# binary to OUT. Used by make jepsen-upgrade for the older release.
set -eu
ref=${1:?usage: build-ref.sh REF OUT}
out=${2:?usage: build-ref.sh REF OUT}
tmp=$(mktemp -d)
cleanup() {
	git worktree remove --force "$tmp/src" 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT
git worktree add --quiet --detach "$tmp/src" "$ref"
make --no-print-directory -C "$tmp/src" build
cp "$tmp/src/bin/weir" "$out"
echo "build-ref: $ref -> $out ($("$out" version))"
