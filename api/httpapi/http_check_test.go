package httpapi

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/internal/apitest"
)

// getWith sends GET path with the given header lines (a name may repeat).
func (s *testServer) getWith(t *testing.T, path string, header http.Header) reply {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header = header
	resp, err := s.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: strings.TrimSuffix(string(b), "\n")}
}

// nginx's auth_request accepts only 2xx, 401 and 403: deny_status turns the
// 429 into one of those, with the same body and headers.
func TestCheckDenyStatus(t *testing.T) {
	for _, tc := range []struct {
		param  string
		status int
	}{{"", 429}, {"&deny_status=429", 429}, {"&deny_status=403", 403}, {"&deny_status=401", 401}} {
		s := newTestServer(t, &apitest.Decider{TakeFn: apitest.DenyExport}, legacyConfig())
		r := s.get(t, "/v1/check?limit=export&key=k"+tc.param)
		wantStatus(t, r, tc.status, `{"error":"rate_limit_exceeded","limit":"export","retry_after_ms":500}`)
		wantHeaders(t, r, map[string]string{
			"Retry-After": "1", "RateLimit": `"export";r=0;t=1`, "RateLimit-Policy": `"export";q=6;w=3`,
			"X-RateLimit-Remaining": "0",
		})
	}
	// An allowed check stays 200 whatever deny_status says.
	s := newTestServer(t, &apitest.Decider{}, DefaultConfig())
	wantStatus(t, s.get(t, "/v1/check?limit=export&key=k&deny_status=403"), 200,
		`{"limit":"export","allowed":true,"remaining":5,"capacity":6,"retry_after_ms":0,"reset_after_ms":500,"source":"owner"}`)
}

// key_header takes the key from a header the proxy sets: for
// X-Forwarded-For the last element, the address the proxy itself appended,
// so a client's own X-Forwarded-For cannot pick another bucket.
func TestCheckKeyHeader(t *testing.T) {
	for _, tc := range []struct {
		name   string
		query  string
		header http.Header
		key    string
	}{
		{"proxy set", "key_header=X-Forwarded-For", http.Header{"X-Forwarded-For": {"10.0.0.7"}}, "10.0.0.7"},
		{"client spoofed, proxy appended", "key_header=x-forwarded-for", http.Header{"X-Forwarded-For": {"1.2.3.4, 10.0.0.7"}}, "10.0.0.7"},
		{"two field lines", "key_header=X-Forwarded-For", http.Header{"X-Forwarded-For": {"1.2.3.4", "9.9.9.9,10.0.0.7"}}, "10.0.0.7"},
		{"identity header", "key_header=X-Auth-User", http.Header{"X-Auth-User": {" alice "}}, "alice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestServer(t, &apitest.Decider{}, DefaultConfig())
			if r := s.getWith(t, "/v1/check?limit=export&"+tc.query, tc.header); r.status != 200 {
				t.Fatalf("status %d %s", r.status, r.body)
			}
			if got := s.f.LastTake(t); got[0] != (api.Check{Limit: "export", Key: tc.key, Cost: 1}) {
				t.Fatalf("Decider got %+v, want key %q", got, tc.key)
			}
		})
	}
}

func TestCheckForwardAuthBadInput(t *testing.T) {
	for _, tc := range []struct {
		name, query string
		header      http.Header
		detail      string
	}{
		{"deny status 500", "limit=export&key=k&deny_status=500", nil, "deny_status must be 401, 403 or 429"},
		{"deny status empty", "limit=export&key=k&deny_status=", nil, "deny_status must be 401, 403 or 429"},
		{"deny status twice", "limit=export&key=k&deny_status=403&deny_status=401", nil, "deny_status is given 2 times"},
		{"key and key_header", "limit=export&key=k&key_header=X-Forwarded-For", http.Header{"X-Forwarded-For": {"10.0.0.7"}}, "key and key_header are both given; use one"},
		{"key_header empty", "limit=export&key_header=", nil, "key_header must name a request header"},
		{"header missing", "limit=export&key_header=X-Auth-User", nil, `header "X-Auth-User" named by key_header is missing`},
		{"identity twice", "limit=export&key_header=X-Auth-User", http.Header{"X-Auth-User": {"a", "b"}}, `header "X-Auth-User" named by key_header is given 2 times`},
		{"empty forwarded element", "limit=export&key_header=X-Forwarded-For", http.Header{"X-Forwarded-For": {"10.0.0.7, "}}, "key is empty"},
		{
			"the caller's credential", "limit=export&key_header=authorization",
			http.Header{"Authorization": {"Bearer secret"}},
			"key_header may not name Authorization: it carries a credential, which would become a bucket key (shown by /v1/cluster/hot)",
		},
		{
			"the token header", "limit=export&key_header=X-Weir-Token",
			http.Header{"X-Weir-Token": {"secret"}},
			"key_header may not name X-Weir-Token: it carries a credential, which would become a bucket key (shown by /v1/cluster/hot)",
		},
		{
			"a proxy credential", "limit=export&key_header=Proxy-Authorization",
			http.Header{"Proxy-Authorization": {"Basic eDp5"}},
			"key_header may not name Proxy-Authorization: it carries a credential, which would become a bucket key (shown by /v1/cluster/hot)",
		},
		{
			"cookies", "limit=export&key_header=Cookie",
			http.Header{"Cookie": {"session=secret"}},
			"key_header may not name Cookie: it carries a credential, which would become a bucket key (shown by /v1/cluster/hot)",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestServer(t, &apitest.Decider{}, DefaultConfig())
			r := s.getWith(t, "/v1/check?"+tc.query, tc.header)
			wantStatus(t, r, 400, `{"error":"invalid_request","detail":`+jsonQuote(tc.detail)+`}`)
			if n := s.f.Calls(); n != 0 {
				t.Fatalf("Decider called %d times", n)
			}
		})
	}
}
