package httpapi

import (
	"crypto/sha256"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-rl/weir/api/authz"
	"github.com/weir-rl/weir/auth"
	"github.com/weir-rl/weir/internal/apitest"
)

// sessionServer is RequireTokens around a handler that records the caller
// it was handed, under a policy the test can replace.
type sessionServer struct {
	srv    *httptest.Server
	policy atomic.Pointer[auth.Policy]
	caller atomic.Pointer[auth.Token] // the last caller the inner handler saw
	served atomic.Int64
}

func startSessionServer(t *testing.T, withPolicy bool) *sessionServer {
	t.Helper()
	s := &sessionServer{}
	if withPolicy {
		s.policy.Store(apitest.Policy(t))
	}
	cfg := authz.Config{Policy: s.policy.Load}
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.served.Add(1)
		s.caller.Store(authz.CallerFrom(r.Context()))
		w.WriteHeader(http.StatusOK)
	})
	s.srv = httptest.NewServer(RequireTokens(inner, cfg))
	t.Cleanup(s.srv.Close)
	return s
}

// do sends a request with the given content type and cookie value ("" for
// none) and returns the response, body closed.
func (s *sessionServer) do(t *testing.T, method, path, ctype, body, cookie string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, s.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if cookie != "" {
		req.AddCookie(&http.Cookie{Name: SessionCookie, Value: cookie})
	}
	resp, err := s.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	return resp
}

// TestSessionExchange: a read token is exchanged once for an HttpOnly,
// SameSite=Strict cookie; any other token, body or method is refused and
// sets nothing.
func TestSessionExchange(t *testing.T) {
	s := startSessionServer(t, true)
	const js = "application/json"
	for _, tt := range []struct {
		method, ctype, body string
		want                int
	}{
		{http.MethodPost, js, `{"token":"nope"}`, http.StatusUnauthorized},
		{http.MethodPost, js, `{"token":""}`, http.StatusUnauthorized},
		{http.MethodPost, js, `{"token":"acme"}`, http.StatusForbidden}, // decide only
		{http.MethodPost, "application/x-www-form-urlencoded", `token=ops`, http.StatusUnsupportedMediaType},
		{http.MethodPost, js, `{"token":"ops","x":1}`, http.StatusBadRequest},
		{http.MethodPost, js, `{"token":"` + strings.Repeat("a", maxSessionBody) + `"}`, http.StatusBadRequest},
		{http.MethodGet, "", "", http.StatusMethodNotAllowed},
	} {
		resp := s.do(t, tt.method, sessionPath, tt.ctype, tt.body, "")
		if resp.StatusCode != tt.want || len(resp.Cookies()) != 0 {
			t.Errorf("%s %s %.40s: %d with cookies %v, want %d and none", tt.method, tt.ctype, tt.body, resp.StatusCode, resp.Cookies(), tt.want)
		}
	}
	resp := s.do(t, http.MethodPost, sessionPath, "application/json; charset=utf-8", `{"token":"ops"}`, "")
	if resp.StatusCode != http.StatusNoContent || len(resp.Cookies()) != 1 {
		t.Fatalf("read token: %d, cookies %v; want 204 and one cookie", resp.StatusCode, resp.Cookies())
	}
	c := resp.Cookies()[0]
	if c.Name != SessionCookie || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" ||
		c.MaxAge != int(SessionTTL/time.Second) || c.Secure {
		t.Errorf("cookie %+v: want %s, HttpOnly, SameSite=Strict, Path=/, Max-Age 12h, not Secure over plain HTTP", c, SessionCookie)
	}
	if strings.Contains(c.Value, "ops") {
		t.Errorf("the cookie carries the token: %q", c.Value)
	}
	if s.served.Load() != 0 {
		t.Errorf("the API behind served %d requests of the exchange", s.served.Load())
	}
	resp = s.do(t, http.MethodDelete, sessionPath, "", "", c.Value)
	if resp.StatusCode != http.StatusNoContent || len(resp.Cookies()) != 1 || resp.Cookies()[0].MaxAge >= 0 {
		t.Errorf("DELETE: %d, cookies %v; want 204 clearing the cookie", resp.StatusCode, resp.Cookies())
	}
}

