package client_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/api/client"
	"github.com/weir-rl/weir/internal/nodetest"
	"github.com/weir-rl/weir/internal/simnet"
	"github.com/weir-rl/weir/internal/testwait"
	"github.com/weir-rl/weir/node" //nolint:depguard // integration tests against real nodes, in the external test package only
)

// These tests run real nodes in process: gossip and peer forwarding on a
// simulated network (so a member can be killed without a goodbye), the
// public gRPC and HTTP APIs on real loopback sockets, which is what the
// client dials.

// clusterLimits: refills so slow that wall-clock time mints nothing a test
// could see; "wide" never denies; "allotted" is "exact" with allotments.
const clusterLimits = `version: 1
inline_limits: true
limits:
  - name: exact
    algorithm: token_bucket
    capacity: 1000
    rate: 1/h
  - name: wide
    algorithm: token_bucket
    capacity: 1000000000
    rate: 1000000000/s
  - name: allotted
    algorithm: token_bucket
    capacity: 1000
    rate: 1/h
    allotments: auto
    allotment_threshold: 10/s
    allotment_ttl: 1s
`

type testCluster struct {
	t     testing.TB
	net   *simnet.Network
	file  string
	mu    sync.Mutex
	nodes map[string]*node.Node // running members
	hosts map[string]string
	// noRESP starts members without the RESP endpoint: their clients take
	// over gRPC whatever Options.Transport says.
	noRESP bool
}

func newTestCluster(t testing.TB) *testCluster {
	t.Helper()
	file := filepath.Join(t.TempDir(), "limits.yaml")
	if err := os.WriteFile(file, []byte(clusterLimits), 0o600); err != nil {
		t.Fatal(err)
	}
	sn := simnet.New(1)
	t.Cleanup(func() { _ = sn.Close() })
	return &testCluster{t: t, net: sn, file: file, nodes: map[string]*node.Node{}, hosts: map[string]string{}}
}

// add starts member name on simulated host, joining seed ("" for none).
func (c *testCluster) add(name, host, seed string) *node.Node {
	c.t.Helper()
	cfg := node.LocalConfig()
	cfg.NodeName = name
	cfg.LimitsPath = c.file
	cfg.Clustered = true
	cfg.SweepInterval = 0
	cfg.PeerAddr = host + ":7947"
	cfg.PeerAdvertise = host + ":7947"
	cfg.Forward.Dialer = func(ctx context.Context, addr string) (net.Conn, error) { return c.net.Dial(ctx, host, addr) }
	cfg.Forward.Deadline = time.Second // generous: -race on two cores
	if !c.noRESP {
		cfg.RESPAddr = "127.0.0.1:0" // advertised: clients take over it
	}
	tr, err := c.net.Transport(host, 7946)
	if err != nil {
		c.t.Fatal(err)
	}
	cfg.Ring.Transport = tr
	if seed != "" {
		cfg.Ring.Join = []string{seed + ":7946"}
	}
	n := nodetest.Start(c.t, cfg, node.Deps{ListenPeer: func(string, string) (net.Listener, error) { return c.net.Listen(host, 7947) }})
	c.mu.Lock()
	c.nodes[name], c.hosts[name] = n, host
	c.mu.Unlock()
	return n
}

// start runs n1..n<count>, joined through n1, and waits for them to agree.
func (c *testCluster) start(count int) {
	for i := 1; i <= count; i++ {
		seed := ""
		if i > 1 {
			seed = "10.0.0.1"
		}
		c.add(fmt.Sprintf("n%d", i), fmt.Sprintf("10.0.0.%d", i), seed)
	}
	c.waitConverged()
}

func (c *testCluster) running() map[string]*node.Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]*node.Node{}
	for k, v := range c.nodes {
		out[k] = v
	}
	return out
}

