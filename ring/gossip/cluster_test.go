package gossip

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/weir-rl/weir/internal/leakcheck"
	"github.com/weir-rl/weir/internal/simnet"
	"github.com/weir-rl/weir/internal/testwait"
	"github.com/weir-rl/weir/ring"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// bound is the generous deadline for detection, convergence and healing
// with LocalTiming (which documents ≈ 1–2 s), for -race on a loaded machine.
const bound = 10 * time.Second

const gossipPort = 7946

// cluster is a set of rings on one simnet.
type cluster struct {
	t     *testing.T
	net   *simnet.Network
	rings []*Membership
	hosts []string
}

func hostOf(i int) string { return fmt.Sprintf("10.0.0.%d", i+1) }

// newCluster starts n rings over a fresh simnet; every ring's seed is the
// first ring's address. mutate may adjust each config.
func newCluster(t *testing.T, n int, mutate func(i int, c *Config)) *cluster {
	t.Helper()
	c := &cluster{t: t, net: simnet.New(uint64(n))}
	t.Cleanup(func() {
		for _, r := range c.rings {
			r.Close()
		}
		c.net.Close()
	})
	for i := range n {
		c.add(i, mutate)
	}
	return c
}

// add starts ring i on host hostOf(i).
func (c *cluster) add(i int, mutate func(i int, c *Config)) *Membership {
	c.t.Helper()
	tr, err := c.net.Transport(hostOf(i), gossipPort)
	if err != nil {
		c.t.Fatal(err)
	}
	cfg := LocalConfig()
	cfg.Name = fmt.Sprintf("n%d", i)
	cfg.Transport = tr
	cfg.Join = []string{fmt.Sprintf("%s:%d", hostOf(0), gossipPort)}
	if mutate != nil {
		mutate(i, &cfg)
	}
	r, err := New(cfg, ring.Meta{GRPCAddr: hostOf(i) + ":8081", Incarnation: int64(i)})
	if err != nil {
		c.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	if err := r.Start(ctx); err != nil {
		c.t.Fatal(err)
	}
	c.rings = append(c.rings, r)
	c.hosts = append(c.hosts, hostOf(i))
	return r
}

// waitFor polls cond every 5 ms until it holds or bound passes, and
// returns the time it took (testwait.Until).
func waitFor(t *testing.T, what string, cond func() bool) time.Duration {
	t.Helper()
	return testwait.Until(t, bound, 5*time.Millisecond, what, cond)
}

var sampleKeys = func() []string {
	ks := make([]string, 300)
	for i := range ks {
		ks[i] = ring.HashKey("api", fmt.Sprintf("tenant:%d", i))
	}
	return ks
}()

func ownersOf(v *ring.View) []string {
	out := make([]string, len(sampleKeys))
	for i, k := range sampleKeys {
		m, _ := v.Owner(k)
		out[i] = m.Name
	}
	return out
}

func names(ms []ring.Member) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Name + ":" + m.State.String()
	}
	return out
}

// converged reports whether rings agree: the same members, all alive, and
// the same owner for every sample key (epochs may differ).
func converged(rings ...*Membership) bool {
	first := rings[0].View()
	if first.Live != len(first.Members) || len(first.Members) != len(rings) {
		return false
	}
	want := ownersOf(first)
	for _, r := range rings[1:] {
		v := r.View()
		if !slices.Equal(names(v.Members), names(first.Members)) || !slices.Equal(ownersOf(v), want) {
			return false
		}
	}
	return true
}

func TestConverge(t *testing.T) {
	for _, n := range []int{3, 5} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			c := newCluster(t, n, nil)
			took := waitFor(t, "convergence", func() bool { return converged(c.rings...) })
			t.Logf("%d nodes converged in %v", n, took)
			for _, r := range c.rings {
				if !r.Joined() {
					t.Errorf("%s not joined", r.cfg.Name)
				}
				v := r.View()
				if !v.Majority || v.Self != r.cfg.Name {
					t.Errorf("%s: view %+v", r.cfg.Name, v)
				}
				m, _ := v.Member("n1")
				if m.Meta.GRPCAddr != hostOf(1)+":8081" || m.Addr != fmt.Sprintf("%s:%d", hostOf(1), gossipPort) {
					t.Errorf("%s sees n1 as %+v", r.cfg.Name, m)
				}
			}
			// Every member owns some keys.
			seen := map[string]bool{}
			for _, o := range ownersOf(c.rings[0].View()) {
				seen[o] = true
			}
			if len(seen) != n {
				t.Errorf("owners %v", seen)
			}
			// Metadata changes are gossiped and change the view.
			before := c.rings[0].View().Epoch
			c.rings[1].SetMeta(ring.Meta{GRPCAddr: hostOf(1) + ":9090", LimitsVersion: 5})
			waitFor(t, "meta gossip", func() bool {
				m, _ := c.rings[0].View().Member("n1")
				return m.Meta.LimitsVersion == 5 && m.Meta.GRPCAddr == hostOf(1)+":9090"
			})
			if c.rings[0].View().Epoch <= before {
				t.Error("epoch did not grow with a meta change")
			}
		})
	}
}

