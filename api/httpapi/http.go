package httpapi

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"path"
	"runtime/debug"
	"strings"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/api/ui"
)

// Config configures the HTTP API. Start from DefaultConfig; a zero numeric
// field means its default.
type Config struct {
	// LegacyHeaders adds X-RateLimit-Limit, X-RateLimit-Remaining and
	// X-RateLimit-Reset next to the IETF RateLimit fields. Default false:
	// the RateLimit and RateLimit-Policy fields say the same, a take's
	// JSON body holds the figures, and the middleware and the Envoy
	// service send no trio either (weir serve --legacy-headers turns it
	// on for clients that read only X-RateLimit-*).
	LegacyHeaders bool
	// MaxBodyBytes bounds a request body; a larger body is 413
	// request_too_large and reaches no Decider. Default 1 MiB, at least 1.
	MaxBodyBytes int64
	// MaxKeyBytes bounds a key, a limit name and a lease holder, in bytes.
	// Longer is 400 before the Decider is called. Default 512
	// (api.DefaultMaxKeyBytes), at least 1.
	MaxKeyBytes int
	// MaxChecks bounds the checks of one POST /v1/take. Default 100
	// (api.DefaultMaxChecks), at least 1.
	MaxChecks int
}

// DefaultConfig returns the defaults: no legacy headers, 1 MiB bodies,
// 512-byte keys, 100 checks per take.
func DefaultConfig() Config {
	return Config{MaxBodyBytes: 1 << 20, MaxKeyBytes: api.DefaultMaxKeyBytes, MaxChecks: api.DefaultMaxChecks}
}

// Validate reports a negative bound. It changes nothing.
func (c Config) Validate() error {
	switch {
	case c.MaxBodyBytes < 0:
		return errors.New("api: HTTPConfig.MaxBodyBytes must not be negative")
	case c.MaxKeyBytes < 0:
		return errors.New("api: HTTPConfig.MaxKeyBytes must not be negative")
	case c.MaxChecks < 0:
		return errors.New("api: HTTPConfig.MaxChecks must not be negative")
	}
	return nil
}

// withDefaults replaces zero (or negative) bounds by the defaults.
func (c Config) withDefaults() Config {
	def := DefaultConfig()
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = def.MaxBodyBytes
	}
	if c.MaxKeyBytes <= 0 {
		c.MaxKeyBytes = def.MaxKeyBytes
	}
	if c.MaxChecks <= 0 {
		c.MaxChecks = def.MaxChecks
	}
	return c
}

// handler serves the HTTP API. It holds no mutable state and is safe for
// concurrent use.
type handler struct {
	d      api.Decider
	cfg    Config
	lim    inputLimits
	logger *slog.Logger
	mux    *http.ServeMux
	// exact holds every route without a wildcard, by the method and path
	// a request names, which serve matches before the mux.
	exact map[exactRoute]routed
}

// exactRoute is a method and a path without wildcards.
type exactRoute struct{ method, path string }

// routed is a route's handler and the pattern the mux knows it by.
type routed struct {
	pattern string
	h       http.Handler
}

// NewHandler returns the HTTP API (see the package doc for routes,
// statuses, headers and bodies; docs/architecture.md §5) served from d, and
// its operator routes (GET /v1/cluster/hot and GET /v1/cluster/stats, which
// the status page at /ui/ reads) from op. A nil op serves the operator
// routes as unknown routes: 404. metrics serves GET /metrics and may be nil
// (then /metrics is 404). logger receives internal errors and recovered
// panics, never a caller's key; nil discards. Zero bounds in cfg mean
// their defaults; cfg.LegacyHeaders is taken as given. The handler is safe
// for concurrent use.
func NewHandler(d api.Decider, op api.Operator, cfg Config, metrics http.Handler, logger *slog.Logger) http.Handler {
	return newHandler(d, op, cfg, metrics, logger)
}

