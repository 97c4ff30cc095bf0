package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/ring"
	"github.com/weir-rl/weir/transport/peerpb"
)

// slowOwnerDelay is how late the slow owner's every stream byte arrives:
// four times the forward deadline of callers without one.
const slowOwnerDelay = 200 * time.Millisecond

// answers counts the answers to a run of takes.
type answers struct {
	mu                        sync.Mutex
	owner, fallback, denied   int // allowed by the owner, allowed from a local ceiling, denied
	overloaded, otherErr, all int
	errs                      []error
}

func (ta *answers) add(resp api.TakeResponse, err error) {
	ta.mu.Lock()
	defer ta.mu.Unlock()
	ta.all++
	apiErr, isAPI := errors.AsType[*api.Error](err)
	switch {
	case err == nil && !resp.Allowed:
		ta.denied++
	case err == nil && resp.Results[0].Source == api.SourceFallback:
		ta.fallback++
	case err == nil:
		ta.owner++
	case isAPI && apiErr.Code == api.CodeOverloaded:
		ta.overloaded++
	default:
		ta.otherErr++
		ta.errs = append(ta.errs, err)
	}
}

// takeSpread runs total concurrent takes of cost 1 on (limit, key), spread
// round-robin over nodes, each with a context of timeout (none when 0).
func takeSpread(nodes []*Node, limit, key string, total int, timeout time.Duration) *answers {
	ta := &answers{}
	var wg sync.WaitGroup
	for i := range total {
		wg.Go(func() {
			ctx := context.Background()
			if timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, timeout)
				defer cancel()
			}
			ta.add(nodes[i%len(nodes)].Take(ctx, []api.Check{{Limit: limit, Key: key, Cost: 1}}))
		})
	}
	wg.Wait()
	return ta
}

// keyOwnedBy returns a key of limit that node owner owns in every node's
// view.
func (c *simCluster) keyOwnedBy(owner, limit, prefix string) string {
	c.t.Helper()
	for i := 0; ; i++ {
		k := fmt.Sprintf("%s:%d", prefix, i)
		all := true
		for _, n := range c.nodes {
			all = all && ownerOf(n, limit, k) == owner
		}
		if all {
			return k
		}
	}
}

// TestClusterSlowOwnerExact: three healthy members, one of them slow (its
// every stream byte arrives 200 ms late, its gossip on time, so the others
// hold it alive). A forward that misses its deadline is never answered
// from a local ceiling: callers without a deadline (50 ms) are answered
// limiter_overloaded once the ring has settled (see
// TestClusterSettlingWaitsForSlowOwner for the handoff window), and callers
// with a deadline longer than the owner's delay get the owner's own
// decision. Either way every request is answered
// and the owner's bucket (capacity 60, refilling nothing) bounds what is
// admitted: excess 0, and exactly 60 when every forward is waited for.
func TestClusterSlowOwnerExact(t *testing.T) {
	c := newSimCluster(t)
	c.deadline = 50 * time.Millisecond
	c.start(3)
	nodes := []*Node{c.nodes["n1"], c.nodes["n2"], c.nodes["n3"]}
	c.settled()
	c.net.Delay(c.hosts["n1"], slowOwnerDelay)

	// Callers without a deadline, the ring settled: the forward waits 50 ms.
	ta := takeSpread(nodes, "hot", c.keyOwnedBy("n1", "hot", "short"), 300, 0)
	if ta.all != 300 || ta.otherErr != 0 || ta.fallback != 0 {
		t.Fatalf("no caller deadline: %d answered, %d fallback grants, %d other errors %v; want 300, 0, 0",
			ta.all, ta.fallback, ta.otherErr, ta.errs)
	}
	if ta.owner > 60 {
		t.Fatalf("no caller deadline: %d admitted, over the bucket's 60", ta.owner)
	}
	if ta.overloaded < 200 {
		t.Fatalf("no caller deadline: %d limiter_overloaded, want the 200 forwards'", ta.overloaded)
	}

	// Callers with a 10 s deadline: the forward waits for the owner.
	ta = takeSpread(nodes, "hot", c.keyOwnedBy("n1", "hot", "long"), 300, 10*time.Second)
	if ta.all != 300 || ta.otherErr != 0 || ta.fallback != 0 || ta.overloaded != 0 {
		t.Fatalf("10s caller deadline: %d answered, %d fallback grants, %d overloaded, %d other errors %v; want 300, 0, 0, 0",
			ta.all, ta.fallback, ta.overloaded, ta.otherErr, ta.errs)
	}
	if ta.owner != 60 || ta.denied != 240 {
		t.Fatalf("10s caller deadline: %d admitted and %d denied, want exactly 60 and 240", ta.owner, ta.denied)
	}
}