// partitionAndHeal cuts the cluster into sides, checks each side's view,
// holds the partition until memberlist has had time to forget the other
// side (longer than GossipToTheDeadTime after detection), heals, and checks
// that one view comes back.
func partitionAndHeal(t *testing.T, c *cluster, sides [][]int, isolate bool) {
	t.Helper()
	full := ownersOf(c.rings[0].View())
	ids := func(side []int) []string {
		var hs []string
		for _, i := range side {
			hs = append(hs, c.hosts[i])
		}
		return hs
	}
	if isolate {
		c.net.Isolate(c.hosts[sides[0][0]])
	} else {
		c.net.Split(ids(sides[0]), ids(sides[1]))
	}
	all := len(c.rings)
	start := time.Now()
	type node struct {
		r        *Membership
		majority bool
		inSide   map[string]bool
	}
	var nodes []node
	for _, side := range sides {
		inSide := map[string]bool{}
		for _, j := range side {
			inSide[c.rings[j].cfg.Name] = true
		}
		for _, i := range side {
			nodes = append(nodes, node{c.rings[i], 2*len(side) > all, inSide})
		}
	}
	detected := func(n node) bool {
		v := n.r.View()
		if len(v.Members) != all || v.Live != len(n.inSide) || v.Majority != n.majority {
			return false
		}
		for _, m := range v.Members {
			if m.State.Live() != n.inSide[m.Name] {
				return false
			}
		}
		return true
	}
	seen := map[string]time.Duration{} // when each node first showed the partition
	waitFor(t, "every node detects the partition", func() bool {
		for _, n := range nodes {
			if _, ok := seen[n.r.cfg.Name]; !ok && detected(n) {
				seen[n.r.cfg.Name] = time.Since(start)
			}
		}
		return len(seen) == all
	})
	for _, n := range nodes {
		if !detected(n) {
			t.Fatalf("%s: view flapped back: %v", n.r.cfg.Name, names(n.r.View().Members))
		}
		got := ownersOf(n.r.View())
		if n.majority {
			for k, o := range got {
				if !n.inSide[o] {
					t.Fatalf("%s (majority) maps %s to unreachable %s", n.r.cfg.Name, sampleKeys[k], o)
				}
			}
		} else if !slices.Equal(got, full) {
			t.Fatalf("%s (minority) changed ownership: it must keep the known ring", n.r.cfg.Name)
		}
	}
	detect := time.Since(start)
	t.Logf("partition %v detected by every node in %v (per node: %v)", sides, detect, seen)

	// Hold the partition so it outlives GossipToTheDeadTime after the
	// last dead verdict, plus two probe cycles for memberlist's reaping.
	hold := c.rings[0].cfg.Timing.GossipToTheDeadTime + 2*c.rings[0].cfg.Timing.ProbeInterval*time.Duration(all)
	<-time.After(hold)

	c.net.Heal()
	took := waitFor(t, "healing", func() bool { return converged(c.rings...) })
	t.Logf("healed %v after a %v partition in %v", sides, detect+hold, took)
	if !slices.Equal(ownersOf(c.rings[0].View()), full) {
		t.Fatal("ownership after healing differs from before the partition")
	}
}

func TestIsolateOneOfThree(t *testing.T) {
	c := newCluster(t, 3, nil)
	waitFor(t, "convergence", func() bool { return converged(c.rings...) })
	partitionAndHeal(t, c, [][]int{{2}, {0, 1}}, true)
}

func TestSplitTwoThree(t *testing.T) {
	c := newCluster(t, 5, nil)
	waitFor(t, "convergence", func() bool { return converged(c.rings...) })
	partitionAndHeal(t, c, [][]int{{0, 1}, {2, 3, 4}}, false)
}

