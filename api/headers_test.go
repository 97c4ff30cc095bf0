package api

import (
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
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

// TestSetRateLimitHeadersIsHeaderSet: the direct map writes give what
// Header.Set gives, under canonical keys, for many results.
func TestSetRateLimitHeadersIsHeaderSet(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 500 {
		r := Result{
			Limit: []string{"export", "a\"b", "é", ""}[rng.IntN(4)], Allowed: rng.IntN(2) == 0,
			Remaining: rng.Int64N(1<<40) - 5, Capacity: rng.Int64N(1 << 40),
			RetryAfter: time.Duration(rng.Int64N(int64(time.Hour))), ResetAfter: time.Duration(rng.Int64N(int64(time.Hour))),
			Window: time.Duration(rng.Int64N(int64(time.Hour))) * time.Duration(rng.IntN(2)),
		}
		legacy := rng.IntN(2) == 0
		got := http.Header{}
		SetResultHeaders(got, r, legacy)
		want := http.Header{}
		t0 := resetSeconds(r)
		rem := max(0, r.Remaining)
		name := string(sfString(nil, r.Limit))
		policy := name + ";q=" + strconv.FormatInt(r.Capacity, 10)
		if w := secondsUp(r.Window); w > 0 {
			policy += ";w=" + strconv.FormatInt(w, 10)
		}
		want.Set("RateLimit-Policy", policy)
		want.Set("RateLimit", name+";r="+strconv.FormatInt(rem, 10)+";t="+strconv.FormatInt(t0, 10))
		if legacy {
			want.Set("X-RateLimit-Limit", strconv.FormatInt(r.Capacity, 10))
			want.Set("X-RateLimit-Remaining", strconv.FormatInt(rem, 10))
			want.Set("X-RateLimit-Reset", strconv.FormatInt(t0, 10))
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%+v legacy=%v:\n got %v\nwant %v", r, legacy, got, want)
		}
	}
}