func newHandler(d api.Decider, op api.Operator, cfg Config, metrics http.Handler, logger *slog.Logger) *handler {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	cfg = cfg.withDefaults()
	h := &handler{
		d:      d,
		cfg:    cfg,
		lim:    inputLimits{maxKeyBytes: cfg.MaxKeyBytes, maxChecks: cfg.MaxChecks},
		logger: logger,
		mux:    http.NewServeMux(),
		exact:  map[exactRoute]routed{},
	}
	route := func(method, path string, f http.Handler) {
		pattern := method + " " + path
		h.mux.Handle(pattern, f)
		if !strings.Contains(path, "{") && !strings.HasSuffix(path, "/") {
			h.exact[exactRoute{method, path}] = routed{pattern, f}
		}
		allow := method
		if method == http.MethodGet {
			allow = "GET, HEAD"
		}
		// Any other method on a known path: 405 in JSON, not the mux's text.
		h.mux.Handle(path, methodNotAllowed(allow))
	}
	route(http.MethodPost, "/v1/take", http.HandlerFunc(h.take))
	route(http.MethodGet, "/v1/check", http.HandlerFunc(h.check))
	route(http.MethodPost, "/v1/leases", http.HandlerFunc(h.acquire))
	route(http.MethodPost, "/v1/leases/{id}/renew", http.HandlerFunc(h.renew))
	route(http.MethodDelete, "/v1/leases/{id}", http.HandlerFunc(h.release))
	route(http.MethodGet, "/v1/cluster", http.HandlerFunc(h.cluster))
	route(http.MethodGet, "/v1/ring", http.HandlerFunc(h.ring))
	route(http.MethodDelete, "/v1/cluster/members/{name}", http.HandlerFunc(h.forget))
	if op != nil {
		route(http.MethodGet, "/v1/cluster/hot", h.hot(op))
		route(http.MethodGet, "/v1/cluster/stats", h.stats(op))
	}
	route(http.MethodGet, "/ui/", ui.Handler())
	route(http.MethodGet, "/healthz", http.HandlerFunc(h.healthz))
	route(http.MethodGet, "/readyz", http.HandlerFunc(h.readyz))
	if metrics != nil {
		route(http.MethodGet, "/metrics", metrics)
	}
	h.mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		api.WriteJSON(w, http.StatusNotFound, errorBody{Error: "not_found", Detail: "no such route"})
	})
	return h
}

// ServeHTTP routes the request. A panic in a handler or the Decider becomes a
// logged 500 rather than a dropped connection.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer func() {
		v := recover()
		if v == nil {
			return
		}
		if err, ok := v.(error); ok && errors.Is(err, http.ErrAbortHandler) {
			panic(v) // net/http's own way to abort a response
		}
		// The URL is not logged: its query holds the caller's key.
		h.logger.Error("api: panic serving HTTP request", "method", r.Method, "route", r.Pattern,
			"panic", v, "stack", string(debug.Stack()))
		api.WriteJSON(w, http.StatusInternalServerError, errorBody{Error: "internal_error"})
	}()
	h.serve(w, r)
}

// serve routes the request. A path that is not canonical ("/v1//take",
// "/v1/take/.") is 404 in JSON rather than the mux's HTML redirect: API
// clients do not follow redirects of POSTs, and every answer is JSON.
//
// A route without wildcards (POST /v1/take and GET /v1/check, which carry
// nearly every request a node serves, among them) is matched first by the
// request's exact method and path, as the mux would match it (the same
// handler, r.Pattern set alike): the mux's matching, which cleans the
// path, strips the host's port and walks its tree, was about 2,100 of the
// 14,000 instructions Weir adds to a take (bench/results/item6-inproc).
// Any other request, a HEAD among them, goes through the mux.
func (h *handler) serve(w http.ResponseWriter, r *http.Request) {
	if rt, ok := h.exact[exactRoute{r.Method, r.URL.Path}]; ok {
		r.Pattern = rt.pattern
		rt.h.ServeHTTP(w, r)
		return
	}
	if !canonicalPath(r.URL.Path) {
		api.WriteJSON(w, http.StatusNotFound, errorBody{Error: "not_found", Detail: "no such route"})
		return
	}
	h.mux.ServeHTTP(w, r)
}

// canonicalPath reports whether http.ServeMux would route p as is, without
// redirecting to a cleaned path.
func canonicalPath(p string) bool {
	if p == "" || p[0] != '/' {
		return false
	}
	clean := path.Clean(p) // no allocation when p is already clean
	if p[len(p)-1] == '/' && clean != "/" {
		return clean+"/" == p
	}
	return clean == p
}

// errorBody is every error response: {"error":"...","detail":"..."}.
type errorBody struct {
	Error  string `json:"error"`
	Detail string `json:"detail,omitempty"`
}

// denialBody is a 429: it names the limit but never the key.
type denialBody struct {
	Error        string `json:"error"`
	Limit        string `json:"limit"`
	RetryAfterMs int64  `json:"retry_after_ms"`
	// Source is set only for a lease request that asked for evidence.
	Source string `json:"source,omitempty"`
}

type statusBody struct {
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
}

