package middleware

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"time"

	"github.com/weir-rl/weir/api"
)

// HTTPConfig configures net/http middleware. Taker and Key are required.
type HTTPConfig struct {
	// Taker decides; normally client.New(conn).
	Taker Taker
	// Key returns the bucket key of a request: an identity the service
	// trusts (an authenticated user, r.RemoteAddr's host), never a header
	// the client could set. An error answers 400 without asking Weir.
	Key func(r *http.Request) (string, error)
	// Cost returns the cost of a request; nil means 1. An error, or a cost
	// below 1, answers 400.
	Cost func(r *http.Request) (int64, error)
	// Timeout bounds each call to Weir; past it, the route's failure policy
	// applies. Default DefaultTimeout (100 ms).
	Timeout time.Duration
	// LegacyHeaders adds X-RateLimit-Limit, -Remaining and -Reset, as the
	// HTTP API's default does. Default false.
	LegacyHeaders bool
	// FallbackBuckets bounds the buckets FailLocal routes keep in this
	// process. Default 10,000.
	FallbackBuckets int
	// Clock is the local fallback's clock; nil is time.Now.
	Clock func() time.Time
	// Logger receives failures to decide, never a key; nil discards.
	Logger *slog.Logger
}

// HTTP is net/http middleware. It is safe for concurrent use.
type HTTP struct {
	c      *core
	key    func(*http.Request) (string, error)
	cost   func(*http.Request) (int64, error)
	legacy bool
}

// Validate reports why cfg is unusable: no Taker or Key, a negative
// Timeout or FallbackBuckets. It changes nothing.
func (cfg HTTPConfig) Validate() error {
	return validateCommon(cfg.Taker, cfg.Key == nil, cfg.Timeout, cfg.FallbackBuckets)
}

// NewHTTP returns the middleware of cfg, or the reason cfg is unusable
// (Validate).
func NewHTTP(cfg HTTPConfig) (*HTTP, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c, err := newCore(cfg.Taker, cfg.Timeout, cfg.FallbackBuckets, cfg.Clock, cfg.Logger)
	if err != nil {
		return nil, err
	}
	return &HTTP{c: c, key: cfg.Key, cost: cfg.Cost, legacy: cfg.LegacyHeaders}, nil
}

// Wrap returns next limited by route. It panics when route does not
// validate, as http.ServeMux.Handle does on a bad pattern: routes are fixed
// when the server is built.
func (m *HTTP) Wrap(route Route, next http.Handler) http.Handler {
	if err := route.Validate(); err != nil {
		panic(err)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, err := m.key(r)
		if err != nil || key == "" {
			writeError(w, http.StatusBadRequest, "invalid_request", "no rate-limit key for this request")
			return
		}
		cost := int64(1)
		if m.cost != nil {
			if cost, err = m.cost(r); err != nil || cost < 1 {
				writeError(w, http.StatusBadRequest, "invalid_request", "no valid rate-limit cost for this request")
				return
			}
		}
		o := m.c.decide(r.Context(), route, key, cost)
		switch o.v {
		case deny:
			api.WriteDenied(w, http.StatusTooManyRequests, o.resp, m.legacy)
		case unavailable:
			writeError(w, http.StatusServiceUnavailable, "limiter_unavailable", "")
		case misrouted:
			writeError(w, http.StatusInternalServerError, "internal_error", "")
		default:
			if o.decided {
				api.SetHeaders(w.Header(), o.resp, m.legacy)
			}
			next.ServeHTTP(w, r)
		}
	})
}

// writeError writes the HTTP API's error body.
func writeError(w http.ResponseWriter, status int, code, detail string) {
	b, _ := json.Marshal(struct {
		Error  string `json:"error"`
		Detail string `json:"detail,omitempty"`
	}{code, detail})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
