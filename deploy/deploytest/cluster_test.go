package deploytest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-rl/weir/internal/leakcheck"
	"github.com/weir-rl/weir/internal/testwait"
	"github.com/weir-rl/weir/node"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// testLimits are the limits the test clusters serve: a quota that admits
// everything, a small bucket that denies, a fail-closed limit (errors when
// its owner is unreachable) and a concurrency limit.
const testLimits = `version: 7
limits:
  - name: quota
    algorithm: fixed_window
    limit: 1000000
    window: hour
  - name: export
    algorithm: token_bucket
    capacity: 6
    rate: 2/s
  - name: login
    algorithm: gcra
    rate: 10/m
    burst: 5
    on_owner_unreachable: closed
  - name: db
    kind: concurrency
    permits: 4
    lease_ttl: 30s
`

// needTool returns the path of a command the test needs. A missing one
// skips the test, or fails it under CI=true.
func needTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not installed (CI=true: .ci/run must install it)", name)
		}
		t.Skipf("%s is not installed (apt-get install %s)", name, name)
	}
	return p
}

// killableListener is a peer listener a test can cut: Kill closes it and
// every connection it accepted, so forwards to the node fail at once
// while its gossip goes on (the node stays alive to the others).
type killableListener struct {
	net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func (l *killableListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.mu.Lock()
		l.conns = append(l.conns, c)
		l.mu.Unlock()
	}
	return c, err
}

// Kill closes the listener and the connections it accepted.
func (l *killableListener) Kill() {
	_ = l.Close()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.conns {
		_ = c.Close()
	}
}

// testCluster is three started nodes on loopback.
type testCluster struct {
	t      *testing.T
	nodes  []*node.Node
	bases  []string // http://host:port of each node
	limits string   // the limits file every node loads
	peer3  *killableListener
	hc     *http.Client
}

// startCluster starts three clustered nodes with fast failure detection;
// the third's peer listener can be killed. It returns once every node
// sees three alive members and is ready.
func startCluster(t *testing.T) *testCluster {
	t.Helper()
	c := &testCluster{t: t, limits: filepath.Join(t.TempDir(), "limits.yaml"), hc: &http.Client{Timeout: 10 * time.Second}}
	if err := os.WriteFile(c.limits, []byte(testLimits), 0o600); err != nil {
		t.Fatal(err)
	}
	var seed string
	for i := range 3 {
		cfg := node.LocalConfig()
		cfg.NodeName = fmt.Sprintf("n%d", i+1)
		cfg.Clustered = true
		cfg.LimitsPath = c.limits
		// Loopback under -race on two shared cores: forwards get time.
		cfg.Forward.Deadline = time.Second
		if seed != "" {
			cfg.Ring.Join = []string{seed}
		}
		var deps node.Deps
		if i == 2 {
			deps.ListenPeer = func(network, addr string) (net.Listener, error) {
				ln, err := net.Listen(network, addr)
				if err != nil {
					return nil, err
				}
				c.peer3 = &killableListener{Listener: ln}
				return c.peer3, nil
			}
		}
		n, err := node.New(cfg, deps)
		if err != nil {
			t.Fatal(err)
		}
		if err := n.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			if err := n.Shutdown(ctx); err != nil {
				t.Errorf("%s shutdown: %v", cfg.NodeName, err)
			}
		})
		c.nodes = append(c.nodes, n)
		c.bases = append(c.bases, "http://"+n.HTTPAddr())
		if seed == "" {
			info, err := n.Cluster(context.Background(), "", "")
			if err != nil || len(info.Members) != 1 {
				t.Fatalf("n1 cluster info %+v, %v", info, err)
			}
			seed = info.Members[0].Addr
		}
	}
	t.Cleanup(c.hc.CloseIdleConnections)
	waitFor(t, 20*time.Second, "three alive members on every node, all ready", func() bool {
		for _, n := range c.nodes {
			info, err := n.Cluster(context.Background(), "", "")
			if err != nil || !n.Ready() {
				return false
			}
			alive := 0
			for _, m := range info.Members {
				if m.State == "alive" {
					alive++
				}
			}
			if alive != 3 {
				return false
			}
		}
		return true
	})
	return c
}

