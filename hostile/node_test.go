package hostile

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/weir-rl/weir/api/weirv1"
	"github.com/weir-rl/weir/auth"
	"github.com/weir-rl/weir/internal/weirbuild"
)

// scale is how hard each case pushes.
type scale struct {
	idleConns  int           // idle TCP connections held at once
	slowConns  int           // slowloris connections (headers, then bodies)
	keys       int           // distinct keys in the burst
	maxBuckets int           // the node's --max-buckets
	storm      time.Duration // length of the connect/disconnect storm
	badTokens  int           // requests with bad tokens
	streamMsgs int           // requests sent on a stream that never reads
	respConns  int           // unauthenticated RESP connections with half-sent commands
	junk       int           // gossip packets without the cluster secret
	rssBound   int64         // bytes of resident memory the node must stay under
}

// short is the form inside make test; long is make hostile.
var (
	shortScale = scale{
		idleConns: 10_000, slowConns: 300, keys: 100_000, maxBuckets: 5_000, storm: 2 * time.Second,
		badTokens: 5_000, streamMsgs: 20_000, respConns: 128, junk: 500, rssBound: 192 << 20,
	}
	longScale = scale{
		idleConns: 10_000, slowConns: 2_000, keys: 1_000_000, maxBuckets: 10_000, storm: 15 * time.Second,
		badTokens: 100_000, streamMsgs: 200_000, respConns: 1024, junk: 10_000, rssBound: 192 << 20,
	}
)

func currentScale() scale {
	if os.Getenv("WEIR_HOSTILE") == "long" {
		return longScale
	}
	return shortScale
}

// The suite's timings: the node's header and body read timeouts, and the
// canary's deadline.
const (
	readHeaderTimeout = time.Second
	readTimeout       = 2 * time.Second
	canaryDeadline    = 2 * time.Second
	canaryToken       = "canary-0123456789abcdef0123456789abcdef"
)

// binPath is the weir binary built once by TestMain for every test.
var binPath string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "weir-hostile-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binPath = filepath.Join(dir, "weir")
	if err := weirbuild.Build(binPath, "../cmd/weir", ""); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

const limitsYAML = `version: 1
limits:
  - name: canary           # never runs out, and, always in debt, is never evicted at the cap
    capacity: 1000000
    rate: 100/h
  - name: export           # slow refill: a spent bucket stays in debt and cannot be evicted
    capacity: 10
    rate: 1/h
  - name: open-db
    kind: concurrency
    permits: 4
    lease_ttl: 30s
`

