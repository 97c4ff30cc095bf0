package httpapi

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"time"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/api/authz"
	"github.com/weir-rl/weir/auth"
)

// The status page's session. A browser cannot send a bearer token with
// the page's own requests, so behind a tokens file an operator exchanges a
// token with the read scope, once, for a cookie: POST /ui/session with
// {"token":"..."} answers 204 and sets SessionCookie, HttpOnly (the page's
// scripts never see it), SameSite=Strict (no other site's page sends it),
// Secure over TLS, Path=/, for SessionTTL. DELETE /ui/session clears it.
//
// The cookie holds the token's SHA-256 and an expiry, signed with HMAC-SHA256
// under a key the node draws at start: it is not the token, a node's
// cookies are void on another node or after a restart, and each use looks
// the hash up in the tokens file in force, so a token removed from the
// file stops its sessions at once. It is accepted only on the GET routes
// the page reads (sessionPaths), never on a route that decides or changes
// anything.

// SessionCookie is the name of the status page's session cookie.
const SessionCookie = "weir_ui"

// SessionTTL is how long a status page session lasts.
const SessionTTL = 12 * time.Hour

// sessionPath is where a session is opened (POST) and closed (DELETE).
const sessionPath = "/ui/session"

// maxSessionBody bounds POST /ui/session's body.
const maxSessionBody = 4 << 10

// sessionPaths are the routes a session cookie is accepted on: the
// operator routes the status page polls.
var sessionPaths = map[string]bool{"/v1/cluster/stats": true, "/v1/cluster/hot": true}

// sessionLen is a cookie's decoded size: expiry, token hash, MAC.
const sessionLen = 8 + sha256.Size + sha256.Size

// sessions issues and checks session cookies under one random key. It is
// immutable and safe for concurrent use.
type sessions struct{ key [32]byte }

func newSessions() *sessions {
	s := &sessions{}
	_, _ = rand.Read(s.key[:]) // never fails (crypto/rand)
	return s
}

// issue returns the cookie value of a session of the token with hash h,
// ending at until.
func (s *sessions) issue(h [32]byte, until time.Time) string {
	var b [sessionLen]byte
	binary.BigEndian.PutUint64(b[:8], uint64(until.Unix()))
	copy(b[8:40], h[:])
	copy(b[40:], s.mac(b[:40]))
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// check returns the token hash of a cookie value this node issued and
// that has not ended at now.
func (s *sessions) check(v string, now time.Time) ([32]byte, bool) {
	var h [32]byte
	b, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil || len(b) != sessionLen || !hmac.Equal(b[40:], s.mac(b[:40])) {
		return h, false
	}
	if int64(binary.BigEndian.Uint64(b[:8])) <= now.Unix() {
		return h, false
	}
	copy(h[:], b[8:40])
	return h, true
}

func (s *sessions) mac(payload []byte) []byte {
	m := hmac.New(sha256.New, s.key[:])
	m.Write(payload)
	return m.Sum(nil)
}

// cookieToken authenticates r by its session cookie: the token, or an
// error (a CodeUnauthenticated *api.Error for a missing, forged, expired
// or revoked session).
func (s *sessions) cookieToken(r *http.Request, cfg authz.Config) (*auth.Token, error) {
	c, err := r.Cookie(SessionCookie)
	if err != nil {
		return cfg.Credential("") // missing, counted as such
	}
	h, ok := s.check(c.Value, time.Now())
	if !ok {
		h = [32]byte{} // no token hashes to zero: refused as unknown
	}
	return cfg.TokenByHash(h)
}

// usesSession reports whether r may authenticate with the session cookie:
// a GET or HEAD of a route the page reads, without a token of its own.
func usesSession(r *http.Request) bool {
	return (r.Method == http.MethodGet || r.Method == http.MethodHead) && sessionPaths[r.URL.Path] && credential(r) == ""
}

// serveSession serves POST and DELETE /ui/session under cfg's policy.
func (s *sessions) serveSession(w http.ResponseWriter, r *http.Request, cfg authz.Config) {
	if cfg.Policy == nil || cfg.Policy() == nil {
		api.WriteJSON(w, http.StatusNotFound, errorBody{Error: "not_found", Detail: "no tokens file: the status page needs no session"})
		return
	}
	cookie := &http.Cookie{
		Name: SessionCookie, Path: "/", HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode,
	}
	switch r.Method {
	case http.MethodDelete:
		cookie.MaxAge = -1
		http.SetCookie(w, cookie)
		w.WriteHeader(http.StatusNoContent)
		return
	case http.MethodPost:
	default:
		w.Header().Set("Allow", "POST, DELETE")
		api.WriteJSON(w, http.StatusMethodNotAllowed, errorBody{Error: "method_not_allowed"})
		return
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		// A cross-site form cannot send JSON without a CORS preflight.
		api.WriteJSON(w, http.StatusUnsupportedMediaType, errorBody{Error: "invalid_request", Detail: "send {\"token\": ...} as application/json"})
		return
	}
	var body struct {
		Token string `json:"token"`
	}
	dec := json.NewDecoder(io.LimitReader(r.Body, maxSessionBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		api.WriteJSON(w, http.StatusBadRequest, errorBody{Error: "invalid_request", Detail: "body must be {\"token\": \"...\"} of at most 4 KiB"})
		return
	}
	t, err := cfg.Credential(body.Token)
	if err == nil {
		err = cfg.Authorize(t, auth.ScopeRead, "", "")
	}
	if err != nil {
		if e, ok := errors.AsType[*api.Error](err); ok {
			writeRefusal(w, e)
			return
		}
		api.WriteJSON(w, http.StatusInternalServerError, errorBody{Error: "internal_error"})
		return
	}
	until := time.Now().Add(SessionTTL)
	cookie.Value = s.issue(t.Hash, until)
	cookie.MaxAge = int(SessionTTL / time.Second)
	http.SetCookie(w, cookie)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusNoContent)
}
