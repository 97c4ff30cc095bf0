package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/internal/simnet"
	"github.com/weir-rl/weir/internal/testwait"
	"github.com/weir-rl/weir/internal/tracing"
	"github.com/weir-rl/weir/node/cluster"
	"github.com/weir-rl/weir/node/placement"
	"github.com/weir-rl/weir/ring"
)

// simCluster is an in-process cluster whose gossip and peer traffic cross
// a simulated network, so partitions need no root. Public APIs are not
// started on sockets: tests call the nodes' Decider methods directly.
type simCluster struct {
	t     *testing.T
	net   *simnet.Network
	nodes map[string]*Node
	hosts map[string]string // node name → host
	file  string            // limits file
	// deadline overrides the forward deadline when set.
	deadline time.Duration
	// noReplication starts members with --replication=false.
	noReplication bool
	// replInterval overrides the replication interval when set.
	replInterval time.Duration
	// log, when set, is every member's logger.
	log *slog.Logger
	// tracing is every member's tracing configuration (off by default).
	tracing tracing.Config
	// configure, when set, adjusts each member's configuration and
	// dependencies before it is built (a state dir, a clock).
	configure func(name string, cfg *Config, deps *Deps)
}

// simLimits: slow refills, so wall-clock time during a test mints nothing
// that matters; "open" and "closed" variants for the failure policies.
const simLimits = `version: 1
limits:
  - name: hot
    algorithm: token_bucket
    capacity: 60
    rate: 1/h
  - name: paced
    algorithm: token_bucket
    capacity: 20
    rate: 10/s
  - name: quick # a token refills in 0.1 ms: full again by the next replication
    algorithm: token_bucket
    capacity: 10
    rate: 10000/s
  - name: shut
    algorithm: token_bucket
    capacity: 60
    rate: 1/h
    on_owner_unreachable: closed
  - name: allot # allotments, with nothing refilled during a test
    algorithm: token_bucket
    capacity: 200
    rate: 1/h
    allotments: auto
    allotment_threshold: 10/s
    allotment_horizon: 400ms # allotments of up to 50 tokens, as a cut-off holder outlives its TTL with tokens left
    allotment_ttl: 1s
  - name: db
    kind: concurrency
    permits: 6
    lease_ttl: 2s
`

func newSimCluster(t *testing.T) *simCluster {
	t.Helper()
	file := filepath.Join(t.TempDir(), "limits.yaml")
	if err := os.WriteFile(file, []byte(simLimits), 0o600); err != nil {
		t.Fatal(err)
	}
	sn := simnet.New(1)
	t.Cleanup(func() { _ = sn.Close() })
	return &simCluster{t: t, net: sn, nodes: map[string]*Node{}, hosts: map[string]string{}, file: file}
}

// add starts member name on host, joining seed ("" for the first).
func (c *simCluster) add(name, host, seed, secretFile string) *Node {
	c.t.Helper()
	cfg := LocalConfig()
	cfg.NodeName = name
	cfg.LimitsPath = c.file
	cfg.Clustered = true
	cfg.ClusterSecretFile = secretFile
	cfg.PeerAddr = host + ":7947"
	cfg.PeerAdvertise = host + ":7947"
	cfg.Forward.Dialer = func(ctx context.Context, addr string) (net.Conn, error) { return c.net.Dial(ctx, host, addr) }
	// A generous forward deadline: under -race on two cores a forward can
	// take tens of milliseconds, and these tests assert exactness without
	// faults. A test that wants a shorter one gives its take a context
	// deadline (TestClusterKilledOwnerFallsBackThenMoves).
	cfg.Forward.Deadline = time.Second
	if c.deadline > 0 {
		cfg.Forward.Deadline = c.deadline
	}
	cfg.Replication.Enabled = !c.noReplication
	cfg.Tracing = c.tracing
	if c.replInterval > 0 {
		cfg.Replication.Interval = c.replInterval
	}
	tr, err := c.net.Transport(host, 7946)
	if err != nil {
		c.t.Fatal(err)
	}
	cfg.Ring.Transport = tr
	if seed != "" {
		cfg.Ring.Join = []string{seed + ":7946"}
	}
	deps := Deps{Logger: c.log, ListenPeer: func(string, string) (net.Listener, error) { return c.net.Listen(host, 7947) }}
	if c.configure != nil {
		c.configure(name, &cfg, &deps)
	}
	n, err := New(cfg, deps)
	if err != nil {
		c.t.Fatal(err)
	}
	if err := n.Start(context.Background()); err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { _ = n.Shutdown(context.Background()) })
	c.nodes[name], c.hosts[name] = n, host
	return n
}

