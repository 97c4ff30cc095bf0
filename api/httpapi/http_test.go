package httpapi

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/internal/apitest"
)

func TestTakeAllowed(t *testing.T) {
	s := newTestServer(t, &apitest.Decider{}, legacyConfig())
	r := s.post(t, "/v1/take", `{"checks":[{"limit":"export","key":"tenant:acme"},{"limit":"search","key":"tenant:acme","cost":4}],"headers":true}`)
	wantStatus(t, r, 200, `{"allowed":true,"retry_after_ms":0,"rules_version":3,"results":[`+
		`{"limit":"export","allowed":true,"remaining":5,"capacity":6,"retry_after_ms":0,"reset_after_ms":500,"source":"owner"},`+
		`{"limit":"search","allowed":true,"remaining":5,"capacity":6,"retry_after_ms":0,"reset_after_ms":500,"source":"owner"}]}`)
	got := s.f.LastTake(t)
	want := []api.Check{{Limit: "export", Key: "tenant:acme", Cost: 1}, {Limit: "search", Key: "tenant:acme", Cost: 4}}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("Decider got %+v, want %+v", got, want)
	}
	wantHeaders(t, r, map[string]string{
		"RateLimit-Policy": `"export";q=6;w=3`, "RateLimit": `"export";r=5;t=1`,
		"X-RateLimit-Limit": "6", "X-RateLimit-Remaining": "5", "X-RateLimit-Reset": "1",
		"Retry-After": "",
	})
}

// A denied take is still 200 (a decision was made); it carries the headers
// of the first denied check and the body of docs/architecture.md §5.1.
func TestTakeDenied(t *testing.T) {
	f := &apitest.Decider{TakeFn: func(_ context.Context, checks []api.Check) (api.TakeResponse, error) {
		ok := apitest.ExportAllowed()
		ok.Limit = "search"
		ok.Remaining = 0
		ok.Source = api.SourceFallback
		return api.TakeResponse{
			Allowed: false, RetryAfter: 500 * time.Millisecond, RulesVersion: 3,
			Results: []api.Result{ok, apitest.ExportDenied()},
		}, nil
	}}
	s := newTestServer(t, f, legacyConfig())
	r := s.post(t, "/v1/take", `{"checks":[{"limit":"search","key":"k"},{"limit":"export","key":"tenant:acme","cost":1}],"headers":true}`)
	wantStatus(t, r, 200, `{"allowed":false,"retry_after_ms":500,"rules_version":3,"results":[`+
		`{"limit":"search","allowed":true,"remaining":0,"capacity":6,"retry_after_ms":0,"reset_after_ms":500,"source":"fallback"},`+
		`{"limit":"export","allowed":false,"remaining":0,"capacity":6,"retry_after_ms":500,"reset_after_ms":3000,"source":"owner"}]}`)
	wantHeaders(t, r, map[string]string{
		"RateLimit-Policy": `"export";q=6;w=3`, "RateLimit": `"export";r=0;t=1`,
		"X-RateLimit-Limit": "6", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "1",
		"Retry-After": "",
	})
}

// A take that does not ask for the rate-limit fields gets its answer in
// the body alone, allowed or denied, even with the legacy trio on; every
// JSON answer still says it must not be stored.
func TestTakeHeadersOnlyWhenAsked(t *testing.T) {
	for _, fn := range []func(context.Context, []api.Check) (api.TakeResponse, error){nil, apitest.DenyExport} {
		s := newTestServer(t, &apitest.Decider{TakeFn: fn}, legacyConfig())
		for _, body := range []string{`{"checks":[{"limit":"export","key":"k"}]}`, `{"checks":[{"limit":"export","key":"k"}],"headers":false}`} {
			r := s.post(t, "/v1/take", body)
			if r.status != 200 {
				t.Fatalf("status %d %s", r.status, r.body)
			}
			wantHeaders(t, r, map[string]string{
				"RateLimit": "", "RateLimit-Policy": "", "Retry-After": "",
				"X-RateLimit-Limit": "", "X-RateLimit-Remaining": "", "X-RateLimit-Reset": "",
				"Cache-Control": "no-store", "Content-Type": "application/json",
			})
		}
	}
}