// TestClusterSettlingWaitsForSlowOwner: the same slow owner while the
// ring settles (within the handoff window of a membership change, here
// kept open for the whole test): a forward whose caller set no deadline
// waits up to the settle bound (750 ms) rather than 50 ms, as a new owner's
// pull from the previous one needs, so the owner decides every take: no
// limiter_overloaded, exactly the bucket's 60 admitted.
func TestClusterSettlingWaitsForSlowOwner(t *testing.T) {
	c := newSimCluster(t)
	c.deadline = 50 * time.Millisecond
	c.configure = func(_ string, cfg *Config, _ *Deps) { cfg.Timing.HandoffWindow = time.Minute }
	c.start(3)
	nodes := []*Node{c.nodes["n1"], c.nodes["n2"], c.nodes["n3"]}
	for _, n := range nodes {
		if !clusterOf(n).Settling() {
			t.Fatalf("%s: not settling right after the members joined, with a one-minute handoff window", n.cfg.NodeName)
		}
	}
	c.net.Delay(c.hosts["n1"], slowOwnerDelay)

	ta := takeSpread(nodes, "hot", c.keyOwnedBy("n1", "hot", "settling"), 300, 0)
	if ta.all != 300 || ta.otherErr != 0 || ta.fallback != 0 || ta.overloaded != 0 {
		t.Fatalf("settling, no caller deadline: %d answered, %d fallback grants, %d overloaded, %d other errors %v; want 300, 0, 0, 0",
			ta.all, ta.fallback, ta.overloaded, ta.otherErr, ta.errs)
	}
	if ta.owner != 60 || ta.denied != 240 {
		t.Fatalf("settling, no caller deadline: %d admitted and %d denied, want exactly 60 and 240", ta.owner, ta.denied)
	}
}