func (c *simCluster) start(count int) {
	for i := 1; i <= count; i++ {
		seed := ""
		if i > 1 {
			seed = "10.0.0.1"
		}
		c.add(fmt.Sprintf("n%d", i), fmt.Sprintf("10.0.0.%d", i), seed, "")
	}
	c.waitConverged(count)
}

// waitConverged waits until every running node sees want alive members.
func (c *simCluster) waitConverged(want int) {
	c.t.Helper()
	waitFor(c.t, 15*time.Second, fmt.Sprintf("%d alive members everywhere", want), func() bool {
		for _, n := range c.nodes {
			v := clusterOf(n).View()
			alive := 0
			for _, m := range v.Members {
				if m.State == ring.Alive {
					alive++
				}
			}
			if alive != want || !n.Ready() {
				return false
			}
		}
		return true
	})
}

// settled waits until no running node is settling: the handoff window of
// the last membership change has passed everywhere, and forwards for
// callers without a deadline get the transport's Deadline again.
func (c *simCluster) settled() {
	c.t.Helper()
	waitFor(c.t, 15*time.Second, "the handoff window passed everywhere", func() bool {
		for _, n := range c.nodes {
			if clusterOf(n).Settling() {
				return false
			}
		}
		return true
	})
}

// waitFor polls cond every 10 ms until it is true or d passes
// (testwait.Until).
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	testwait.Until(t, d, 10*time.Millisecond, what, cond)
}

// waitNotForwardedTo waits until n no longer forwards (limit, key) to
// member owner: gossip no longer holds it alive (n then decides the key
// from a local ceiling, or forwards it to the member that took it over).
func waitNotForwardedTo(t *testing.T, n *Node, limit, key, owner string) {
	t.Helper()
	waitFor(t, 15*time.Second, n.cfg.NodeName+" to stop forwarding to "+owner, func() bool {
		p := clusterOf(n).Place(limit, key)
		return p.Kind != placement.Forward || p.Peer != owner
	})
}