// TestSessionCookieScope: the cookie authenticates the status page's GETs
// as its token, and nothing else; a forged, expired or revoked session is
// 401.
func TestSessionCookieScope(t *testing.T) {
	s := startSessionServer(t, true)
	resp := s.do(t, http.MethodPost, sessionPath, "application/json", `{"token":"ops"}`, "")
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("exchange: %d", resp.StatusCode)
	}
	cookie := resp.Cookies()[0].Value
	for _, p := range []string{"/v1/cluster/stats", "/v1/cluster/hot?n=10"} {
		s.caller.Store(nil)
		if resp := s.do(t, http.MethodGet, p, "", "", cookie); resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s with the cookie: %d", p, resp.StatusCode)
		}
		if c := s.caller.Load(); c == nil || c.Name != "ops" {
			t.Fatalf("GET %s: caller %v, want the token ops", p, c)
		}
	}
	for _, r := range []struct{ method, path string }{
		{http.MethodPost, "/v1/take"},
		{http.MethodGet, "/v1/check?limit=export&key=k"},
		{http.MethodGet, "/v1/cluster"},
		{http.MethodDelete, "/v1/cluster/members/n2"},
		{http.MethodPost, "/v1/cluster/stats"},
	} {
		if resp := s.do(t, r.method, r.path, "application/json", "{}", cookie); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s %s with only the cookie: %d, want 401", r.method, r.path, resp.StatusCode)
		}
	}
	// Forged: another key's MAC, a flipped byte, garbage.
	other := newSessions().issue(sha256.Sum256([]byte("ops")), time.Now().Add(time.Hour))
	flipped := []byte(cookie)
	flipped[10] ^= 1
	expired := newSessions()
	for name, v := range map[string]string{"other node's": other, "flipped": string(flipped), "garbage": "x"} {
		if resp := s.do(t, http.MethodGet, "/v1/cluster/stats", "", "", v); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s cookie: %d, want 401", name, resp.StatusCode)
		}
	}
	v := expired.issue(sha256.Sum256([]byte("ops")), time.Now().Add(-time.Second))
	if _, ok := expired.check(v, time.Now()); ok {
		t.Error("an expired session checks out")
	}
	if h, ok := expired.check(expired.issue(sha256.Sum256([]byte("ops")), time.Now().Add(time.Minute)), time.Now()); !ok || h != sha256.Sum256([]byte("ops")) {
		t.Error("a live session does not check out to its token's hash")
	}
	// Revoked: the tokens file no longer holds ops.
	p, err := auth.Parse([]byte("version: 1\ntokens:\n  - {name: acme, sha256: "+auth.HashToken("acme")+", scopes: [decide]}\n"), "test")
	if err != nil {
		t.Fatal(err)
	}
	s.policy.Store(p)
	if resp := s.do(t, http.MethodGet, "/v1/cluster/stats", "", "", cookie); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("cookie of a removed token: %d, want 401", resp.StatusCode)
	}
}

// TestSessionPageFilesOpen: the page's files load without a token (they
// hold no data), and without a tokens file there is no session to open.
func TestSessionPageFilesOpen(t *testing.T) {
	s := startSessionServer(t, true)
	for _, p := range []string{"/ui/", "/ui/app.js"} {
		if resp := s.do(t, http.MethodGet, p, "", "", ""); resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s without a token: %d, want it served", p, resp.StatusCode)
		}
	}
	open := startSessionServer(t, false)
	if resp := open.do(t, http.MethodPost, sessionPath, "application/json", `{"token":"ops"}`, ""); resp.StatusCode != http.StatusNotFound {
		t.Errorf("POST %s without a tokens file: %d, want 404", sessionPath, resp.StatusCode)
	}
}
