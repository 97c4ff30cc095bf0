package engine

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/bucket"
)

// changed records the keys the engine marks changed for replication,
// with the state each mark reported.
type changed struct {
	NoChanges
	mu      sync.Mutex
	keys    []string
	afters  []bucket.State
	carried []bool
}

func (c *changed) Bucket(limit, key string, _ time.Time, after bucket.State, carried bool) {
	c.mu.Lock()
	c.keys = append(c.keys, limit+"/"+key)
	c.afters = append(c.afters, after)
	c.carried = append(c.carried, carried)
	c.mu.Unlock()
}

// A refund forwarded to the owner (the undo of a take another owner
// denied) changes the bucket: its successor must be told, or a crash
// right after loses the refund on the safe side but keeps a stale debt.
// The take reports the state it left; the refund does not know it (the
// zero State), so the stream looks the bucket up.
func TestForwardedRefundIsReplicated(t *testing.T) {
	clk := newTestClock()
	ch := &changed{}
	e := newTestEngine(t, "owner", clk, SingleNode{}, NoPeers{}, ch)
	if ok, _ := takeOne(t, e, "plain", "k", 3); !ok {
		t.Fatal("take denied")
	}
	ch.mu.Lock()
	// plain refills 20/s: 3 tokens in 150 ms.
	if want := clk.now().Add(150 * time.Millisecond); len(ch.afters) != 1 || !ch.afters[0].FullAt().Equal(want) {
		t.Fatalf("the take reported states %+v, want one full at %v", ch.afters, want)
	}
	ch.keys, ch.afters = nil, nil
	ch.mu.Unlock()
	e.ServeRefund([]api.Check{{Limit: "plain", Key: "k", Cost: 3}})
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if len(ch.keys) != 1 || ch.keys[0] != "plain/k" || ch.afters[0] != (bucket.State{}) {
		t.Fatalf("marked changed %v with states %+v, want [plain/k] with the zero State", ch.keys, ch.afters)
	}
}

// An inline take reports the state it left and that its bucket carries
// its limit, which the replica needs as well (the stream then looks the
// bucket up); a take of a named limit reports that it does not.
func TestInlineTakeIsReplicatedCarried(t *testing.T) {
	clk := newTestClock()
	ch := &changed{}
	e := newTestEngine(t, "owner", clk, SingleNode{}, NoPeers{}, ch)
	in := &api.InlineLimit{Capacity: 5, Rate: "1/s"}
	if _, err := e.Take(context.Background(), []api.Check{{Limit: "per-user", Key: "u", Cost: 1, Inline: in}}); err != nil {
		t.Fatal(err)
	}
	if ok, _ := takeOne(t, e, "plain", "k", 1); !ok {
		t.Fatal("take denied")
	}
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if len(ch.keys) != 2 || !ch.carried[0] || ch.carried[1] {
		t.Fatalf("marked %v carried %v, want the inline take's carried and the plain take's not", ch.keys, ch.carried)
	}
	// per-user refills 1/s: the one token taken is back in a second.
	if want := clk.now().Add(time.Second); !ch.afters[0].FullAt().Equal(want) {
		t.Fatalf("the inline take left a state full at %v, want %v", ch.afters[0].FullAt(), want)
	}
}
