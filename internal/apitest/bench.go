package apitest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// DiscardWriter is a reusable http.ResponseWriter for benchmarks of an
// HTTP handler: it keeps the header map and the status, so that a
// benchmark counts the handler's allocations and not a recorder's. Make
// one with a non-nil H, and Reset it before each request, as net/http's
// writer is new per request.
type DiscardWriter struct {
	H    http.Header
	Code int // the status written; 200 once a body is written without one
}

// Header implements http.ResponseWriter.
func (w *DiscardWriter) Header() http.Header { return w.H }

// WriteHeader implements http.ResponseWriter.
func (w *DiscardWriter) WriteHeader(code int) { w.Code = code }

// Write implements http.ResponseWriter, discarding p.
func (w *DiscardWriter) Write(p []byte) (int, error) {
	if w.Code == 0 {
		w.Code = http.StatusOK
	}
	return len(p), nil
}

// Reset readies w for the next request.
func (w *DiscardWriter) Reset() {
	clear(w.H)
	w.Code = 0
}

// BenchServe serves one POST of body to path through h per iteration of
// b, with one request (its body rewound) and one DiscardWriter reused, so
// that the figures are the handler's own; it fails b on any status but
// 200.
func BenchServe(b *testing.B, h http.Handler, path, body string) {
	b.Helper()
	rd := strings.NewReader(body)
	req := httptest.NewRequest(http.MethodPost, path, io.NopCloser(rd))
	req.ContentLength = int64(len(body))
	w := &DiscardWriter{H: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		rd.Reset(body)
		w.Reset()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatal(w.Code)
		}
	}
}

// PostOK posts body as JSON to url through c, reads the answer to its end
// and reports whether it was a 200; otherwise it fails b with what went
// wrong (b.Error, so a benchmark's RunParallel goroutines may call it, and
// return).
func PostOK(b *testing.B, c *http.Client, url, body string) bool {
	b.Helper()
	resp, err := c.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		b.Error(err)
		return false
	}
	_, err = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Error(resp.StatusCode, err)
		return false
	}
	return true
}