// node is one running weir process.
type node struct {
	t      *testing.T
	cmd    *exec.Cmd
	http   string // host:port
	grpc   string
	exited chan error
	hc     *http.Client
	dir    string // holds limits.yaml and tokens.yaml

	mu  sync.Mutex // guards log
	log bytes.Buffer
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startNode runs weir serve with the suite's limits and tokens files and
// the given extra flags, and waits until it answers /readyz.
func startNode(t *testing.T, sc scale, extra ...string) *node {
	t.Helper()
	dir := t.TempDir()
	limits := filepath.Join(dir, "limits.yaml")
	tokens := filepath.Join(dir, "tokens.yaml")
	if err := os.WriteFile(limits, []byte(limitsYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	tf := "version: 1\ntokens:\n  - {name: canary, sha256: " + auth.HashToken(canaryToken) + ", scopes: [decide, read]}\n"
	if err := os.WriteFile(tokens, []byte(tf), 0o600); err != nil {
		t.Fatal(err)
	}
	n := &node{t: t, http: freeAddr(t), grpc: freeAddr(t), exited: make(chan error, 1), dir: dir}
	args := append([]string{
		"serve", "--cluster=false", "--node-name", "hostile",
		"--http-addr", n.http, "--grpc-addr", n.grpc, "--limits", limits, "--tokens-file", tokens,
		"--max-buckets", strconv.Itoa(sc.maxBuckets),
		"--http-read-header-timeout", readHeaderTimeout.String(), "--http-read-timeout", readTimeout.String(),
		"--log-format", "json",
	}, extra...)
	n.cmd = exec.Command(binPath, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "WEIR_") {
			n.cmd.Env = append(n.cmd.Env, kv)
		}
	}
	n.cmd.Stderr = (*lockedWriter)(n)
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { n.exited <- n.cmd.Wait() }()
	tr := &http.Transport{MaxIdleConnsPerHost: 8}
	n.hc = &http.Client{Transport: tr, Timeout: canaryDeadline}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		_ = n.cmd.Process.Kill()
		<-n.exited
		if t.Failed() {
			n.mu.Lock()
			t.Logf("node log:\n%s", n.log.String())
			n.mu.Unlock()
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := n.hc.Get("http://" + n.http + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("node not ready within 20s: %v", err)
		}
		select {
		case err := <-n.exited:
			n.exited <- err
			t.Fatalf("node exited before it was ready: %v", err)
		case <-time.After(20 * time.Millisecond): // polling for readiness
		}
	}
	return n
}

type lockedWriter node

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.log.Len() > 1<<20 {
		return len(p), nil
	}
	return w.log.Write(p)
}

// openFDs counts the node's open file descriptors.
func (n *node) openFDs() int {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", n.cmd.Process.Pid))
	if err != nil {
		n.t.Fatalf("read /proc fd: %v", err)
	}
	return len(ents)
}

// metrics scrapes /metrics (open by default) and returns the series.
func (n *node) metrics() map[string]float64 {
	n.t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get("http://" + n.http + "/metrics")
	if err != nil {
		n.t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err == nil {
			out[line[:i]] = v
		}
	}
	return out
}

// sum adds every series whose name (with labels) starts with prefix.
func sum(m map[string]float64, prefix string) float64 {
	var s float64
	for k, v := range m {
		if strings.HasPrefix(k, prefix) {
			s += v
		}
	}
	return s
}

// canary asks for decisions over HTTP and gRPC every 20 ms until stopped,
// each under canaryDeadline, and records failures and the slowest answer.
type canary struct {
	n       *node
	stop    chan struct{}
	done    chan struct{}
	warm    chan struct{} // closed once HTTP and gRPC have each answered
	ok      atomic.Int64
	fails   atomic.Int64
	slowest atomic.Int64 // nanoseconds
	mu      sync.Mutex
	lastErr error
}

func (n *node) startCanary(t *testing.T) *canary {
	t.Helper()
	conn, err := grpc.NewClient(n.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	cl := weirv1.NewLimiterClient(conn)
	c := &canary{n: n, stop: make(chan struct{}), done: make(chan struct{}), warm: make(chan struct{})}
	body := `{"checks":[{"limit":"canary","key":"canary","cost":1}]}`
	go func() {
		defer close(c.done)
		defer conn.Close()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		var answered [2]bool // by HTTP, by gRPC
		for i := 0; ; i++ {
			select {
			case <-c.stop:
				return
			case <-tick.C:
			}
			start := time.Now()
			var err error
			if i%2 == 0 {
				req, _ := http.NewRequest(http.MethodPost, "http://"+n.http+"/v1/take", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+canaryToken)
				var resp *http.Response
				if resp, err = n.hc.Do(req); err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					_ = resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						err = fmt.Errorf("HTTP %d", resp.StatusCode)
					}
				}
			} else {
				ctx, cancel := context.WithTimeout(context.Background(), canaryDeadline)
				ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+canaryToken)
				_, err = cl.Take(ctx, &weirv1.TakeRequest{Checks: []*weirv1.Check{{Limit: "canary", Key: "canary", Cost: 1}}})
				cancel()
			}
			d := time.Since(start)
			if err != nil || d > canaryDeadline {
				c.fails.Add(1)
				c.mu.Lock()
				c.lastErr = fmt.Errorf("after %v: %w", d, err)
				c.mu.Unlock()
				continue
			}
			c.ok.Add(1)
			if !answered[i%2] {
				answered[i%2] = true
				if answered[0] && answered[1] {
					close(c.warm)
				}
			}
			for {
				s := c.slowest.Load()
				if int64(d) <= s || c.slowest.CompareAndSwap(s, int64(d)) {
					break
				}
			}
		}
	}()
	return c
}