// waitConverged waits until every running member sees the running members
// alive, and only them in its ring (a killed member stays known, dead). On
// a timeout it says what each member saw last.
func (c *testCluster) waitConverged() {
	c.t.Helper()
	nodes := c.running()
	seen := map[string]string{}
	agree := func() bool {
		ok := true
		for name, n := range nodes {
			info, _ := n.Cluster(context.Background(), "", "")
			var view strings.Builder
			fmt.Fprintf(&view, "ring %v, members", info.Ring.Table.Members())
			for _, m := range info.Ring.Members {
				fmt.Fprintf(&view, " %s:%s", m.Name, m.State)
			}
			seen[name] = view.String()
			if len(info.Ring.Table.Members()) != len(nodes) {
				ok = false
			}
			for _, member := range info.Ring.Table.Members() {
				if nodes[member] == nil {
					ok = false
				}
			}
			for _, m := range info.Ring.Members {
				if (nodes[m.Name] != nil) != (m.State == "alive") {
					ok = false
				}
			}
		}
		return ok
	}
	deadline := time.Now().Add(30 * time.Second)
	for !agree() {
		if time.Now().After(deadline) {
			c.t.Fatalf("timed out after 30s waiting for the members to agree on the ring; they saw %v", seen)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitSettled waits until a take of a fresh key through c makes no member
// send a peer batch: the handoff window after the last ring change, in
// which new owners pull moved buckets, is over.
func (c *testCluster) waitSettled(cl *client.Client) {
	c.t.Helper()
	i := 0
	waitUntil(c.t, 20*time.Second, "the ring to settle (no more handoff pulls)", func() bool {
		before := c.forwards()
		for range 20 {
			i++
			if _, err := cl.Take(context.Background(), api.Check{Limit: "wide", Key: fmt.Sprintf("settle:%d", i)}); err != nil {
				return false
			}
		}
		return c.forwards() == before
	})
}

// leave shuts member name down gracefully (it hands off and leaves).
func (c *testCluster) leave(name string) {
	c.mu.Lock()
	n := c.nodes[name]
	delete(c.nodes, name)
	c.mu.Unlock()
	if err := n.Shutdown(context.Background()); err != nil {
		c.t.Logf("shutdown %s: %v", name, err)
	}
}

// kill cuts member name off the simulated network, so its peers see it
// fail without a goodbye, then stops it (which closes its public sockets).
func (c *testCluster) kill(name string) {
	c.mu.Lock()
	n := c.nodes[name]
	delete(c.nodes, name)
	host := c.hosts[name]
	c.mu.Unlock()
	c.net.Isolate(host)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_ = n.Shutdown(ctx)
}

// forwards sums the peer batches every running member has sent.
func (c *testCluster) forwards() float64 {
	c.t.Helper()
	total := 0.0
	for _, n := range c.running() {
		total += scrape(c.t, n.HTTPAddr(), "weir_forward_batch_size_count")
	}
	return total
}

// scrape returns the sum of a metric's series on a node's /metrics.
func scrape(t testing.TB, httpAddr, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var b strings.Builder
	buf := make([]byte, 32<<10)
	for {
		k, err := resp.Body.Read(buf)
		b.Write(buf[:k])
		if err != nil {
			break
		}
	}
	total := 0.0
	for line := range strings.SplitSeq(b.String(), "\n") {
		if !strings.HasPrefix(line, name) || (len(line) > len(name) && line[len(name)] != ' ' && line[len(name)] != '{') {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err == nil {
			total += v
		}
	}
	return total
}

// waitUntil polls cond every 10 ms until it holds, failing t after d
// (testwait.Until).
func waitUntil(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	testwait.Until(t, d, 10*time.Millisecond, what, cond)
}

// dial returns a cluster-aware client seeded with n's public gRPC address.
func dial(t testing.TB, n *node.Node, opts client.Options) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, []string{n.GRPCAddr()}, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// agrees reports whether the client names the same owner as node n for
// every key of keys.
func agrees(c *client.Client, n *node.Node, limit string, keys []string) bool {
	for _, k := range keys {
		want, _ := n.Cluster(context.Background(), limit, k)
		got, ok := c.Owner(limit, k)
		if !ok || got != want.Owner {
			return false
		}
	}
	return true
}

func keys(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s:%d", prefix, i)
	}
	return out
}

// transports are the ways a client's takes travel, for the tests that run
// over each: RESP (members advertise it, the default) and gRPC.
var transports = []struct {
	name string
	opt  client.Transport
}{{"resp", client.TransportAuto}, {"grpc", client.TransportGRPC}}

// checkTransport fails t unless c's takes went over the transport asked
// for.
func checkTransport(t *testing.T, c *client.Client, tr client.Transport) {
	t.Helper()
	st := c.Stats()
	if lean := st.LeanTakes > 0; lean != (tr == client.TransportAuto) || st.Takes == 0 {
		t.Fatalf("stats %+v: transport %d, want takes over RESP exactly when TransportAuto", st, tr)
	}
}