func (c *simCluster) names() []string {
	var out []string
	for name := range c.nodes {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// ownerOf names the owner of (limit, key) in node n's view.
func ownerOf(n *Node, limit, key string) string {
	m, _ := clusterOf(n).View().Owner(ring.HashKey(limit, key))
	return m.Name
}

// takeMany runs total concurrent takes of cost 1 spread over the given
// nodes and returns how many were admitted, by source.
func takeMany(t *testing.T, nodes []*Node, limit, key string, total int) (owner, fallback int) {
	t.Helper()
	var ownerN, fallbackN atomic.Int64
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for i := range total {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			resp, err := nodes[i%len(nodes)].Take(context.Background(), []api.Check{{Limit: limit, Key: key, Cost: 1}})
			if err != nil {
				return
			}
			if resp.Allowed {
				if resp.Results[0].Source == api.SourceFallback {
					fallbackN.Add(1)
				} else {
					ownerN.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return int(ownerN.Load()), int(fallbackN.Load())
}

func TestClusterExactUnderConcurrency(t *testing.T) {
	for _, size := range []int{3, 5} {
		t.Run(fmt.Sprintf("%d-nodes", size), func(t *testing.T) {
			c := newSimCluster(t)
			c.deadline = 5 * time.Second // exactness without faults: no forward may time out
			c.start(size)
			var nodes []*Node
			for _, name := range c.names() {
				nodes = append(nodes, c.nodes[name])
			}
			for round := range 3 {
				key := fmt.Sprintf("tenant:%d", round)
				owner, fallback := takeMany(t, nodes, "hot", key, 600)
				if owner != 60 || fallback != 0 {
					t.Fatalf("round %d: admitted %d by owner and %d by fallback, want exactly 60 by owner", round, owner, fallback)
				}
			}
			// A multi-check across owners spends everywhere or nowhere.
			var a, b string
			for i := 0; a == "" || b == ""; i++ {
				k := fmt.Sprintf("pair:%d", i)
				switch ownerOf(nodes[0], "hot", k) {
				case "n1":
					if a == "" {
						a = k
					}
				default:
					if b == "" {
						b = k
					}
				}
			}
			// Drain b at its owner, then ask for a and b together: denied, and
			// a keeps its full budget.
			if o, _ := takeMany(t, nodes[:1], "hot", b, 60); o != 60 {
				t.Fatalf("draining %s admitted %d", b, o)
			}
			resp, err := nodes[0].Take(context.Background(), []api.Check{{Limit: "hot", Key: a, Cost: 10}, {Limit: "hot", Key: b, Cost: 1}})
			if err != nil || resp.Allowed {
				t.Fatalf("multi-check = %+v, %v; want denied", resp, err)
			}
			resp, err = nodes[1].Take(context.Background(), []api.Check{{Limit: "hot", Key: a, Cost: 1}})
			if err != nil || resp.Results[0].Remaining != 59 {
				t.Fatalf("after a denied multi-check, %s has %+v, want 59 remaining (refunded)", a, resp)
			}
			// Evidence: whichever node is asked, the owner's bucket decided,
			// and two takes with nothing in between share one instance.
			ev := resp.Results[0].Evidence
			again, err := nodes[len(nodes)-1].Take(context.Background(), []api.Check{{Limit: "hot", Key: a, Cost: 1}})
			if err != nil {
				t.Fatal(err)
			}
			ev2 := again.Results[0].Evidence
			if owner := ownerOf(nodes[0], "hot", a); ev.Decider() != owner || ev2.Decider() != owner {
				t.Errorf("deciders %q and %q, want the owner %s", ev.Decider(), ev2.Decider(), owner)
			}
			if !strings.HasPrefix(ev.Instance(), ev.Decider()+"/") || ev2.Instance() != ev.Instance() {
				t.Errorf("instances %q then %q: want one instance of %s", ev.Instance(), ev2.Instance(), ev.Decider())
			}
			if ev2.DecidedAt.Before(ev.DecidedAt) {
				t.Errorf("decided at %v then %v: the owner's clock went back", ev.DecidedAt, ev2.DecidedAt)
			}
		})
	}
}

func TestClusterIsolatedNodeAdmitsOneShare(t *testing.T) {
	c := newSimCluster(t)
	c.start(3)
	n3 := c.nodes["n3"]
	// A key owned across the cut from n3.
	key := ""
	for i := 0; key == ""; i++ {
		if k := fmt.Sprintf("iso:%d", i); ownerOf(n3, "hot", k) != "n3" {
			key = k
		}
	}
	c.net.Isolate(c.hosts["n3"])
	// While n3's gossip still holds the owner alive, its forwards miss
	// their deadline and are answered limiter_overloaded, admitting nothing
	// (docs/architecture.md §6.3.1). Once it holds the owner suspect, it
	// decides from a local ceiling of 60/3 = 20 per known member, never
	// more, for as long as the cut lasts, even after it declares the
	// others dead.
	waitNotForwardedTo(t, n3, "hot", key, ownerOf(n3, "hot", key))
	owner, fallback := takeMany(t, []*Node{n3}, "hot", key, 100)
	if owner != 0 || fallback != 20 {
		t.Fatalf("isolated node admitted %d by owner, %d by fallback; want 0 and exactly one share (20)", owner, fallback)
	}
	waitFor(t, 15*time.Second, "n3 to see itself in the minority", func() bool {
		v := clusterOf(n3).View()
		return v.Live == 1 && !v.Majority
	})
	owner, fallback = takeMany(t, []*Node{n3}, "hot", key, 100)
	if owner != 0 || fallback != 0 {
		t.Fatalf("minority node admitted %d+%d more; its share was spent", owner, fallback)
	}
	// Its own keys too: the majority takes them over, so the minority
	// node serves them from one share, not from the real bucket.
	own := ""
	for i := 0; own == ""; i++ {
		if k := fmt.Sprintf("own:%d", i); ownerOf(n3, "hot", k) == "n3" {
			own = k
		}
	}
	owner, fallback = takeMany(t, []*Node{n3}, "hot", own, 100)
	if owner != 0 || fallback != 20 {
		t.Fatalf("minority node admitted %d by owner, %d by fallback on its own key; want 0 and one share (20)", owner, fallback)
	}
	// A fail-closed limit answers Unavailable instead.
	_, err := n3.Take(context.Background(), []api.Check{{Limit: "shut", Key: key, Cost: 1}})
	var apiErr *api.Error
	if !errors.As(err, &apiErr) || apiErr.Code != api.CodeUnavailable {
		t.Fatalf("closed limit across the cut: err = %v, want CodeUnavailable", err)
	}
	// Heal: the views converge and the key is decided by one owner again.
	c.net.Heal()
	c.waitConverged(3)
	waitFor(t, 15*time.Second, "owners to agree", func() bool {
		o := ownerOf(c.nodes["n1"], "hot", key)
		return o == ownerOf(c.nodes["n2"], "hot", key) && o == ownerOf(n3, "hot", key)
	})
}

func TestClusterKilledOwnerFallsBackThenMoves(t *testing.T) {
	c := newSimCluster(t)
	c.start(3)
	n1 := c.nodes["n1"]
	key := ""
	for i := 0; key == ""; i++ {
		if k := fmt.Sprintf("kill:%d", i); ownerOf(n1, "hot", k) == "n3" {
			key = k
		}
	}
	// Kill n3: its gossip and peer traffic stop without a goodbye; its own
	// teardown comes later. Until gossip holds it suspect, a forward to it
	// that misses its deadline is overload, not unreachability
	// (docs/architecture.md §6.3.1): answered limiter_overloaded within the
	// deadline, admitting nothing; then from a local ceiling.
	// The caller's own deadline bounds the forward (100ms here); the later
	// takes keep the nodes' default, so that a live new owner slowed by
	// -race on a busy CPU is not taken for an overloaded one.
	c.net.Isolate(c.hosts["n3"])
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	resp, err := n1.Take(ctx, []api.Check{{Limit: "hot", Key: key, Cost: 1}})
	cancel()
	apiErr, isAPI := errors.AsType[*api.Error](err)
	late := isAPI && apiErr.Code == api.CodeOverloaded
	fellBack := err == nil && resp.Allowed && resp.Results[0].Source == api.SourceFallback // gossip was quicker
	if !late && !fellBack {
		t.Fatalf("take for a silent owner's key = %+v, %v; want limiter_overloaded (or, once suspect, an allowed fallback)", resp, err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("answer took %v; the forward deadline is 100ms", d)
	}
	// Both survivors must see n3 fail: n2, the key's new owner in n1's
	// view, passes the forward on to n3 while its own view still holds n3
	// alive, and that is overload again (answered limiter_overloaded).
	waitNotForwardedTo(t, n1, "hot", key, "n3")
	waitNotForwardedTo(t, c.nodes["n2"], "hot", key, "n3")
	resp, err = n1.Take(context.Background(), []api.Check{{Limit: "hot", Key: key, Cost: 1}})
	if err != nil || !resp.Allowed || resp.Results[0].Source != api.SourceFallback {
		t.Fatalf("take for a dead owner's key within the takeover delay = %+v, %v; want an allowed fallback", resp, err)
	}
	_ = c.nodes["n3"].Shutdown(context.Background())
	waitFor(t, 15*time.Second, "n3's keys to move to a live member", func() bool {
		o := ownerOf(n1, "hot", key)
		return o != "n3" && o == ownerOf(c.nodes["n2"], "hot", key)
	})
	// The new owner decides from the real bucket once TakeoverDelay has
	// passed since it saw n3 fail; until then, from local ceilings.
	waitFor(t, 10*time.Second, "an owner decision for the dead owner's key", func() bool {
		resp, err := n1.Take(context.Background(), []api.Check{{Limit: "hot", Key: key, Cost: 1}})
		return err == nil && resp.Results[0].Source == api.SourceOwner
	})
	// weir forget: the dead member stops counting; a live one cannot go.
	if _, err := n1.Forget(context.Background(), "n2"); err == nil {
		t.Fatal("forgot a live member")
	}
	if ok, err := n1.Forget(context.Background(), "n3"); !ok || err != nil {
		t.Fatalf("Forget(n3) = %v, %v", ok, err)
	}
	waitFor(t, 5*time.Second, "n3 to leave n1's known members", func() bool {
		_, known := clusterOf(n1).View().Member("n3")
		return !known && clusterOf(n1).Known() == 2
	})
}

func TestClusterWrongSecretCannotJoinOrForward(t *testing.T) {
	c := newSimCluster(t)
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good"), filepath.Join(dir, "bad")
	if err := os.WriteFile(good, []byte("correct horse battery staple\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("something else"), 0o600); err != nil {
		t.Fatal(err)
	}
	c.add("n1", "10.0.0.1", "", good)
	c.add("n2", "10.0.0.2", "10.0.0.1", good)
	c.waitConverged(2)
	var logs lockedLog
	c.log = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	intruder := c.add("x", "10.0.0.9", "10.0.0.1", bad)
	// The intruder says why within a few seconds, naming the secret.
	const why = "no member accepted this node's gossip"
	waitFor(t, 5*time.Second, "the intruder's warning", func() bool { return strings.Contains(logs.String(), why) })
	for _, s := range []string{"the cluster secret differs", "--cluster-secret-file (WEIR_CLUSTER_SECRET_FILE)", "node=x"} {
		if !strings.Contains(logs.String(), s) {
			t.Fatalf("the warning does not say %q:\n%s", s, logs.String())
		}
	}
	// Give gossip several rounds; the intruder never becomes a member.
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		if _, ok := clusterOf(c.nodes["n1"]).View().Member("x"); ok {
			t.Fatal("a node with the wrong secret joined")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if intruder.Ready() {
		t.Fatal("intruder reports ready without having joined")
	}
	// Nor can it call the peer service directly.
	peer := clusterOf(c.nodes["n1"]).View()
	m, _ := peer.Member("n1")
	_, _, err := clusterOf(intruder).Take(context.Background(), m.Meta.GRPCAddr, []api.Check{{Limit: "hot", Key: "k", Cost: 1}}, "")
	if err == nil {
		t.Fatal("a forward with the wrong secret was served")
	}
}

// TestClusterUnjoinedNodeGrantsOnlyAShare: a node started with --join that
// cannot reach its seed is not ready and decides from local ceilings that
// count at least the seeds and itself, never the whole budget.
func TestClusterUnjoinedNodeGrantsOnlyAShare(t *testing.T) {
	c := newSimCluster(t)
	c.add("n1", "10.0.0.1", "", "")
	c.net.Isolate("10.0.0.2")
	n2 := c.add("n2", "10.0.0.2", "10.0.0.1", "")
	if n2.Ready() {
		t.Fatal("a node that never reached its seed is ready")
	}
	owner, fallback := takeMany(t, []*Node{n2}, "hot", "restart", 100)
	if owner != 0 || fallback != 30 {
		t.Fatalf("unjoined node admitted %d by owner, %d by fallback; want 0 and one share of two (30)", owner, fallback)
	}
	c.net.Heal()
	c.waitConverged(2)
}

// clusterOf is n's cluster member; n must be clustered.
func clusterOf(n *Node) *cluster.Cluster { return n.members.(*cluster.Cluster) }

// lockedLog is a log buffer safe for the handlers of several goroutines.
type lockedLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
