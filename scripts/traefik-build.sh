#!/usr/bin/env bash
# traefik-build.sh builds Traefik's own binary from the Go module proxy into
# OUT (default bin/traefik); it is what `make traefik` runs. Traefik has no
# Debian package; node/e2e_traefik_test.go runs deploy/traefik with it.
#
#   TRAEFIK_VERSION  the module version (default v3.7.13)
#   OUT              where the binary goes (default bin/traefik)
#   GO               the go command (default go)
#
# `go install github.com/traefik/traefik/v3/cmd/traefik@VERSION` refuses the
# module: its go.mod has replace directives. So this builds it as the main
# module, in a writable copy of the module proxy's source (checked against
# go.sum by `go mod download`), with the two things the module zip lacks,
# listed here, and without the parts whose modules the proxy refuses (further down):
#
#   - pkg/config/dynamic/ext, a nested module that go.mod replaces with its
#     local path (nested modules are never in a module zip, and the proxy
#     does not serve it). Upstream it holds two empty structs, the extension
#     points of the routing configuration; they are written here as such.
#   - webui/static, which go:embed needs and Traefik's release builds fill
#     with the dashboard (yarn); the dashboard is off in deploy/traefik, so
#     one placeholder page stands in.
#
# The build uses the default toolchain (Traefik v3.7 needs go 1.26.0).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
version=${TRAEFIK_VERSION:-v3.7.13}
out=${OUT:-$root/bin/traefik}
GO=${GO:-go}
mod=github.com/traefik/traefik/v3

work=$(mktemp -d -t weir-traefik.XXXXXX)
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
# Outside any module, so that no go.mod or go.sum but the copy's is touched.
dir=$(cd "$work" && $GO mod download -json "$mod@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
if [ -z "$dir" ] || [ ! -f "$dir/go.mod" ]; then
	echo "traefik-build: $mod@$version: no source from the module proxy" >&2
	exit 1
fi
cp -R "$dir/." "$work/"
chmod -R u+w "$work"

grep -q '^replace github.com/traefik/traefik/dynamic/ext => ./pkg/config/dynamic/ext$' "$work/go.mod" || {
	echo "traefik-build: $version no longer replaces dynamic/ext with its local path; update this script" >&2
	exit 1
}
mkdir -p "$work/pkg/config/dynamic/ext" "$work/webui/static"
printf 'module github.com/traefik/traefik/dynamic/ext\n\ngo 1.24.0\n' >"$work/pkg/config/dynamic/ext/go.mod"
cat >"$work/pkg/config/dynamic/ext/ext.go" <<'EOF'
package ext

// HTTP is a dynamic.HTTP extension.
type HTTP struct{}

// Router is a dynamic.Router extension.
type Router struct{}
EOF
printf '<!doctype html><title>Traefik</title><p>Dashboard not built (scripts/traefik-build.sh).\n' >"$work/webui/static/index.html"

# Modules the module proxy refuses (403, "not available"; checked
# 2026-12-02 for v3.7.13): containous/go-http-auth, Traefik's fork used only
# by the basicAuth and digestAuth middlewares (the upstream it forks,
# abbot/go-http-auth v0.4.0, lacks the fork's API), and 14 SDKs that only
# lego's ACME DNS-challenge providers import. So this build leaves out
# exactly those: basicAuth and digestAuth refuse to be created (a router
# using one is not built and Traefik logs why), and a DNS challenge fails
# naming its provider. Nothing on the path deploy/traefik uses (entry
# points, file provider, routers, forwardAuth, serversTransports, the
# reverse proxy) is touched.
auth=pkg/middlewares/auth
acme=pkg/provider/acme/provider.go
users=$(cd "$work" && grep -rl --include='*.go' --exclude='*_test.go' 'go-http-auth' pkg cmd | sort | tr '\n' ' ')
if ! grep -q '^	"github.com/go-acme/lego/v5/providers/dns"$' "$work/$acme" ||
	! grep -q '^		provider, err = dns.NewDNSChallengeProviderByName(p.DNSChallenge.Provider)$' "$work/$acme" ||
	[ "$users" != "$auth/basic_auth.go $auth/digest_auth.go " ]; then
	echo "traefik-build: $version: $acme or $auth changed; update this script" >&2
	exit 1
fi
sed -i -e '/^	"github.com\/go-acme\/lego\/v5\/providers\/dns"$/d' \
	-e 's/^		provider, err = dns.NewDNSChallengeProviderByName(p.DNSChallenge.Provider)$/		err = fmt.Errorf("ACME DNS challenge provider %q: not in this build (weir scripts\/traefik-build.sh)", p.DNSChallenge.Provider)/' \
	"$work/$acme"
rm "$work/$auth/basic_auth.go" "$work/$auth/digest_auth.go"
cat >"$work/$auth/weir_build.go" <<'EOF'
package auth

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/traefik/traefik/v3/pkg/config/dynamic"
)

var errNotBuilt = errors.New("not in this build: containous/go-http-auth is not served by the Go module proxy (weir scripts/traefik-build.sh)")

// NewBasic refuses: basicAuth is not in this build.
func NewBasic(context.Context, http.Handler, dynamic.BasicAuth, string) (http.Handler, error) {
	return nil, fmt.Errorf("basicAuth: %w", errNotBuilt)
}

// NewDigest refuses: digestAuth is not in this build.
func NewDigest(context.Context, http.Handler, dynamic.DigestAuth, string) (http.Handler, error) {
	return nil, fmt.Errorf("digestAuth: %w", errNotBuilt)
}
EOF

mkdir -p "$(dirname "$out")"
cd "$work"
CGO_ENABLED=0 $GO build -trimpath \
	-ldflags "-s -w -X $mod/pkg/version.Version=$version" \
	-o "$out" ./cmd/traefik
"$out" version