// finish stops the canary and fails the test unless every answer came
// within the deadline.
func (c *canary) finish(t *testing.T) {
	t.Helper()
	close(c.stop)
	<-c.done
	c.mu.Lock()
	defer c.mu.Unlock()
	t.Logf("canary: %d answers, slowest %v, %d failures", c.ok.Load(), time.Duration(c.slowest.Load()), c.fails.Load())
	if c.fails.Load() > 0 {
		t.Errorf("canary: %d of %d requests failed or missed the %v deadline; last: %v", c.fails.Load(), c.fails.Load()+c.ok.Load(), canaryDeadline, c.lastErr)
	}
	if c.ok.Load() == 0 {
		t.Error("canary: no answer at all")
	}
}

// rssSampler records the node's peak resident memory while it runs.
type rssSampler struct {
	stop chan struct{}
	done chan struct{}
	peak atomic.Int64
}

func (n *node) sampleRSS() *rssSampler {
	s := &rssSampler{stop: make(chan struct{}), done: make(chan struct{})}
	pid := n.cmd.Process.Pid
	go func() {
		defer close(s.done)
		for {
			if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
				for _, line := range strings.Split(string(b), "\n") {
					if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
						v, _ := strconv.ParseInt(strings.Fields(rest)[0], 10, 64)
						if v<<10 > s.peak.Load() {
							s.peak.Store(v << 10)
						}
					}
				}
			}
			select {
			case <-s.stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return s
}

func (s *rssSampler) finish() int64 {
	close(s.stop)
	<-s.done
	return s.peak.Load()
}

// attack runs one hostile case against a fresh node: baseline, canary and
// RSS sampling around hit, then the checks common to every case: the
// canary was answered in time, RSS stayed under the bound, and goroutines
// and open files came back to the baseline (plus slack) within 15 s.
func attack(t *testing.T, extra []string, hit func(t *testing.T, n *node, sc scale)) {
	sc := currentScale()
	n := startNode(t, sc, extra...)
	warm := n.startCanary(t)
	// The baseline counts the canary's connections: wait until it has
	// been answered over both, so they are open.
	select {
	case <-warm.warm:
	case <-time.After(20 * time.Second):
		warm.finish(t)
		t.Fatal("canary: not answered over both HTTP and gRPC within 20s")
	}
	base := n.metrics()
	baseFDs := n.openFDs()
	rss := n.sampleRSS()
	begin := time.Now()
	hit(t, n, sc)
	took := time.Since(begin)
	warm.finish(t)
	peak := rss.finish()
	t.Logf("attack took %v; node RSS peak %.1f MiB (bound %d MiB)", took, float64(peak)/(1<<20), sc.rssBound>>20)
	if peak > sc.rssBound {
		t.Errorf("node RSS peaked at %.1f MiB, over the %d MiB bound", float64(peak)/(1<<20), sc.rssBound>>20)
	}
	baseG := base["go_goroutines"]
	deadline := time.Now().Add(15 * time.Second)
	for {
		m := n.metrics()
		g, fds := m["go_goroutines"], n.openFDs()
		if g <= baseG+10 && fds <= baseFDs+10 {
			t.Logf("goroutines %v -> %v, open files %d -> %d", baseG, g, baseFDs, fds)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("leak: goroutines %v (baseline %v), open files %d (baseline %d) 15s after the attack", g, baseG, fds, baseFDs)
		}
		time.Sleep(100 * time.Millisecond) // polling for connections to close
	}
}

// jsonTake encodes a take of the given keys on limit, cost 1 each.
func jsonTake(limit string, keys ...string) []byte {
	type check struct {
		Limit string `json:"limit"`
		Key   string `json:"key"`
		Cost  int64  `json:"cost"`
	}
	cs := make([]check, len(keys))
	for i, k := range keys {
		cs[i] = check{limit, k, 1}
	}
	b, _ := json.Marshal(map[string]any{"checks": cs})
	return b
}
