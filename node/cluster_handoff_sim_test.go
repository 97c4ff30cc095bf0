package node

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/weir-rl/weir/api"
)

// A handoff between live members keeps the debt of the keys it moves.

// TestClusterHandoffKeepsDebt: graceful join and leave under load. Every
// admitted take, replayed through an ideal bucket at the instant its
// answer came back (the latest it can have happened), never overdraws it.
func TestClusterHandoffKeepsDebt(t *testing.T) {
	c := newSimCluster(t)
	c.start(3)
	const capacity, rate = 20, 10.0 // "paced": 20, 10/s
	keys := []string{"k:a", "k:b", "k:c", "k:d", "k:e", "k:f"}
	var mu sync.Mutex
	admitted := map[string][]span{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var nodesMu sync.Mutex
	live := []*Node{c.nodes["n1"], c.nodes["n2"], c.nodes["n3"]}
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				nodesMu.Lock()
				n := live[(w+i)%len(live)]
				nodesMu.Unlock()
				key := keys[(w*7+i)%len(keys)]
				call := time.Now()
				resp, err := n.Take(context.Background(), []api.Check{{Limit: "paced", Key: key, Cost: 1}})
				if err == nil && resp.Allowed {
					ret := time.Now()
					mu.Lock()
					admitted[key] = append(admitted[key], span{call, ret})
					mu.Unlock()
				}
			}
		}()
	}
	// Each phase runs until the load has admitted more takes: six keys
	// at 20 + 10/s admit at least 60 a second.
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, spans := range admitted {
			n += len(spans)
		}
		return n
	}
	phase := func(what string) {
		t.Helper()
		want := count() + 30
		waitFor(t, 10*time.Second, what, func() bool { return count() >= want })
	}
	phase("the load to run before the join")
	c.add("n4", "10.0.0.4", "10.0.0.1", "")
	c.waitConverged(4)
	phase("the load to run between the join and the leave")
	nodesMu.Lock()
	live = []*Node{c.nodes["n1"], c.nodes["n2"], c.nodes["n4"]}
	nodesMu.Unlock()
	if err := c.nodes["n3"].Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	delete(c.nodes, "n3")
	c.waitConverged(3)
	phase("the load to run after the leave")
	close(stop)
	wg.Wait()
	total := 0
	for key, spans := range admitted {
		if err := overdraws(spans, capacity, rate); err != nil {
			t.Fatalf("key %s: %v", key, err)
		}
		total += len(spans)
	}
	if total < 100 {
		t.Fatalf("only %d admissions: the load did not run", total)
	}
}

// span is when a take was called and when its answer came back; the owner
// decided somewhere in between.
type span struct{ call, ret time.Time }

// overdraws checks admissions against an ideal bucket of capacity b and
// rate r per second without trusting any clock but the test's: for every
// interval [call of one, return of another], the admissions that surely
// fell inside it number at most b + r·(length). Nil means no violation.
func overdraws(spans []span, b, r float64) error {
	for _, first := range spans {
		for _, last := range spans {
			if last.ret.Before(first.call) {
				continue
			}
			n := 0
			for _, s := range spans {
				if !s.call.Before(first.call) && !s.ret.After(last.ret) {
					n++
				}
			}
			if limit := b + r*last.ret.Sub(first.call).Seconds(); float64(n) > limit+1e-9 {
				return fmt.Errorf("%d admissions within %v, an ideal bucket allows %.2f", n, last.ret.Sub(first.call), limit)
			}
		}
	}
	return nil
}