// waitFor polls cond every 100 ms until it holds or d passes
// (testwait.Until).
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	testwait.Until(t, d, 100*time.Millisecond, what, cond)
}

// post sends a JSON body to node i and returns the status code.
func (c *testCluster) post(i int, path, body string) int {
	resp, err := c.hc.Post(c.bases[i]+path, "application/json", strings.NewReader(body))
	if err != nil {
		c.t.Fatalf("POST %s: %v", path, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode
}

// take asks node i for one check and returns the status code.
func (c *testCluster) take(i int, limit, key string, cost int) int {
	b, _ := json.Marshal(map[string]any{"checks": []map[string]any{{"limit": limit, "key": key, "cost": cost}}})
	return c.post(i, "/v1/take", string(b))
}

// ownedBy returns a key with prefix whose owner, for limit, is member
// name, as node 0 sees it.
func (c *testCluster) ownedBy(limit, name, prefix string) string {
	for i := range 10_000 {
		key := fmt.Sprintf("%s%d", prefix, i)
		info, err := c.nodes[0].Cluster(context.Background(), limit, key)
		if err == nil && info.Owner == name {
			return key
		}
	}
	c.t.Fatalf("no key of %s owned by %s", limit, name)
	return ""
}

// traffic drives a mix at every node: admitted takes on a skewed set of
// keys, denials, lease acquisitions and a fail-closed limit.
func (c *testCluster) traffic() {
	for round := range 20 {
		for i := range c.nodes {
			c.take(i, "quota", "tenant:big", 3)
			c.take(i, "quota", fmt.Sprintf("tenant:%d", round%5), 1)
			c.take(i, "export", "tenant:burst", 1) // denied after six
			c.take(i, "login", fmt.Sprintf("user:%d", round), 1)
		}
	}
	for i := range c.nodes {
		c.post(i, "/v1/leases", fmt.Sprintf(`{"limit":"db","key":"job:%d","ttl_ms":30000}`, i))
	}
	// Many at once to one owner, so forwards share batches.
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() { c.take(g%3, "quota", fmt.Sprintf("batch:%d", g), 1) })
	}
	wg.Wait()
}

// faults cuts node 3's peer service, so forwards to it fail and its keys
// are decided from local ceilings (and the fail-closed limit answers 503),
// and makes node 1 reject a limits file (then accept the old one again).
func (c *testCluster) faults() {
	c.t.Helper()
	quotaKey := c.ownedBy("quota", "n3", "moved:")
	loginKey := c.ownedBy("login", "n3", "locked:")
	c.peer3.Kill()
	for range 10 {
		if code := c.take(0, "quota", quotaKey, 1); code != http.StatusOK {
			c.t.Fatalf("take of a key whose owner is cut: %d, want 200 from the local ceiling", code)
		}
		c.take(1, "quota", quotaKey, 1)
	}
	if code := c.take(0, "login", loginKey, 1); code != http.StatusServiceUnavailable {
		c.t.Fatalf("fail-closed limit with its owner cut: %d, want 503", code)
	}
	good, err := os.ReadFile(c.limits)
	if err != nil {
		c.t.Fatal(err)
	}
	if err := os.WriteFile(c.limits, []byte("version: 8\nlimits: [{name: x}]\n"), 0o600); err != nil {
		c.t.Fatal(err)
	}
	if err := c.nodes[0].ReloadLimits(); err == nil {
		c.t.Fatal("a bad limits file was accepted")
	}
	if err := os.WriteFile(c.limits, good, 0o600); err != nil {
		c.t.Fatal(err)
	}
	if err := c.nodes[0].ReloadLimits(); err != nil {
		c.t.Fatalf("reload of the good file: %v", err)
	}
}
