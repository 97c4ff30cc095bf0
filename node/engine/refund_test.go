package engine

import (
	"sync"
	"testing"
	"time"

	"github.com/weir-rl/weir/api"
)

// changed records the keys the engine marks changed for replication.
type changed struct {
	NoChanges
	mu   sync.Mutex
	keys []string
}

func (c *changed) Bucket(limit, key string, _ time.Time) {
	c.mu.Lock()
	c.keys = append(c.keys, limit+"/"+key)
	c.mu.Unlock()
}

// A refund forwarded to the owner (the undo of a take another owner
// denied) changes the bucket: its successor must be told, or a crash
// right after loses the refund on the safe side but keeps a stale debt.
func TestForwardedRefundIsReplicated(t *testing.T) {
	clk := newTestClock()
	ch := &changed{}
	e := newTestEngine(t, "owner", clk, SingleNode{}, NoPeers{}, ch)
	if ok, _ := takeOne(t, e, "plain", "k", 3); !ok {
		t.Fatal("take denied")
	}
	ch.mu.Lock()
	ch.keys = nil
	ch.mu.Unlock()
	e.ServeRefund([]api.Check{{Limit: "plain", Key: "k", Cost: 3}})
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if len(ch.keys) != 1 || ch.keys[0] != "plain/k" {
		t.Fatalf("marked changed %v, want [plain/k]", ch.keys)
	}
}