// With every check allowed, the headers describe the one with least left.
func TestTakeHeadersMostConstraining(t *testing.T) {
	f := &apitest.Decider{TakeFn: func(_ context.Context, checks []api.Check) (api.TakeResponse, error) {
		a := api.Result{Limit: "a", Allowed: true, Remaining: 9, Capacity: 10, ResetAfter: time.Second, Window: time.Minute}
		b := api.Result{Limit: "b", Allowed: true, Remaining: 2, Capacity: 100, ResetAfter: 1500 * time.Millisecond, Window: 90 * time.Second}
		c := api.Result{Limit: "c", Allowed: true, Remaining: 2, Capacity: 7}
		return api.TakeResponse{Allowed: true, Results: []api.Result{a, b, c}}, nil
	}}
	s := newTestServer(t, f, legacyConfig())
	r := s.post(t, "/v1/take", `{"checks":[{"limit":"a","key":"k"},{"limit":"b","key":"k"},{"limit":"c","key":"k"}],"headers":true}`)
	if r.status != 200 {
		t.Fatalf("status %d %s", r.status, r.body)
	}
	wantHeaders(t, r, map[string]string{
		"RateLimit-Policy": `"b";q=100;w=90`, "RateLimit": `"b";r=2;t=2`,
		"X-RateLimit-Limit": "100", "X-RateLimit-Remaining": "2", "X-RateLimit-Reset": "2",
	})
}

func TestCheckAllowed(t *testing.T) {
	s := newTestServer(t, &apitest.Decider{}, legacyConfig())
	r := s.get(t, "/v1/check?limit=export&key=tenant%3Aacme")
	wantStatus(t, r, 200, `{"limit":"export","allowed":true,"remaining":5,"capacity":6,"retry_after_ms":0,"reset_after_ms":500,"source":"owner"}`)
	wantHeaders(t, r, map[string]string{
		"RateLimit-Policy": `"export";q=6;w=3`, "RateLimit": `"export";r=5;t=1`,
		"X-RateLimit-Limit": "6", "X-RateLimit-Remaining": "5", "X-RateLimit-Reset": "1",
		"Retry-After": "",
	})
	if got := s.f.LastTake(t); len(got) != 1 || got[0] != (api.Check{Limit: "export", Key: "tenant:acme", Cost: 1}) {
		t.Fatalf("Decider got %+v", got)
	}
}

func TestCheckDenied(t *testing.T) {
	s := newTestServer(t, &apitest.Decider{TakeFn: apitest.DenyExport}, legacyConfig())
	r := s.get(t, "/v1/check?limit=export&key=tenant:secret-acme&cost=2")
	wantStatus(t, r, 429, `{"error":"rate_limit_exceeded","limit":"export","retry_after_ms":500}`)
	wantHeaders(t, r, map[string]string{
		"Retry-After":           "1",
		"Cache-Control":         "no-store",
		"RateLimit-Policy":      `"export";q=6;w=3`,
		"RateLimit":             `"export";r=0;t=1`,
		"X-RateLimit-Limit":     "6",
		"X-RateLimit-Remaining": "0",
		"X-RateLimit-Reset":     "1",
	})
	for k, v := range r.header {
		if strings.Contains(strings.Join(v, ","), "secret-acme") {
			t.Errorf("header %s echoes the key", k)
		}
	}
	if strings.Contains(r.body, "secret-acme") {
		t.Error("body echoes the key")
	}
	if got := s.f.LastTake(t); got[0].Cost != 2 {
		t.Fatalf("cost %d, want 2", got[0].Cost)
	}
}

// Retry-After and t round up to whole seconds and are never 0 on a denial.
func TestCheckDeniedRounding(t *testing.T) {
	for _, tc := range []struct {
		retry time.Duration
		want  string
	}{{time.Nanosecond, "1"}, {0, "1"}, {time.Second, "1"}, {time.Second + time.Millisecond, "2"}, {59500 * time.Millisecond, "60"}} {
		f := &apitest.Decider{TakeFn: func(context.Context, []api.Check) (api.TakeResponse, error) {
			r := apitest.ExportDenied()
			r.RetryAfter = tc.retry
			return api.TakeResponse{RetryAfter: tc.retry, Results: []api.Result{r}}, nil
		}}
		s := newTestServer(t, f, legacyConfig())
		r := s.get(t, "/v1/check?limit=export&key=k")
		if r.status != 429 {
			t.Fatalf("status %d", r.status)
		}
		wantHeaders(t, r, map[string]string{"Retry-After": tc.want, "RateLimit": `"export";r=0;t=` + tc.want, "X-RateLimit-Reset": tc.want})
	}
}

