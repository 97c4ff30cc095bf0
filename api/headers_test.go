package api

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestSFString(t *testing.T) {
	for in, want := range map[string]string{
		"export":       `"export"`,
		`a"b\c`:        `"a\"b\\c"`,
		"tab\there":    `"tab_here"`,
		"crlf\r\nX: y": `"crlf__X: y"`,
		"café":         `"caf__"`,
		"":             `""`,
	} {
		if got := string(sfString(nil, in)); got != want {
			t.Errorf("sfString(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestRounding(t *testing.T) {
	for _, tc := range []struct {
		d                time.Duration
		secs, msUp, msDn int64
	}{
		{-time.Second, 0, 0, 0},
		{0, 0, 0, 0},
		{1, 1, 1, 0},
		{time.Millisecond, 1, 1, 1},
		{1500 * time.Microsecond, 1, 2, 1},
		{time.Second, 1, 1000, 1000},
		{time.Second + 1, 2, 1001, 1000},
		{1<<63 - 1, 9223372037, 9223372036855, 9223372036854},
	} {
		if got := secondsUp(tc.d); got != tc.secs {
			t.Errorf("secondsUp(%v) = %d, want %d", tc.d, got, tc.secs)
		}
		if got := msUp(tc.d); got != tc.msUp {
			t.Errorf("msUp(%v) = %d, want %d", tc.d, got, tc.msUp)
		}
		if got := msDown(tc.d); got != tc.msDn {
			t.Errorf("msDown(%v) = %d, want %d", tc.d, got, tc.msDn)
		}
	}
}

// A result without a window omits w; negative remaining is clamped to 0.
func TestRateLimitHeadersEdges(t *testing.T) {
	h := http.Header{}
	SetResultHeaders(h, Result{Limit: "x", Allowed: true, Remaining: -2, Capacity: 1}, false)
	if got := h.Get("RateLimit-Policy"); got != `"x";q=1` {
		t.Errorf("policy %s", got)
	}
	if got := h.Get("RateLimit"); got != `"x";r=0;t=0` {
		t.Errorf("ratelimit %s", got)
	}
	if h.Get("X-RateLimit-Limit") != "" {
		t.Error("legacy header with legacy off")
	}
}

// SetHeaders picks the result /v1/take picks and adds Retry-After only to a
// denial; WriteDenied is /v1/check's 429 with any status.
func TestSetHeadersAndWriteDenied(t *testing.T) {
	h := http.Header{}
	SetHeaders(h, TakeResponse{Allowed: true, Results: []Result{exportAllowed()}}, false)
	if h.Get("RateLimit") != `"export";r=5;t=1` || h.Get("Retry-After") != "" || h.Get("X-RateLimit-Limit") != "" {
		t.Fatalf("allowed: %v", h)
	}
	other := exportAllowed()
	other.Limit, other.Remaining = "other", 9
	h = http.Header{}
	SetHeaders(h, TakeResponse{RetryAfter: 1500 * time.Millisecond, Results: []Result{other, exportDenied()}}, true)
	if h.Get("RateLimit") != `"export";r=0;t=1` || h.Get("Retry-After") != "2" || h.Get("X-RateLimit-Remaining") != "0" {
		t.Fatalf("denied: %v", h)
	}
	SetHeaders(h, TakeResponse{}, true) // no results: nothing to say, nothing changed
	if h.Get("Retry-After") != "2" {
		t.Fatal("an empty response changed the headers")
	}
	rec := httptest.NewRecorder()
	WriteDenied(rec, http.StatusForbidden, TakeResponse{RetryAfter: 500 * time.Millisecond, Results: []Result{exportDenied()}}, true)
	if rec.Code != 403 || rec.Body.String() != `{"error":"rate_limit_exceeded","limit":"export","retry_after_ms":500}`+"\n" ||
		rec.Header().Get("Retry-After") != "1" || rec.Header().Get("Cache-Control") != "no-store" {
		t.Fatalf("WriteDenied: %d %v %q", rec.Code, rec.Header(), rec.Body.String())
	}
}
