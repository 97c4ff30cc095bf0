package node_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/weir-rl/weir/api/weirv1"
	"github.com/weir-rl/weir/internal/leakcheck"
	"github.com/weir-rl/weir/internal/testwait"
	"github.com/weir-rl/weir/node"
)

// The tests in this package are end-to-end: one real node on loopback
// listeners, talked to over HTTP and gRPC, deciding on an injected clock.

func TestMain(m *testing.M) { leakcheck.Main(m) }

// epoch is where every fake clock starts.
var epoch = time.Date(2030, time.January, 2, 3, 4, 5, 0, time.UTC)

// fakeClock is a mutex-guarded time that only moves when a test advances it.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: epoch} }

// Now returns the current fake time.
func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the fake time forward by d.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// testNode is a started node with an HTTP and a gRPC client for it.
type testNode struct {
	t     *testing.T
	n     *node.Node
	clock *fakeClock
	base  string // http://host:port
	hc    *http.Client
	conn  *grpc.ClientConn
	grpc  weirv1.LimiterClient
}

// startNode starts a node from node.LocalConfig (sweeping off, so the
// bucket count moves only with requests), after edit, on a fake clock.
// Everything it starts is stopped in t.Cleanup.
func startNode(t *testing.T, edit func(*node.Config)) *testNode {
	t.Helper()
	return startNodeAfter(t, edit, nil)
}

// startNodeAfter is startNode calling beforeStart (when not nil) between
// node.New and Start.
func startNodeAfter(t *testing.T, edit func(*node.Config), beforeStart func()) *testNode {
	t.Helper()
	cfg := node.LocalConfig()
	cfg.NodeName = "n1"
	cfg.SweepInterval = 0
	if edit != nil {
		edit(&cfg)
	}
	clock := newFakeClock()
	n, err := node.New(cfg, node.Deps{Clock: clock.Now})
	if err != nil {
		t.Fatalf("node.New: %v", err)
	}
	if beforeStart != nil {
		beforeStart()
	}
	if err := n.Start(context.Background()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	tr := &http.Transport{MaxIdleConns: 200, MaxIdleConnsPerHost: 200, MaxConnsPerHost: 64}
	tn := &testNode{
		t:     t,
		n:     n,
		clock: clock,
		base:  "http://" + n.HTTPAddr(),
		hc:    &http.Client{Transport: tr, Timeout: 20 * time.Second},
	}
	conn, err := grpc.NewClient(n.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("grpc.NewClient: %v", err)
	}
	tn.conn, tn.grpc = conn, weirv1.NewLimiterClient(conn)
	t.Cleanup(func() {
		_ = conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := n.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		tr.CloseIdleConnections()
	})
	return tn
}

// writeLimits writes a limits file into a fresh temporary directory and
// returns its path.
func writeLimits(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "limits.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// replaceFile swaps content in at path atomically (write aside, rename), so
// a file watcher never reads it half written.
func replaceFile(t *testing.T, path, content string) {
	t.Helper()
	tmp, err := os.CreateTemp(t.TempDir(), "limits-*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tmp.WriteString(content); err != nil {
		t.Fatal(err)
	}
	if err := tmp.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		t.Fatal(err)
	}
}

// response is a finished HTTP exchange.
type response struct {
	status int
	header http.Header
	body   string
}

// do sends one request and reads the whole answer.
func (tn *testNode) do(method, path, body string) response {
	tn.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, tn.base+path, rd)
	if err != nil {
		tn.t.Fatal(err)
	}
	return tn.send(req)
}

func (tn *testNode) send(req *http.Request) response {
	tn.t.Helper()
	resp, err := tn.hc.Do(req)
	if err != nil {
		tn.t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		tn.t.Fatalf("%s %s: read body: %v", req.Method, req.URL.Path, err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

// post sends a POST with a JSON body.
func (tn *testNode) post(path, body string) response {
	tn.t.Helper()
	return tn.do(http.MethodPost, path, body)
}

// takeJSON is the wire shape of a POST /v1/take answer.
type takeJSON struct {
	Allowed      bool         `json:"allowed"`
	RetryAfterMs int64        `json:"retry_after_ms"`
	RulesVersion int64        `json:"rules_version"`
	Results      []resultJSON `json:"results"`
}

type resultJSON struct {
	Limit        string `json:"limit"`
	Allowed      bool   `json:"allowed"`
	Remaining    int64  `json:"remaining"`
	Capacity     int64  `json:"capacity"`
	RetryAfterMs int64  `json:"retry_after_ms"`
	ResetAfterMs int64  `json:"reset_after_ms"`
	Source       string `json:"source"`
}

// checkJSON is one check of a take request.
type checkJSON struct {
	Limit string `json:"limit"`
	Key   string `json:"key"`
	Cost  int64  `json:"cost"`
}

// takeBody encodes a take request.
func takeBody(checks ...checkJSON) string {
	b, err := json.Marshal(map[string]any{"checks": checks})
	if err != nil {
		panic(err)
	}
	return string(b)
}

// take posts checks and requires a 200 decision.
func (tn *testNode) take(checks ...checkJSON) takeJSON {
	tn.t.Helper()
	r := tn.post("/v1/take", takeBody(checks...))
	if r.status != http.StatusOK {
		tn.t.Fatalf("POST /v1/take = %d %s, want 200", r.status, r.body)
	}
	var out takeJSON
	decodeStrict(tn.t, r.body, &out)
	return out
}

// decodeStrict decodes body into v, failing on unknown fields.
func decodeStrict(t *testing.T, body string, v any) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("decode %q: %v", body, err)
	}
}

// metrics scrapes /metrics.
func (tn *testNode) metrics() string {
	tn.t.Helper()
	r := tn.do(http.MethodGet, "/metrics", "")
	if r.status != http.StatusOK {
		tn.t.Fatalf("GET /metrics = %d", r.status)
	}
	return r.body
}

// metricValue returns the value of one series (name and labels exactly as
// exposed, labels sorted by name) in a Prometheus text scrape, and whether
// the series was present.
func metricValue(scrape, series string) (float64, bool) {
	sc := bufio.NewScanner(strings.NewReader(scrape))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, series+" ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
		if err != nil {
			return 0, false
		}
		return v, true
	}
	return 0, false
}

// metric scrapes /metrics and returns one series' value; a missing series
// is 0 (a counter vector child not yet created).
func (tn *testNode) metric(series string) float64 {
	tn.t.Helper()
	v, _ := metricValue(tn.metrics(), series)
	return v
}

// waitFor polls cond every 5 ms until it is true or d passes
// (testwait.Until).
func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	testwait.Until(t, d, 5*time.Millisecond, what, cond)
}

func jsonEqual(t *testing.T, got, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		t.Fatalf("got is not JSON: %q: %v", got, err)
	}

	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("want is not JSON: %q: %v", want, err)
	}
	gb, _ := json.Marshal(g)
	wb, _ := json.Marshal(w)
	if !bytes.Equal(gb, wb) {
		t.Fatalf("body = %s\nwant   %s", got, want)
	}
}

func stringsReader(s string) io.Reader { return strings.NewReader(s) }

func readAll(resp *http.Response) (string, error) {
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}
