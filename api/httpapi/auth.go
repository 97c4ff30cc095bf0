package httpapi

import (
	"errors"
	"net/http"
	"strings"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/api/authz"
	"github.com/weir-rl/weir/auth"
)

// TokenHeader carries a bare caller token, for proxies. A forward-auth
// proxy (nginx auth_request, Traefik ForwardAuth, Caddy forward_auth)
// passes the client's own Authorization header through to Weir; it sets
// its own credential in TokenHeader, which wins over Authorization.
const TokenHeader = "X-Weir-Token"

// openPath reports whether p answers without a token: probes must work
// for orchestrators, and the status page's files (which hold no data)
// must load so that it can ask for a token.
func openPath(p string) bool {
	return p == "/healthz" || p == "/readyz" || strings.HasPrefix(p, "/ui/") && p != sessionPath
}

// credential returns the caller's token of r: X-Weir-Token, else the token
// of "Authorization: Bearer TOKEN".
func credential(r *http.Request) string {
	if cred := r.Header.Get(TokenHeader); cred != "" {
		return cred
	}
	return authz.Bearer(r.Header.Get("Authorization"))
}

// RequireTokens wraps the HTTP API h with authentication under cfg's
// policy: a request other than /healthz, /readyz, the status page's files
// under /ui/ and (unless cfg.ProtectMetrics) /metrics must carry a known
// token in X-Weir-Token or Authorization: Bearer, or it is 401
// unauthenticated before its body is read. /metrics, when protected, also
// needs the read scope (403 forbidden). The status page's GETs may carry
// its session cookie instead, opened at /ui/session with a read token
// (ui_session.go). A refusal is counted by cfg.OnFailure. The caller's
// token goes into the request's context for the authorizing Decider and
// Operator h was built with. Without a policy h is served as is.
func RequireTokens(h http.Handler, cfg authz.Config) http.Handler {
	ss := newSessions()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		metrics := r.URL.Path == "/metrics"
		if openPath(r.URL.Path) || (metrics && !cfg.ProtectMetrics) {
			h.ServeHTTP(w, r)
			return
		}
		if r.URL.Path == sessionPath {
			ss.serveSession(w, r, cfg)
			return
		}
		var t *auth.Token
		var err error
		if usesSession(r) {
			t, err = ss.cookieToken(r, cfg)
		} else {
			t, err = cfg.Credential(credential(r))
		}
		if err == nil && t != nil && metrics {
			err = cfg.Authorize(t, auth.ScopeRead, "", "")
		}
		if err != nil {
			e, ok := errors.AsType[*api.Error](err)
			if !ok { // the policy answers *api.Error only
				api.WriteJSON(w, http.StatusInternalServerError, errorBody{Error: "internal_error"})
				return
			}
			writeRefusal(w, e)
			return
		}
		if t == nil { // no policy: the API is open
			h.ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(w, r.WithContext(authz.WithCaller(r.Context(), t)))
	})
}

// writeRefusal writes the 401 (with WWW-Authenticate) or 403 for e.
func writeRefusal(w http.ResponseWriter, e *api.Error) {
	if e.Code == api.CodeUnauthenticated {
		w.Header().Set("WWW-Authenticate", `Bearer realm="weir"`)
		api.WriteJSON(w, http.StatusUnauthorized, errorBody{Error: "unauthenticated", Detail: e.Detail})
		return
	}
	api.WriteJSON(w, http.StatusForbidden, errorBody{Error: "forbidden", Detail: e.Detail})
}