// legacyConfig is DefaultConfig with the legacy X-RateLimit trio on.
func legacyConfig() Config {
	cfg := DefaultConfig()
	cfg.LegacyHeaders = true
	return cfg
}

// The legacy trio is off unless asked for, on both endpoints.
func TestLegacyHeadersOffByDefault(t *testing.T) {
	s := newTestServer(t, &apitest.Decider{TakeFn: apitest.DenyExport}, DefaultConfig())
	none := map[string]string{"X-RateLimit-Limit": "", "X-RateLimit-Remaining": "", "X-RateLimit-Reset": ""}
	r := s.get(t, "/v1/check?limit=export&key=k")
	wantHeaders(t, r, map[string]string{"Retry-After": "1", "RateLimit": `"export";r=0;t=1`})
	wantHeaders(t, r, none)
	r = s.post(t, "/v1/take", `{"checks":[{"limit":"export","key":"k"}],"headers":true}`)
	wantHeaders(t, r, map[string]string{"RateLimit": `"export";r=0;t=1`})
	wantHeaders(t, r, none)
}

func TestDeciderErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		err    error
		status int
		body   string
	}{
		{"invalid", api.Errorf(api.CodeInvalid, "unknown limit %q", "nope"), 400, `{"error":"invalid_request","detail":"unknown limit \"nope\""}`},
		{"unavailable", api.Errorf(api.CodeUnavailable, "owner unreachable"), 503, `{"error":"limiter_unavailable","detail":"owner unreachable"}`},
		{"overloaded", api.Errorf(api.CodeOverloaded, "bucket cap"), 503, `{"error":"limiter_overloaded"}`},
		{"wrapped", errors.Join(errors.New("ctx"), api.Errorf(api.CodeUnavailable, "x")), 503, `{"error":"limiter_unavailable","detail":"x"}`},
		{"deadline", context.DeadlineExceeded, 503, `{"error":"limiter_unavailable","detail":"deadline exceeded"}`},
		{"other", errors.New("boom"), 500, `{"error":"internal_error"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &apitest.Decider{TakeFn: func(context.Context, []api.Check) (api.TakeResponse, error) { return api.TakeResponse{}, tc.err }}
			s := newTestServer(t, f, DefaultConfig())
			wantStatus(t, s.get(t, "/v1/check?limit=export&key=k"), tc.status, tc.body)
			r := s.post(t, "/v1/take", `{"checks":[{"limit":"export","key":"k"}],"headers":true}`)
			wantStatus(t, r, tc.status, tc.body)
			wantHeaders(t, r, map[string]string{"RateLimit": "", "Retry-After": ""})
		})
	}
}

func TestTakeBadInput(t *testing.T) {
	key513 := strings.Repeat("k", 513)
	for _, tc := range []struct{ name, body, detail string }{
		{"empty body", ``, "request body is empty"},
		{"malformed", `{"checks":[`, "malformed JSON: unexpected end of input"},
		{"syntax", `{"checks":[}`, "malformed JSON at byte 12"},
		{"not an object", `[1]`, "request body must be a JSON object"},
		{"null", `null`, "checks is empty"},
		{"missing checks", `{}`, "checks is empty"},
		{"empty checks", `{"checks":[]}`, "checks is empty"},
		{"cost 0", `{"checks":[{"limit":"export","key":"k","cost":0}]}`, "checks[0].cost must be a positive integer"},
		{"cost negative", `{"checks":[{"limit":"export","key":"k"},{"limit":"export","key":"k","cost":-1}]}`, "checks[1].cost must be a positive integer"},
		{"cost fraction", `{"checks":[{"limit":"export","key":"k","cost":1.5}]}`, "checks.cost: want an integer, got number 1.5"},
		{"cost 1.0", `{"checks":[{"limit":"export","key":"k","cost":1.0}]}`, "checks.cost: want an integer, got number 1.0"},
		{"cost exponent", `{"checks":[{"limit":"export","key":"k","cost":1e3}]}`, "checks.cost: want an integer, got number 1e3"},
		{"cost string", `{"checks":[{"limit":"export","key":"k","cost":"1"}]}`, "checks.cost: want an integer, got string"},
		{"cost overflow", `{"checks":[{"limit":"export","key":"k","cost":9223372036854775808}]}`, "checks.cost: want an integer, got number 9223372036854775808"},
		{"empty key", `{"checks":[{"limit":"export","key":""}]}`, "checks[0].key is empty"},
		{"missing key", `{"checks":[{"limit":"export"}]}`, "checks[0].key is empty"},
		{"empty limit", `{"checks":[{"key":"k"}]}`, "checks[0].limit is empty"},
		{"key 513 bytes", `{"checks":[{"limit":"export","key":"` + key513 + `"}]}`, "checks[0].key is 513 bytes, over the 512-byte maximum"},
		{"limit 513 bytes", `{"checks":[{"limit":"` + key513 + `","key":"k"}]}`, "checks[0].limit is 513 bytes, over the 512-byte maximum"},
		{"unknown field", `{"checks":[{"limit":"export","key":"k","costs":5}]}`, `unknown field "costs"`},
		{"trailing data", `{"checks":[{"limit":"export","key":"k"}]} {}`, "trailing data after the JSON value"},
		// Field names match exactly and once: no case folding, no last-wins.
		{"duplicate key", `{"checks":[{"limit":"export","key":"tenant:acme:1","key":"tenant:evil:1"}]}`, `field "key" is given twice`},
		{"duplicate checks", `{"checks":[{"limit":"export","key":"a"}],"checks":[{"limit":"export","key":"b"}]}`, `field "checks" is given twice`},
		{"upper-case name", `{"checks":[{"limit":"export","KEY":"k"}]}`, `unknown field "KEY" (field names are matched exactly, in lower case)`},
		{"case twin after the name", `{"checks":[{"limit":"export","key":"a","Key":"b"}]}`, `unknown field "Key" (field names are matched exactly, in lower case)`},
		{"Kelvin sign", `{"checks":[{"limit":"export","Key":"k"}]}`, "unknown field \"\u212aey\" (field names are matched exactly, in lower case)"},
		{"key number", `{"checks":[{"limit":"export","key":5}]}`, "checks.key: want a string, got number"},
		{"too many checks", `{"checks":[` + strings.Repeat(`{"limit":"a","key":"k"},`, 100) + `{"limit":"a","key":"k"}]}`, "checks has 101 entries, over the 100 maximum"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestServer(t, &apitest.Decider{}, DefaultConfig())
			r := s.post(t, "/v1/take", tc.body)
			wantStatus(t, r, 400, `{"error":"invalid_request","detail":`+jsonQuote(tc.detail)+`}`)
			if n := s.f.Calls(); n != 0 {
				t.Fatalf("Decider called %d times", n)
			}
		})
	}
}

// The bounds are inclusive: a 512-byte key and 100 checks reach the Decider.
func TestTakeAtBounds(t *testing.T) {
	s := newTestServer(t, &apitest.Decider{}, DefaultConfig())
	key := strings.Repeat("k", 512)
	body := `{"checks":[` + strings.Repeat(`{"limit":"a","key":"`+key+`"},`, 99) + `{"limit":"a","key":"` + key + `","cost":null}]}`
	if r := s.post(t, "/v1/take", body); r.status != 200 {
		t.Fatalf("status %d %s", r.status, r.body)
	}
	if got := s.f.LastTake(t); len(got) != 100 || got[99].Cost != 1 || got[99].Key != key {
		t.Fatalf("Decider got %d checks", len(got))
	}
}

func TestCheckBadInput(t *testing.T) {
	for _, tc := range []struct{ name, query, detail string }{
		{"no query", "", "limit is missing"},
		{"missing key", "limit=export", "key is missing"},
		{"empty key", "limit=export&key=", "key is empty"},
		{"duplicate key", "limit=export&key=a&key=b", "key is given 2 times"},
		{"cost 0", "limit=export&key=k&cost=0", "cost must be a positive integer"},
		{"cost negative", "limit=export&key=k&cost=-3", "cost must be a positive integer"},
		{"cost fraction", "limit=export&key=k&cost=1.5", "cost must be a positive integer"},
		{"cost exponent", "limit=export&key=k&cost=1e3", "cost must be a positive integer"},
		{"cost word", "limit=export&key=k&cost=one", "cost must be a positive integer"},
		{"cost empty", "limit=export&key=k&cost=", "cost must be a positive integer"},
		{"key 513 bytes", "limit=export&key=" + strings.Repeat("k", 513), "key is 513 bytes, over the 512-byte maximum"},
		{"key not UTF-8", "limit=export&key=%FF", "key is not valid UTF-8"},
		{"bad escape", "limit=export&key=%zz", "malformed query string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestServer(t, &apitest.Decider{}, DefaultConfig())
			r := s.get(t, "/v1/check?"+tc.query)
			wantStatus(t, r, 400, `{"error":"invalid_request","detail":`+jsonQuote(tc.detail)+`}`)
			if n := s.f.Calls(); n != 0 {
				t.Fatalf("Decider called %d times", n)
			}
		})
	}
}

func TestBodyTooLarge(t *testing.T) {
	const limit = 1 << 20
	// A valid take padded with spaces to exactly n bytes.
	padded := func(n int) string {
		b := `{"checks":[{"limit":"export","key":"k"}]}`
		return b + strings.Repeat(" ", n-len(b))
	}
	s := newTestServer(t, &apitest.Decider{}, DefaultConfig())

	if r := s.post(t, "/v1/take", padded(limit)); r.status != 200 {
		t.Fatalf("a body of exactly 1 MiB: status %d %s", r.status, r.body)
	}
	before := s.f.Calls()
	// With Content-Length: refused before reading.
	wantStatus(t, s.post(t, "/v1/take", padded(limit+1)), 413, `{"error":"request_too_large"}`)
	// Chunked, no Content-Length: refused by the reader.
	wantStatus(t, s.do(t, http.MethodPost, "/v1/take", io.MultiReader(strings.NewReader(padded(limit+1)))), 413, `{"error":"request_too_large"}`)
	wantStatus(t, s.post(t, "/v1/leases", padded(limit+1)), 413, `{"error":"request_too_large"}`)
	wantStatus(t, s.post(t, "/v1/leases/l-1/renew", padded(limit+1)), 413, `{"error":"request_too_large"}`)
	if n := s.f.Calls(); n != before {
		t.Fatalf("Decider called %d times for oversized bodies", n-before)
	}

	cfg := DefaultConfig()
	cfg.MaxBodyBytes = 64
	small := newTestServer(t, &apitest.Decider{}, cfg)
	wantStatus(t, small.post(t, "/v1/take", padded(65)), 413, `{"error":"request_too_large"}`)
	if r := small.post(t, "/v1/take", padded(64)); r.status != 200 {
		t.Fatalf("64-byte body with MaxBodyBytes 64: %d", r.status)
	}
}

// TestBodyCutShort: a body that ends before its Content-Length (the
// caller went away mid-request) is a 400 and decides nothing.
func TestBodyCutShort(t *testing.T) {
	s := newTestServer(t, &apitest.Decider{}, DefaultConfig())
	conn, err := net.Dial("tcp", s.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	body := `{"checks":[{"limit":"export","key":"k"}]}`
	if _, err := fmt.Fprintf(conn, "POST /v1/take HTTP/1.1\r\nHost: weir\r\nContent-Length: %d\r\n\r\n%s", len(body)+10, body); err != nil {
		t.Fatal(err)
	}
	if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	const want = `{"error":"invalid_request","detail":"could not read the request body"}` + "\n"
	if resp.StatusCode != http.StatusBadRequest || string(got) != want {
		t.Fatalf("got %d %s, want 400 %s", resp.StatusCode, got, want)
	}
	if n := s.f.Calls(); n != 0 {
		t.Fatalf("Decider called %d times for a body cut short", n)
	}
}

// TestDeclaredLengthCostsNoMemory: a large Content-Length is not allocated
// before its bytes arrive, so headers alone cannot make the node hold a
// megabyte per connection.
func TestDeclaredLengthCostsNoMemory(t *testing.T) {
	h := NewHandler(&apitest.Decider{}, nil, DefaultConfig(), nil, nil)
	req := httptest.NewRequest(http.MethodPost, "/v1/take", strings.NewReader(`{"checks":[`))
	req.ContentLength = 1 << 20 // declared, never sent
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	runtime.ReadMemStats(&after)
	if rec.Code != http.StatusBadRequest {
		t.Fatalf("status %d %s, want 400", rec.Code, rec.Body)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 256<<10 {
		t.Fatalf("a request declaring 1 MiB and sending 11 bytes allocated %d bytes", n)
	}
}

func TestRoutes(t *testing.T) {
	f := &apitest.Decider{}
	s := newTestServer(t, f, DefaultConfig())
	for _, tc := range []struct {
		method, path string
		status       int
		allow        string
	}{
		{http.MethodGet, "/v1/take", 405, "POST"},
		{http.MethodPut, "/v1/check", 405, "GET, HEAD"},
		{http.MethodGet, "/v1/leases", 405, "POST"},
		{http.MethodGet, "/v1/leases/l-1", 405, "DELETE"},
		{http.MethodDelete, "/v1/leases/l-1/renew", 405, "POST"},
		{http.MethodPost, "/v1/cluster", 405, "GET, HEAD"},
		{http.MethodPost, "/healthz", 405, "GET, HEAD"},
		{http.MethodDelete, "/metrics", 405, "GET, HEAD"},
		{http.MethodGet, "/v2/take", 404, ""},
		{http.MethodGet, "/", 404, ""},
		{http.MethodDelete, "/v1/leases/", 404, ""},
	} {
		r := s.do(t, tc.method, tc.path, nil)
		if r.status != tc.status || r.header.Get("Allow") != tc.allow {
			t.Errorf("%s %s: %d Allow %q, want %d Allow %q", tc.method, tc.path, r.status, r.header.Get("Allow"), tc.status, tc.allow)
		}
		want := `{"error":"not_found","detail":"no such route"}`
		if tc.status == 405 {
			want = `{"error":"method_not_allowed","detail":"use ` + tc.allow + `"}`
		}
		if r.body != want {
			t.Errorf("%s %s: body %s, want %s", tc.method, tc.path, r.body, want)
		}
	}
	if n := f.Calls(); n != 0 {
		t.Fatalf("Decider called %d times", n)
	}

	wantStatus(t, s.get(t, "/healthz"), 200, `{"status":"ok"}`)
	wantStatus(t, s.get(t, "/readyz"), 200, `{"status":"ready"}`)
	f.NotReady = true
	wantStatus(t, s.get(t, "/readyz"), 503, `{"status":"not_ready","reason":"test: not ready"}`)
	wantStatus(t, s.get(t, "/metrics"), 200, "weir_up 1")

	// Without a metrics handler, /metrics is an ordinary unknown route.
	none := httptest.NewServer(NewHandler(f, nil, DefaultConfig(), nil, nil))
	defer none.Close()
	resp, err := none.Client().Get(none.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Fatalf("/metrics without handler: %d", resp.StatusCode)
	}
}

func TestCluster(t *testing.T) {
	s := newTestServer(t, &apitest.Decider{}, DefaultConfig())
	members := `"members":[{"name":"n1","addr":"10.0.0.1:7946","state":"alive","limits_version":3},` +
		`{"name":"n2","addr":"10.0.0.2:7946","state":"suspect","limits_version":3}]`
	wantStatus(t, s.get(t, "/v1/cluster"), 200, `{"node":"n1","epoch":7,`+members+`}`)
	wantStatus(t, s.get(t, "/v1/cluster?limit=export&key=tenant:acme"), 200, `{"node":"n1","epoch":7,`+members+`,"owner":"n2"}`)
	if got := s.f.Clusters; len(got) != 2 || got[0] != [2]string{"", ""} || got[1] != [2]string{"export", "tenant:acme"} {
		t.Fatalf("Cluster got %q", got)
	}
	wantStatus(t, s.get(t, "/v1/cluster?limit=export"), 400, `{"error":"invalid_request","detail":"key is empty"}`)
}

// A panicking Decider is a logged 500, not a dropped connection.
func TestDeciderPanic(t *testing.T) {
	f := &apitest.Decider{TakeFn: func(context.Context, []api.Check) (api.TakeResponse, error) { panic("decider bug") }}
	s := newTestServer(t, f, DefaultConfig())
	wantStatus(t, s.get(t, "/v1/check?limit=export&key=tenant:secret"), 500, `{"error":"internal_error"}`)
	logs := s.log.String()
	if !strings.Contains(logs, "decider bug") {
		t.Fatalf("panic not logged: %s", logs)
	}
	if strings.Contains(logs, "tenant:secret") {
		t.Fatalf("log echoes the key: %s", logs)
	}
}

// The decision routes, which (*handler).serve matches before the mux,
// reach the handler the mux would give them with the pattern the mux would
// set (the route a recovered panic is logged with), by any spelling of the
// path that decodes to theirs; HEAD on /v1/check is left to the mux, which
// gives it the GET route.
func TestDecisionRoutesAsTheMuxRoutesThem(t *testing.T) {
	f := &apitest.Decider{TakeFn: func(context.Context, []api.Check) (api.TakeResponse, error) { panic("decider bug") }}
	for _, c := range []struct {
		method, path, body, route string
	}{
		{http.MethodPost, "/v1/take", `{"checks":[{"limit":"export","key":"k"}]}`, "POST /v1/take"},
		{http.MethodPost, "/v1/ta%6Be", `{"checks":[{"limit":"export","key":"k"}]}`, "POST /v1/take"},
		{http.MethodGet, "/v1/check?limit=export&key=k", "", "GET /v1/check"},
		{http.MethodHead, "/v1/check?limit=export&key=k", "", "GET /v1/check"},
	} {
		s := newTestServer(t, f, DefaultConfig())
		r := s.do(t, c.method, c.path, strings.NewReader(c.body))
		if r.status != http.StatusInternalServerError {
			t.Errorf("%s %s: status %d, want 500", c.method, c.path, r.status)
		}
		if want := `route="` + c.route + `"`; !strings.Contains(s.log.String(), want) {
			t.Errorf("%s %s: log %q does not name %s", c.method, c.path, s.log.String(), want)
		}
	}
}

// A Decider that returns no result for a check is a 500, not an index panic.
func TestCheckNoResult(t *testing.T) {
	f := &apitest.Decider{TakeFn: func(context.Context, []api.Check) (api.TakeResponse, error) {
		return api.TakeResponse{Allowed: true}, nil
	}}
	s := newTestServer(t, f, DefaultConfig())
	wantStatus(t, s.get(t, "/v1/check?limit=export&key=k"), 500, `{"error":"internal_error"}`)
	r := s.post(t, "/v1/take", `{"checks":[{"limit":"export","key":"k"}],"headers":true}`)
	wantStatus(t, r, 200, `{"allowed":true,"retry_after_ms":0,"rules_version":0,"results":[]}`)
	wantHeaders(t, r, map[string]string{"RateLimit": "", "RateLimit-Policy": ""})
}

func TestHTTPConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	if err := (Config{}).Validate(); err != nil {
		t.Fatalf("zero config (all defaults): %v", err)
	}
	for _, c := range []Config{{MaxBodyBytes: -1}, {MaxKeyBytes: -1}, {MaxChecks: -1}} {
		if c.Validate() == nil {
			t.Errorf("%+v: no error", c)
		}
	}
}

func TestForgetMember(t *testing.T) {
	f := &apitest.Decider{}
	srv := httptest.NewServer(NewHandler(f, nil, DefaultConfig(), nil, nil))
	defer srv.Close()
	for _, tt := range []struct {
		name string
		want int
	}{{"n2", http.StatusNoContent}, {"ghost", http.StatusNotFound}, {"n1", http.StatusBadRequest}} {
		req, _ := http.NewRequest(http.MethodDelete, srv.URL+"/v1/cluster/members/"+tt.name, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tt.want {
			t.Errorf("forget %s: status %d, want %d", tt.name, resp.StatusCode, tt.want)
		}
	}
	if len(f.Forgotten) != 3 {
		t.Fatalf("decider saw %v", f.Forgotten)
	}
}