func TestForgetAfterAndForget(t *testing.T) {
	// Long enough that no survivor forgets one crashed member before it
	// sees the other dead (detection ~1.5 s apart under -race on a busy
	// CPU): the test needs both dead at once in both survivors' views.
	const forgetAfter = 4 * time.Second
	c := newCluster(t, 4, func(i int, cfg *Config) { cfg.ForgetAfter = forgetAfter })
	waitFor(t, "convergence", func() bool { return converged(c.rings...) })
	// Crash n3 (no leave) and n2 together: both become dead.
	crashed := time.Now() // before any member can see them dead
	c.rings[3].Close()
	c.rings[2].Close()
	survivors := c.rings[:2]
	waitFor(t, "crash detected", func() bool {
		for _, r := range survivors {
			m, ok := r.View().Member("n3")
			m2, ok2 := r.View().Member("n2")
			if !ok || m.State != ring.Dead || !ok2 || m2.State != ring.Dead {
				return false
			}
		}
		return true
	})
	seenDead := time.Since(crashed)
	// 2 of 4 live: no majority, the dead keep their keys.
	if v := survivors[0].View(); v.Majority || !v.InRing("n3") {
		t.Fatalf("2 of 4 live: view %+v", v)
	}
	// The operator forgets n2 on n0 only: now 2 of 3 are live there.
	if survivors[0].Forget("n0") || survivors[0].Forget("n1") || survivors[0].Forget("nope") {
		t.Fatal("Forget accepted self, a live member or an unknown one")
	}
	if !survivors[0].Forget("n2") {
		t.Fatal("Forget(n2) failed")
	}
	if v := survivors[0].View(); len(v.Members) != 3 || !v.Majority || v.InRing("n3") {
		t.Fatalf("after Forget: %v majority %v", names(v.Members), v.Majority)
	}
	waitFor(t, "ForgetAfter", func() bool {
		for _, r := range survivors {
			if len(r.View().Members) != 2 {
				return false
			}
		}
		return true
	})
	// Each survivor forgets a member ForgetAfter after it saw it dead,
	// which was after the crash: however late this test polls, no member
	// can be forgotten sooner than that after the crash.
	elapsed := time.Since(crashed)
	t.Logf("failed members seen dead %v and forgotten %v after the crash (ForgetAfter %v)", seenDead, elapsed, forgetAfter)
	if elapsed < forgetAfter {
		t.Fatalf("forgotten %v after the crash, ForgetAfter is %v", elapsed, forgetAfter)
	}
	if v := survivors[1].View(); !v.Majority || v.Live != 2 {
		t.Fatalf("after forgetting: %+v", v)
	}
}

func TestWrongGossipKeyCannotJoin(t *testing.T) {
	k1 := sha256.Sum256([]byte("secret one"))
	k2 := sha256.Sum256([]byte("secret two"))
	c := newCluster(t, 2, func(i int, cfg *Config) { cfg.GossipKey = k1[:] })
	waitFor(t, "convergence", func() bool { return converged(c.rings...) })
	intruders := []*Membership{
		c.add(2, func(i int, cfg *Config) { cfg.GossipKey = k2[:] }),
		c.add(3, nil), // plaintext
	}
	for _, x := range intruders {
		start := x.rounds.Load()
		waitFor(t, "three rejoin rounds", func() bool { return x.rounds.Load() >= start+3 })
		if x.Joined() || len(x.View().Members) != 1 {
			t.Fatalf("%s with the wrong key joined: %v", x.cfg.Name, names(x.View().Members))
		}
	}
	for _, r := range c.rings[:2] {
		if v := r.View(); len(v.Members) != 2 {
			t.Fatalf("%s admitted an intruder: %v", r.cfg.Name, names(v.Members))
		}
	}
}

func TestLifecycle(t *testing.T) {
	n := simnet.New(1)
	defer n.Close()
	tr, _ := n.Transport("10.0.0.1", gossipPort)
	cfg := LocalConfig()
	cfg.Name = "solo"
	cfg.Transport = tr
	r, err := New(cfg, ring.Meta{})
	if err != nil {
		t.Fatal(err)
	}
	if v := r.View(); v == nil || len(v.Members) != 1 || !v.Majority {
		t.Fatalf("initial view %+v", v)
	}
	if _, ok := r.View().Owner("k"); !ok {
		t.Fatal("a lone member owns nothing")
	}
	if err := r.Leave(time.Second); !errors.Is(err, ErrNotStarted) {
		t.Fatalf("Leave before Start: %v", err)
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background()); !errors.Is(err, ErrStarted) {
		t.Fatalf("second Start: %v", err)
	}
	if !r.Joined() {
		t.Fatal("a member without seeds is joined")
	}
	r.SetMeta(ring.Meta{GRPCAddr: string(make([]byte, 600))}) // ignored: too long
	r.SetMeta(ring.Meta{LimitsVersion: 9})
	if m, _ := r.View().Member("solo"); m.Meta.LimitsVersion != 9 {
		t.Fatalf("self meta %+v", m.Meta)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := <-r.Changes(); ok {
		// drain the buffered view, then the channel must be closed
		if _, ok := <-r.Changes(); ok {
			t.Fatal("Changes not closed")
		}
	}
	if err := r.Leave(time.Second); !errors.Is(err, ErrClosed) {
		t.Fatalf("Leave after Close: %v", err)
	}
	if err := r.Start(context.Background()); !errors.Is(err, ErrStarted) {
		t.Fatalf("Start after Close: %v", err)
	}
}

func TestChangesLatestWins(t *testing.T) {
	c := newCluster(t, 3, nil)
	waitFor(t, "convergence", func() bool { return converged(c.rings...) })
	r := c.rings[0]
	var last *ring.View
	waitFor(t, "latest view on Changes", func() bool {
		select {
		case v := <-r.Changes():
			last = v
		default:
		}
		return last != nil && last.Epoch == r.View().Epoch
	})
}
