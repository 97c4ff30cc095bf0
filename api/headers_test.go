package api

import (
	"net/http"
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
	setRateLimitHeaders(h, Result{Limit: "x", Allowed: true, Remaining: -2, Capacity: 1}, false)
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
