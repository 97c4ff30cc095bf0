package engine

import (
	"sync"
	"testing"
	"time"

	"github.com/weir-rl/weir/api"
)

// changed records the keys the engine marks changed for replication,
// with the full instant each mark reported.
type changed struct {
	NoChanges
	mu    sync.Mutex
	keys  []string
	fulls []time.Time
}

func (c *changed) Bucket(limit, key string, _, full time.Time) {
	c.mu.Lock()
	c.keys = append(c.keys, limit+"/"+key)
	c.fulls = append(c.fulls, full)
	c.mu.Unlock()
}

// A refund forwarded to the owner (the undo of a take another owner
// denied) changes the bucket: its successor must be told, or a crash
// right after loses the refund on the safe side but keeps a stale debt.
// The take reports when its bucket is full again; the refund does not
// know (zero), so the stream looks the bucket up.
func TestForwardedRefundIsReplicated(t *testing.T) {
	clk := newTestClock()
	ch := &changed{}
	e := newTestEngine(t, "owner", clk, SingleNode{}, NoPeers{}, ch)
	if ok, _ := takeOne(t, e, "plain", "k", 3); !ok {
		t.Fatal("take denied")
	}
	ch.mu.Lock()
	// plain refills 20/s: 3 tokens in 150 ms.
	if want := clk.now().Add(150 * time.Millisecond); len(ch.fulls) != 1 || !ch.fulls[0].Equal(want) {
		t.Fatalf("the take reported full %v, want [%v]", ch.fulls, want)
	}
	ch.keys, ch.fulls = nil, nil
	ch.mu.Unlock()
	e.ServeRefund([]api.Check{{Limit: "plain", Key: "k", Cost: 3}})
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if len(ch.keys) != 1 || ch.keys[0] != "plain/k" || !ch.fulls[0].IsZero() {
		t.Fatalf("marked changed %v with full %v, want [plain/k] with the zero Time", ch.keys, ch.fulls)
	}
}
