// Package ui is Weir's live status page, served at /ui on every node: plain
// HTML, CSS and JavaScript embedded in the binary, with no build step and
// no external assets. The page reads the node's JSON endpoints
// (/v1/cluster/stats and /v1/cluster/hot) and refreshes itself; it holds no
// state on the server. Behind a tokens file the page asks for a read token
// and exchanges it for a session cookie at /ui/session, which
// httpapi.RequireTokens serves.
package ui

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed static
var static embed.FS

// csp allows the page its own scripts, styles and fetches only: nothing is
// loaded from elsewhere, and no inline script runs.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Handler serves the page under /ui/. It is safe for concurrent use.
func Handler() http.Handler {
	sub, err := fs.Sub(static, "static")
	if err != nil { // static is compiled in; Sub of a present directory cannot fail
		panic(err)
	}
	files := http.StripPrefix("/ui/", http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
}
