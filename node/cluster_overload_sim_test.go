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
// limiter_overloaded, and callers with a deadline longer than the owner's
// delay get the owner's own decision. Either way every request is answered
// and the owner's bucket (capacity 60, refilling nothing) bounds what is
// admitted: excess 0, and exactly 60 when every forward is waited for.
func TestClusterSlowOwnerExact(t *testing.T) {
	c := newSimCluster(t)
	c.deadline = 50 * time.Millisecond
	c.start(3)
	nodes := []*Node{c.nodes["n1"], c.nodes["n2"], c.nodes["n3"]}
	c.net.Delay(c.hosts["n1"], slowOwnerDelay)

	// Callers without a deadline: the forward waits 50 ms.
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
