package httpapi

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/weir-rl/weir/internal/apitest"
)

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

type testServer struct {
	*httptest.Server
	f   *apitest.Decider
	log *syncBuffer
}

func newTestServer(t *testing.T, f *apitest.Decider, cfg Config) *testServer {
	t.Helper()
	metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = io.WriteString(w, "weir_up 1\n")
	})
	logs := &syncBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, nil))
	srv := httptest.NewServer(NewHandler(f, nil, cfg, metrics, logger))
	t.Cleanup(srv.Close)
	return &testServer{Server: srv, f: f, log: logs}
}

type reply struct {
	status int
	header http.Header
	body   string // without the trailing newline
}

// do sends one request and checks what every response shares: JSON content
// type and no caching (except /metrics).
func (s *testServer) do(t *testing.T, method, path string, body io.Reader) reply {
	t.Helper()
	req, err := http.NewRequest(method, s.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := s.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if path != "/metrics" {
		if got := resp.Header.Get("Content-Type"); got != "application/json" {
			t.Errorf("%s %s: Content-Type %q, want application/json", method, path, got)
		}
		if got := resp.Header.Get("Cache-Control"); got != "no-store" {
			t.Errorf("%s %s: Cache-Control %q, want no-store", method, path, got)
		}
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: strings.TrimSuffix(string(b), "\n")}
}

func (s *testServer) post(t *testing.T, path, body string) reply {
	t.Helper()
	return s.do(t, http.MethodPost, path, strings.NewReader(body))
}

func (s *testServer) get(t *testing.T, path string) reply {
	t.Helper()
	return s.do(t, http.MethodGet, path, nil)
}

func wantStatus(t *testing.T, r reply, status int, body string) {
	t.Helper()
	if r.status != status || r.body != body {
		t.Fatalf("got %d %s\nwant %d %s", r.status, r.body, status, body)
	}
}

// wantHeaders checks exact header values; "" means the header is absent.
func wantHeaders(t *testing.T, r reply, want map[string]string) {
	t.Helper()
	for k, v := range want {
		got, present := r.header[http.CanonicalHeaderKey(k)]
		switch {
		case v == "" && present:
			t.Errorf("header %s = %q, want absent", k, got)
		case v != "" && (len(got) != 1 || got[0] != v):
			t.Errorf("header %s = %q, want %q", k, got, v)
		}
	}
}

func jsonQuote(s string) string {
	return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"`
}
