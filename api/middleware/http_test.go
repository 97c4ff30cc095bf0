package middleware_test

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weir-rl/weir/api/client"
	"github.com/weir-rl/weir/api/middleware"
	"github.com/weir-rl/weir/bucket"
)

// remoteHost is the key of these tests: the connection's address.
func remoteHost(r *http.Request) (string, error) {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	return "ip:" + host, err
}

type reply struct {
	status int
	header http.Header
	body   string
}

func get(t *testing.T, url string, header http.Header) reply {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if header != nil {
		req.Header = header
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return reply{resp.StatusCode, resp.Header, string(b)}
}

// app serves "ok" behind the middleware and counts the requests that reach it.
func app(t *testing.T, taker middleware.Taker, route middleware.Route, cost func(*http.Request) (int64, error)) (*httptest.Server, *int) {
	t.Helper()
	m, err := middleware.NewHTTP(middleware.HTTPConfig{Taker: taker, Key: remoteHost, Cost: cost, LegacyHeaders: true})
	if err != nil {
		t.Fatal(err)
	}
	hits := new(int)
	srv := httptest.NewServer(m.Wrap(route, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		*hits++
		_, _ = io.WriteString(w, "ok")
	})))
	t.Cleanup(srv.Close)
	return srv, hits
}

// Allowed requests reach the handler with the RateLimit headers; the
// request over the limit is the 429 Weir's own /v1/check gives for the
// same bucket, header for header and byte for byte.
func TestHTTPAgainstNode(t *testing.T) {
	w := newWeir(t)
	srv, hits := app(t, w.client, middleware.Route{Limit: "mw"}, nil)
	for i := range 3 {
		r := get(t, srv.URL, http.Header{"X-Forwarded-For": {"10.9.9." + strconv.Itoa(i)}})
		if r.status != 200 || r.body != "ok" {
			t.Fatalf("request %d: %d %q", i+1, r.status, r.body)
		}
		if got, want := r.header.Get("RateLimit"), `"mw";r=`+strconv.Itoa(2-i)+`;t=`; !strings.HasPrefix(got, want) {
			t.Fatalf("request %d: RateLimit %q, want %s...", i+1, got, want)
		}
		if r.header.Get("RateLimit-Policy") != `"mw";q=3;w=3600` || r.header.Get("X-RateLimit-Limit") != "3" {
			t.Fatalf("request %d: headers %v", i+1, r.header)
		}
	}
	denied := get(t, srv.URL, nil)
	if denied.status != http.StatusTooManyRequests || *hits != 3 {
		t.Fatalf("over the limit: %d %q, handler ran %d times", denied.status, denied.body, *hits)
	}
	own := get(t, "http://"+w.n.HTTPAddr()+"/v1/check?limit=mw&key=ip:127.0.0.1", nil)
	if own.status != http.StatusTooManyRequests {
		t.Fatalf("the node's own check: %d %s", own.status, own.body)
	}
	// Both denials were decided a moment apart on a bucket refilling one
	// token in 20 minutes: the same whole seconds.
	for _, h := range []string{"Content-Type", "Cache-Control", "Retry-After", "RateLimit-Policy", "RateLimit", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"} {
		if got, want := denied.header.Get(h), own.header.Get(h); got != want || got == "" {
			t.Errorf("%s: middleware %q, node %q", h, got, want)
		}
	}
	if !strings.HasPrefix(denied.body, `{"error":"rate_limit_exceeded","limit":"mw","retry_after_ms":`) {
		t.Errorf("body %q", denied.body)
	}
}

