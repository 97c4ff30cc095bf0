#!/usr/bin/env bash
# bench/gubernator.sh OUT: build Gubernator v2's server command into OUT
# (bin/gubernator from `make gubernator`), for `make bench`'s gubernator3-*
# targets. It writes OUT.version, one line saying what was built, which the
# suite prints in its header.
#
# Source, in this order:
#   GUBERNATOR_SRC=DIR   a checkout of github.com/gubernator-io/gubernator
#                        (a work tree, or a bare git directory whose HEAD is
#                        exported): `go build ./cmd/gubernator` in it
#   otherwise            `go install` of GUBERNATOR_VERSION (default v2.21.0)
#                        from the Go module proxy, with the Go toolchain that
#                        release asks for: GOTOOLCHAIN=GUBERNATOR_GOTOOLCHAIN
#                        (default go1.27.3, which the go command fetches from
#                        the proxy) for this one build only
#
# Weir's own module is never built with another toolchain. v2.13.0, the
# newest release that builds with Go 1.26, cannot run three nodes on one
# host: it has no GUBER_MEMBERLIST_NODE_NAME, so every node gossips under
# the host name. The build runs once: OUT is kept until it is removed.
set -euo pipefail
NAME=gubernator.sh
out=${1:?usage: bench/gubernator.sh OUT}
version=${GUBERNATOR_VERSION:-v2.21.0}
toolchain=${GUBERNATOR_GOTOOLCHAIN:-go1.27.3}
case $out in /*) ;; *) out=$PWD/$out ;; esac
mkdir -p "$(dirname "$out")"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if [[ -n ${GUBERNATOR_SRC:-} ]]; then
	src=$GUBERNATOR_SRC
	if [[ -d $src && ! -e $src/go.mod ]] && git --git-dir="$src" rev-parse HEAD >/dev/null 2>&1; then
		rev=$(git --git-dir="$src" rev-parse --short=12 HEAD)
		git --git-dir="$src" archive HEAD | tar -x -C "$tmp"
		src=$tmp
		what="github.com/gubernator-io/gubernator/v2 at commit $rev (source tree, go build ./cmd/gubernator)"
	else
		[[ -e $src/go.mod ]] || { echo "$NAME: GUBERNATOR_SRC=$src is neither a source tree nor a git directory" >&2; exit 1; }
		rev=$(git -C "$src" rev-parse --short=12 HEAD 2>/dev/null || echo "unknown commit")
		what="github.com/gubernator-io/gubernator/v2 at $rev (source tree, go build ./cmd/gubernator)"
	fi
	(cd "$src" && go build -trimpath -o "$out.tmp" ./cmd/gubernator)
	what="$what with $(go env GOVERSION)"
else
	GOTOOLCHAIN=$toolchain GOBIN=$tmp go install -trimpath "github.com/gubernator-io/gubernator/v2/cmd/gubernator@$version"
	mv "$tmp/gubernator" "$out.tmp"
	what="github.com/gubernator-io/gubernator/v2 $version (go install from the Go module proxy with GOTOOLCHAIN=$toolchain)"
fi
mv "$out.tmp" "$out"
echo "$what" >"$out.version"
echo "$NAME: built $out: $what"