// writeError writes the response for an error from a decoder or a Decider.
func (h *handler) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var e *api.Error
	switch {
	case errors.As(err, &e):
		switch e.Code {
		case api.CodeInvalid:
			api.WriteJSON(w, http.StatusBadRequest, errorBody{Error: "invalid_request", Detail: e.Detail})
			return
		case api.CodeNotFound:
			api.WriteJSON(w, http.StatusNotFound, errorBody{Error: "not_found", Detail: e.Detail})
			return
		case api.CodeUnavailable:
			api.WriteJSON(w, http.StatusServiceUnavailable, errorBody{Error: "limiter_unavailable", Detail: e.Detail})
			return
		case api.CodeOverloaded:
			api.WriteJSON(w, http.StatusServiceUnavailable, errorBody{Error: "limiter_overloaded"})
			return
		case api.CodeUnauthenticated, api.CodeForbidden:
			writeRefusal(w, e)
			return
		case api.CodeQuota:
			api.WriteJSON(w, http.StatusForbidden, errorBody{Error: "tenant_quota", Detail: e.Detail})
			return
		}
	case errors.Is(err, context.DeadlineExceeded):
		api.WriteJSON(w, http.StatusServiceUnavailable, errorBody{Error: "limiter_unavailable", Detail: "deadline exceeded"})
		return
	case errors.Is(err, context.Canceled):
		api.WriteJSON(w, http.StatusServiceUnavailable, errorBody{Error: "limiter_unavailable", Detail: "request canceled"})
		return
	}
	h.logger.Error("api: unexpected decider error", "route", r.Pattern, "err", err)
	api.WriteJSON(w, http.StatusInternalServerError, errorBody{Error: "internal_error"})
}

// exactReadMax is the largest declared body readBody allocates whole before
// reading it. Takes are far smaller; a larger declared length must arrive
// before it costs memory, so that headers alone cannot make a connection
// hold a megabyte.
const exactReadMax = 4 << 10

// readBody reads a request body of at most cfg.MaxBodyBytes. On failure it
// has written the response (413 or 400) and returns false.
func (h *handler) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	if r.ContentLength > h.cfg.MaxBodyBytes { // refuse before reading a byte
		api.WriteJSON(w, http.StatusRequestEntityTooLarge, errorBody{Error: "request_too_large"})
		return nil, false
	}
	var body []byte
	var err error
	if r.ContentLength >= 0 && r.ContentLength <= exactReadMax {
		// A small declared length, within the limit, and net/http ends
		// the body there: one buffer of that size and one read, which is
		// what every take pays; a body cut short is an error below.
		body = make([]byte, r.ContentLength)
		_, err = io.ReadFull(r.Body, body)
	} else {
		// Chunked, or large: memory grows with the bytes that arrive, not
		// with what a caller declares, and the limit is enforced while
		// reading.
		body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, h.cfg.MaxBodyBytes))
	}
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			api.WriteJSON(w, http.StatusRequestEntityTooLarge, errorBody{Error: "request_too_large"})
		} else {
			api.WriteJSON(w, http.StatusBadRequest, errorBody{Error: "invalid_request", Detail: "could not read the request body"})
		}
		return nil, false
	}
	return body, true
}

func methodNotAllowed(allow string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Allow", allow)
		api.WriteJSON(w, http.StatusMethodNotAllowed, errorBody{Error: "method_not_allowed", Detail: "use " + allow})
	})
}

func (h *handler) healthz(w http.ResponseWriter, _ *http.Request) {
	api.WriteJSON(w, http.StatusOK, statusBody{Status: "ok"})
}

func (h *handler) readyz(w http.ResponseWriter, _ *http.Request) {
	if r := h.d.Readiness(); !r.Ready {
		api.WriteJSON(w, http.StatusServiceUnavailable, statusBody{Status: "not_ready", Reason: r.Reason})
		return
	}
	api.WriteJSON(w, http.StatusOK, statusBody{Status: "ready"})
}

type memberJSON struct {
	Name          string `json:"name"`
	Addr          string `json:"addr"`
	State         string `json:"state"`
	LimitsVersion int64  `json:"limits_version"`
}

type clusterJSON struct {
	Node    string       `json:"node"`
	Epoch   uint64       `json:"epoch"`
	Members []memberJSON `json:"members"`
	Owner   string       `json:"owner,omitempty"`
}

// cluster serves GET /v1/cluster[?limit=&key=].
func (h *handler) cluster(w http.ResponseWriter, r *http.Request) {
	limit, key, err := decodeClusterQuery(r.URL.RawQuery, h.lim)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	info, err := h.d.Cluster(r.Context(), limit, key)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	out := clusterJSON{Node: info.Node, Epoch: info.Epoch, Members: make([]memberJSON, len(info.Members))}
	for i, m := range info.Members {
		out.Members[i] = memberJSON(m)
	}
	if limit != "" {
		out.Owner = info.Owner
	}
	api.WriteJSON(w, http.StatusOK, out)
}

// forget serves DELETE /v1/cluster/members/{name}: 204 when the member was
// forgotten, 404 when it was not known, 400 when it is alive.
func (h *handler) forget(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if name == "" || len(name) > h.lim.maxKeyBytes {
		h.writeError(w, r, api.Errorf(api.CodeInvalid, "member name must be 1 to %d bytes", h.lim.maxKeyBytes))
		return
	}
	known, err := h.d.Forget(r.Context(), name)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	if !known {
		h.writeError(w, r, api.Errorf(api.CodeNotFound, "no known member %q", api.Clip(name)))
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusNoContent)
}