// The cost function's answer is what is spent; a bad cost is 400 and asks
// nothing.
func TestHTTPCost(t *testing.T) {
	w := newWeir(t)
	cost := func(r *http.Request) (int64, error) { return strconv.ParseInt(r.URL.Query().Get("n"), 10, 64) }
	srv, hits := app(t, w.client, middleware.Route{Limit: "mw"}, cost)
	if r := get(t, srv.URL+"?n=2", nil); r.status != 200 || !strings.HasPrefix(r.header.Get("RateLimit"), `"mw";r=1;`) {
		t.Fatalf("cost 2: %d %v", r.status, r.header)
	}
	for _, q := range []string{"?n=0", "?n=x"} {
		if r := get(t, srv.URL+q, nil); r.status != http.StatusBadRequest {
			t.Fatalf("%s: %d %s", q, r.status, r.body)
		}
	}
	if r := get(t, srv.URL+"?n=2", nil); r.status != http.StatusTooManyRequests || *hits != 1 {
		t.Fatalf("cost 2 of 1 left: %d, handler ran %d times", r.status, *hits)
	}
}

// When Weir cannot decide (nothing listens at its address), each policy
// does what it says.
func TestHTTPFailurePolicies(t *testing.T) {
	dead := deadWeir(t)
	t.Run("open", func(t *testing.T) {
		srv, hits := app(t, dead, middleware.Route{Limit: "mw", OnUnavailable: middleware.FailOpen}, nil)
		r := get(t, srv.URL, nil)
		if r.status != 200 || *hits != 1 || r.header.Get("RateLimit") != "" {
			t.Fatalf("open: %d %v, handler ran %d times", r.status, r.header, *hits)
		}
	})
	t.Run("closed", func(t *testing.T) {
		srv, hits := app(t, dead, middleware.Route{Limit: "mw", OnUnavailable: middleware.FailClosed}, nil)
		r := get(t, srv.URL, nil)
		if r.status != http.StatusServiceUnavailable || *hits != 0 || r.body != `{"error":"limiter_unavailable"}`+"\n" {
			t.Fatalf("closed: %d %q, handler ran %d times", r.status, r.body, *hits)
		}
	})
	t.Run("local", func(t *testing.T) {
		fb := bucket.Limit{Algorithm: bucket.TokenBucket, Capacity: 2, Rate: bucket.Rate{N: 1, Per: time.Hour}}
		srv, hits := app(t, dead, middleware.Route{Limit: "mw", OnUnavailable: middleware.FailLocal, Fallback: fb}, nil)
		for i := range 2 {
			r := get(t, srv.URL, nil)
			if r.status != 200 || !strings.HasPrefix(r.header.Get("RateLimit"), `"mw";r=`+strconv.Itoa(1-i)+`;`) {
				t.Fatalf("local %d: %d %v", i+1, r.status, r.header)
			}
		}
		r := get(t, srv.URL, nil)
		if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") == "" || *hits != 2 {
			t.Fatalf("local over its ceiling: %d %v, handler ran %d times", r.status, r.header, *hits)
		}
	})
}

// A route whose limit Weir does not know is a misconfiguration: 500, not
// the failure policy.
func TestHTTPUnknownLimit(t *testing.T) {
	w := newWeir(t)
	srv, hits := app(t, w.client, middleware.Route{Limit: "nope"}, nil)
	if r := get(t, srv.URL, nil); r.status != http.StatusInternalServerError || *hits != 0 {
		t.Fatalf("%d %s, handler ran %d times", r.status, r.body, *hits)
	}
}

func TestConfigErrors(t *testing.T) {
	var c *client.Client
	if _, err := middleware.NewHTTP(middleware.HTTPConfig{Taker: c}); err == nil || !strings.Contains(err.Error(), "Key is nil") {
		t.Fatalf("no key: %v", err)
	}
	if _, err := middleware.NewHTTP(middleware.HTTPConfig{Key: remoteHost}); err == nil {
		t.Fatal("no taker accepted")
	}
	for _, r := range []middleware.Route{{}, {Limit: "mw", OnUnavailable: middleware.FailLocal}, {Limit: "mw", OnUnavailable: 9}} {
		if err := r.Validate(); err == nil {
			t.Errorf("route %+v validated", r)
		}
	}
}
