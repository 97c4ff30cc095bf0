package node_test

import (
	"context"
	"testing"
	"time"

	"github.com/weir-rl/weir/api/weirv1"
	"github.com/weir-rl/weir/node"
)

// TestRLQSNeverExceedsTheBucket runs two simulated Envoys against a real
// node through its gRPC port, each with a hot bucket of the same key (500
// requests a second each, five times the limit's 100/s), reporting every
// second and receiving each answer up to 400 ms late (under the 500 ms
// Margin), with and without a third caller taking 50/s from the same
// bucket with gRPC Take.
// Over 60 simulated seconds, the requests admitted in every window of
// length τ must stay within capacity + rate·τ, and the proxies must admit
// most of what the bucket allows (a server that denied everything would
// pass the bound).
func TestRLQSNeverExceedsTheBucket(t *testing.T) {
	t.Run("proxies", func(t *testing.T) { rlqsExactness(t, false) })
	t.Run("proxies and a direct caller", func(t *testing.T) { rlqsExactness(t, true) })
}

// rlqsExactness is TestRLQSNeverExceedsTheBucket, with or without the
// direct caller.
func rlqsExactness(t *testing.T, withDirect bool) {
	tn := startNode(t, func(c *node.Config) { c.LimitsPath = writeLimits(t, rlqsLimits) })
	const (
		capacity = 1000
		rate     = 100.0 // per second
		step     = 10 * time.Millisecond
		steps    = 6000 // 60 s
	)
	id := map[string]string{"name": "hot", "tenant": "acme"}
	proxies := []*simProxy{newSimProxy(t, tn.conn), newSimProxy(t, tn.conn)}
	for _, p := range proxies {
		p.bucket(id)
	}
	admitted := make([]int, steps)
	byProxy := make([]int, len(proxies))
	direct := 0
	for i := range steps {
		now := tn.clock.Now()
		for j, p := range proxies {
			p.deliver(now)
			if i%100 == 0 { // every second; answers 0, 200 or 400 ms late
				p.report(now, time.Second, time.Duration((i/100+j)%3)*200*time.Millisecond)
			}
			for range 5 { // 500/s
				if p.bucket(id).admit(now) {
					admitted[i]++
					byProxy[j]++
				}
			}
		}
		if withDirect && i%2 == 1 { // 50/s at the owner
			resp, err := tn.grpc.Take(context.Background(), &weirv1.TakeRequest{Checks: []*weirv1.Check{{Limit: "hot", Key: "tenant=acme", Cost: 1}}})
			if err != nil {
				t.Fatalf("Take: %v", err)
			}
			if resp.GetAllowed() {
				admitted[i]++
				direct++
			}
		}
		tn.clock.Advance(step)
	}
	sum := make([]int, steps+1)
	for i, n := range admitted {
		sum[i+1] = sum[i] + n
	}
	for a := range steps {
		for b := a + 1; b <= steps; b++ {
			span := time.Duration(b-1-a) * step
			if got, bound := sum[b]-sum[a], capacity+rate*span.Seconds(); float64(got) > bound {
				t.Fatalf("admitted %d in [%v, %v], over capacity + rate·τ = %.1f", got, time.Duration(a)*step, time.Duration(b-1)*step, bound)
			}
		}
	}
	total := sum[steps]
	t.Logf("admitted %d (proxies %v, direct %d) of at most %d", total, byProxy, direct, capacity+int(rate*60))
	if total < (capacity+int(rate*60))*3/4 {
		t.Fatalf("admitted %d, under 75%% of the %d the bucket allows", total, capacity+int(rate*60))
	}
	for j, n := range byProxy {
		if !withDirect && n < total/4 {
			t.Fatalf("proxy %d admitted %d: starved", j, n)
		}
	}
}
