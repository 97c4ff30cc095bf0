package engine

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/bucket"
	"github.com/weir-rl/weir/lease"
	"github.com/weir-rl/weir/node/limits"
	"github.com/weir-rl/weir/node/placement"
)

// The allotment tests run real engines, an owner and holders, on one
// injected clock, wired by direct calls instead of the peer transport so
// that every step and every interleaving is the test's choice. The same
// protocol over real gRPC on the simulated network is node's
// cluster_allot_sim_test.go.

// testClock is a clock the test moves.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func newTestClock() *testClock { return &testClock{t: time.Unix(1_700_000_000, 0)} }

func (c *testClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// syncs is the owner's Changes: it counts Sync calls and fails them while
// fail is set (the successor unreachable).
type syncs struct {
	NoChanges
	fail  atomic.Bool
	calls atomic.Int64
}

func (s *syncs) Sync(context.Context, string, string) error {
	s.calls.Add(1)
	if s.fail.Load() {
		return errors.New("successor unreachable")
	}
	return nil
}

// remote is a holder's Router: every key is owned elsewhere, "plain"'s
// at another peer than the others' (direct sends both to one engine).
type remote struct{ SingleNode }

func (remote) Place(limit, _ string) placement.Placement {
	if limit == "plain" {
		return placement.Placement{Kind: placement.Forward, Peer: "other", Addr: "other"}
	}
	return placement.Placement{Kind: placement.Forward, Peer: "owner", Addr: "owner"}
}

func (remote) Known() int { return 2 }

// direct is a holder's Peers: calls on the owner engine, counted.
type direct struct {
	owner               *Engine
	takes, allots, rets atomic.Int64
}

func (d *direct) Take(ctx context.Context, _ string, checks []api.Check, id string) ([]api.Result, bool, error) {
	d.takes.Add(1)
	return d.owner.ServeTake(checks, id, api.TenantFrom(ctx))
}

func (d *direct) Refund(_ context.Context, _ string, checks []api.Check) { d.owner.ServeRefund(checks) }

func (d *direct) Acquire(ctx context.Context, _ string, req api.AcquireRequest) (api.AcquireResponse, error) {
	return d.owner.ServeAcquire(ctx, req)
}

func (d *direct) Renew(_ context.Context, _, id string, ttl time.Duration) (time.Duration, error) {
	return d.owner.ServeRenew(id, ttl)
}

func (d *direct) Release(_ context.Context, _, id string) error {
	d.owner.ServeRelease(id)
	return nil
}

func (d *direct) Reachable(context.Context, string) bool { return true }

func (d *direct) Allot(ctx context.Context, _ string, req api.AllotRequest) (api.AllotResponse, error) {
	d.allots.Add(1)
	return d.owner.ServeAllot(ctx, req)
}

func (d *direct) Return(_ context.Context, _ string, req api.ReturnRequest) error {
	d.rets.Add(1)
	return d.owner.ServeReturn(req)
}

// allotLimits: "hot" allots (50 tokens, 20/s, a 500ms TTL); "fast"
// refills a whole capacity well within an allotment's TTL (50 tokens,
// 100/s, a 1s TTL), so a capacity not capped by outstanding allotments
// over-admits at once; "slow" refills nothing that matters; "plain" does
// not allot.
const allotLimits = `version: 1
limits:
  - name: hot
    algorithm: token_bucket
    capacity: 50
    rate: 20/s
    allotments: auto
    allotment_threshold: 10/s
    allotment_horizon: 50ms
    allotment_ttl: 500ms
  - name: fast
    algorithm: token_bucket
    capacity: 50
    rate: 100/s
    allotments: auto
    allotment_threshold: 10/s
    allotment_horizon: 50ms
    allotment_ttl: 1s
  - name: slow # refills nothing that matters during a test
    algorithm: token_bucket
    capacity: 50
    rate: 1/h
    allotments: auto
    allotment_threshold: 10/s
    allotment_horizon: 50ms
    allotment_ttl: 500ms
  - name: plain
    algorithm: token_bucket
    capacity: 50
    rate: 20/s
inline_limits: true # for the replication of inline takes (refund_test.go)
`

// newTestEngine is an engine named name on clk, deciding by allotLimits.
func newTestEngine(t *testing.T, name string, clk *testClock, r Router, p Peers, c Changes) *Engine {
	t.Helper()
	f, err := limits.Parse([]byte(allotLimits), "test")
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(Config{
		Name: name, Store: bucket.LocalConfig(), FallbackStore: bucket.LocalConfig(), Leases: lease.DefaultConfig(),
		MaxKeyBytes: 512,
	}, Deps{
		Limits: func() *limits.File { return f }, Clock: clk.now, Registry: prometheus.NewRegistry(),
		Router: r, Peers: p, Changes: c,
	})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// takeOne takes cost of (limit, key) at e and returns whether it was
// allowed and its source.
func takeOne(t *testing.T, e *Engine, limit, key string, cost int64) (bool, api.Source) {
	t.Helper()
	resp, err := e.Take(context.Background(), []api.Check{{Limit: limit, Key: key, Cost: cost}})
	if err != nil {
		t.Fatalf("take: %v", err)
	}
	return resp.Allowed, resp.Results[0].Source
}

// driveAsks sends the holder's queued asks now, in order, as its
// allotDriver would (which these tests do not run).
func driveAsks(e *Engine) int {
	n := 0
	for {
		select {
		case a := <-e.asks:
			e.askOwner(context.Background(), a)
			n++
		default:
			return n
		}
	}
}