// TestClusterOwnerRefusesExpiredForward: the owner refuses, unspent, a
// forwarded take whose budget ran out before it got to it (a stale request
// of a sender that already answered, as a paused node sends on resuming),
// and decides one that carries no budget (a sender that predates it) or
// time to spare.
func TestClusterOwnerRefusesExpiredForward(t *testing.T) {
	c := newSimCluster(t)
	c.start(3)
	key := c.keyOwnedBy("n1", "hot", "stale")
	conn, err := grpc.NewClient("passthrough:///"+c.hosts["n1"]+":7947",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return c.net.Dial(ctx, c.hosts["n2"], addr)
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	peer := peerpb.NewPeerClient(conn)
	send := func(budget int64) *peerpb.Reply {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		out, err := peer.Batch(ctx, &peerpb.BatchRequest{From: "n2", Requests: []*peerpb.Request{{
			Op: peerpb.Op_OP_TAKE, Checks: []*peerpb.Check{{Limit: "hot", Key: key, Cost: 5}}, BudgetNs: budget,
		}}})
		if err != nil || len(out.GetReplies()) != 1 {
			t.Fatalf("batch with budget %d: %v, %v", budget, out, err)
		}
		return out.GetReplies()[0]
	}
	if rep := send(1); !rep.GetExpired() || len(rep.GetResults()) != 0 {
		t.Fatalf("1 ns budget: %v, want expired", rep)
	}
	if rep := send(0); rep.GetExpired() || len(rep.GetResults()) != 1 || rep.GetResults()[0].GetRemaining() != 55 {
		t.Fatalf("no budget (an older sender): %v, want decided with 55 left (the expired one spent nothing)", rep)
	}
	if rep := send(int64(10 * time.Second)); rep.GetExpired() || len(rep.GetResults()) != 1 || rep.GetResults()[0].GetRemaining() != 50 {
		t.Fatalf("10 s budget: %v, want decided with 50 left", rep)
	}
}

// TestClusterLeaveSettlesPeersFirst: a node stopping gracefully announces
// its leave before it hands its keys over, so the peers, still forwarding
// its keys to it, see it alive and Leaving in a new view, and give callers
// without a deadline the settle bound, while its state moves (the soak's
// leaves answered limiter_overloaded when they did not). n3's streams are
// held 1 s, so its push arrives late: the peers must see it leaving while
// the key's next owner does not hold the key yet.
func TestClusterLeaveSettlesPeersFirst(t *testing.T) {
	c := newSimCluster(t)
	c.start(3)
	key := c.keyOwnedBy("n3", "hot", "leave")
	if resp, err := c.nodes["n1"].Take(context.Background(), []api.Check{{Limit: "hot", Key: key, Cost: 5}}); err != nil || !resp.Allowed {
		t.Fatalf("take: %+v, %v", resp, err)
	}
	nextOwner, _ := clusterOf(c.nodes["n1"]).View().Without("n3").Owner(ring.HashKey("hot", key))
	next := c.nodes[nextOwner.Name]
	c.settled()
	c.net.Delay(c.hosts["n3"], time.Second)
	stopped := make(chan error, 1)
	go func() { stopped <- c.nodes["n3"].Shutdown(context.Background()) }()
	waitFor(t, 10*time.Second, "n1 and n2 see n3 alive and leaving", func() bool {
		for _, name := range []string{"n1", "n2"} {
			m, ok := clusterOf(c.nodes[name]).View().Member("n3")
			if !ok || !m.Leaving || m.State != ring.Alive || !clusterOf(c.nodes[name]).Settling() {
				return false
			}
		}
		return true
	})
	if next.eng.HasBucket("hot", key) {
		t.Fatalf("%s held n3's bucket before its peers saw n3 leaving: the leave was announced after the handoff", nextOwner.Name)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("n3 shutdown: %v", err)
	}
	if !next.eng.HasBucket("hot", key) {
		t.Fatalf("%s does not hold n3's bucket after n3 left", nextOwner.Name)
	}
}

// TestClusterLateTakeRetriedWhenTheRingStartsSettling: a take whose caller
// set no deadline, forwarded while the ring was settled, that gets no
// answer within the settled budget (500 ms here, the owner 1 s late)
// while the sender's view changes (n3 announces its leave) is sent once
// more within the settle bound (1.5 s here) and decided by its owner,
// rather than answered limiter_overloaded.
func TestClusterLateTakeRetriedWhenTheRingStartsSettling(t *testing.T) {
	c := newSimCluster(t)
	c.deadline = 500 * time.Millisecond
	c.configure = func(_ string, cfg *Config, _ *Deps) { cfg.Forward.SettleDeadline = 1500 * time.Millisecond }
	c.start(3)
	key := c.keyOwnedBy("n1", "hot", "retry")
	c.settled()
	c.net.Delay(c.hosts["n1"], time.Second)
	done := make(chan *answers, 1)
	go func() { done <- takeSpread([]*Node{c.nodes["n2"]}, "hot", key, 20, 0) }()
	go func() { _ = c.nodes["n3"].Shutdown(context.Background()) }()
	ta := <-done
	if ta.all != 20 || ta.owner != 20 || ta.overloaded != 0 || ta.fallback != 0 || ta.otherErr != 0 {
		t.Fatalf("%d answered: %d by the owner, %d overloaded, %d fallback, %d other errors %v; want all 20 by the owner",
			ta.all, ta.owner, ta.overloaded, ta.fallback, ta.otherErr, ta.errs)
	}
}
