package engine

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/bucket"
	"github.com/weir-rl/weir/lease"
	"github.com/weir-rl/weir/node/limits"
	"github.com/weir-rl/weir/node/placement"
)

// overloadLimits refill nothing that matters on the frozen test clock:
// "local" and "shut" are the default and closed policies, "lax" is open,
// "db" is a concurrency limit.
const overloadLimits = `version: 1
limits:
  - name: local
    algorithm: token_bucket
    capacity: 50
    rate: 1/h
  - name: shut
    algorithm: token_bucket
    capacity: 50
    rate: 1/h
    on_owner_unreachable: closed
  - name: lax
    algorithm: token_bucket
    capacity: 50
    rate: 1/h
    on_owner_unreachable: open
  - name: allotted
    algorithm: token_bucket
    capacity: 50
    rate: 1/h
    allotments: auto
    allotment_threshold: 10/s
    allotment_horizon: 50ms
    allotment_ttl: 500ms
  - name: db
    kind: concurrency
    permits: 4
    lease_ttl: 10s
`

// suspectable is a sender's Router: every key is owned by "owner", alive
// until suspect is set, then placed on a local ceiling as gossip does for
// a suspect member.
type suspectable struct {
	SingleNode
	suspect atomic.Bool
}

func (s *suspectable) Place(string, string) placement.Placement {
	if s.suspect.Load() {
		return placement.Placement{Kind: placement.Ceiling, Reason: placement.Unreachable}
	}
	return placement.Placement{Kind: placement.Forward, Peer: "owner", Addr: "owner"}
}

func (s *suspectable) PlaceLease(limit, key string) placement.Placement { return s.Place(limit, key) }

func (*suspectable) Known() int { return 2 }

// slowOwner is a sender's Peers whose owner is alive but slow: each take
// or acquire is decided (and spent) at the owner engine, and its answer
// comes after the sender's deadline, as ErrOwnerLate. With refuse set, the
// owner refuses it as past its deadline instead, spending nothing.
type slowOwner struct {
	direct
	refuse bool
	onLate func() // called as the late answer is given, if set
}

func (s *slowOwner) late() error {
	if s.onLate != nil {
		s.onLate()
	}
	return errLate
}

var errLate = fmt.Errorf("%w: the answer came after the deadline", ErrOwnerLate)

func (s *slowOwner) Take(ctx context.Context, peer string, checks []api.Check, id string) ([]api.Result, bool, error) {
	if !s.refuse {
		_, _, _ = s.direct.Take(ctx, peer, checks, id)
	}
	return nil, false, s.late()
}

func (s *slowOwner) Allot(context.Context, string, api.AllotRequest) (api.AllotResponse, error) {
	return api.AllotResponse{}, s.late()
}

func (s *slowOwner) Acquire(ctx context.Context, peer string, req api.AcquireRequest) (api.AcquireResponse, error) {
	if !s.refuse {
		_, _ = s.direct.Acquire(ctx, peer, req)
	}
	return api.AcquireResponse{}, s.late()
}

// newOverloadEngine is an engine on clk deciding by overloadLimits, with
// its own registry.
func newOverloadEngine(t *testing.T, clk *testClock, r Router, p Peers) (*Engine, *prometheus.Registry) {
	t.Helper()
	f, err := limits.Parse([]byte(overloadLimits), "test")
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	e, err := New(Config{
		Name: "n", Store: bucket.LocalConfig(), FallbackStore: bucket.LocalConfig(), Leases: lease.DefaultConfig(), MaxKeyBytes: 512,
	}, Deps{Limits: func() *limits.File { return f }, Clock: clk.now, Registry: reg, Router: r, Peers: p, Changes: NoChanges{}})
	if err != nil {
		t.Fatal(err)
	}
	return e, reg
}

// overloadedCount reads weir_overloaded_total{limit, answer} from reg.
func overloadedCount(t *testing.T, reg *prometheus.Registry, limit, answer string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "weir_overloaded_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			if labels["limit"] == limit && labels["answer"] == answer {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// TestSlowOwnerIsOverloadNotFallback: a forward whose owner, alive, answers
// after the deadline is never decided from the sender's local ceiling:
// default and closed limits answer limiter_overloaded, an open limit
// allows without spending, and the owner's bucket alone bounds what is
// admitted (here 0 at the sender, where the fallback share would have
// admitted 25 on top of the owner's 50). Once gossip holds the owner
// suspect, the same step falls back as before.
func TestSlowOwnerIsOverloadNotFallback(t *testing.T) {
	for _, refuse := range []bool{false, true} {
		t.Run(fmt.Sprintf("owner refuses expired %v", refuse), func(t *testing.T) {
			clk := newTestClock()
			owner, _ := newOverloadEngine(t, clk, SingleNode{}, NoPeers{})
			router := &suspectable{}
			slow := &slowOwner{direct: direct{owner: owner}, refuse: refuse}
			sender, reg := newOverloadEngine(t, clk, router, slow)
			ctx := context.Background()

			for _, limit := range []string{"local", "shut"} {
				for i := range 100 {
					resp, err := sender.Take(ctx, []api.Check{{Limit: limit, Key: "k", Cost: 1}})
					if apiErr, ok := errors.AsType[*api.Error](err); !ok || apiErr.Code != api.CodeOverloaded {
						t.Fatalf("%s take %d: %+v, %v; want limiter_overloaded", limit, i, resp, err)
					}
				}
				if got := overloadedCount(t, reg, limit, overloadRefused); got != 100 {
					t.Errorf("%s: weir_overloaded_total{answer=refused} = %v, want 100", limit, got)
				}
				// The owner's bucket is all that was spent: what the owner
				// still admits plus what the sender admitted (none) is at
				// most its capacity, 50 less whatever the late forwards
				// spent there.
				admitted := 0
				for range 60 {
					if ok, _ := takeOne(t, owner, limit, "k", 1); ok {
						admitted++
					}
				}
				if want := map[bool]int{false: 0, true: 50}[refuse]; admitted != want {
					t.Errorf("%s: the owner admits %d more, want %d (late forwards spent %v)", limit, admitted, want, !refuse)
				}
			}
			if n := sender.fallback.Len(); n != 0 {
				t.Errorf("sender holds %d fallback buckets; nothing may be decided from a local ceiling", n)
			}

			resp, err := sender.Take(ctx, []api.Check{{Limit: "lax", Key: "k", Cost: 1}})
			if err != nil || !resp.Allowed || resp.Results[0].Source != api.SourceFallback {
				t.Fatalf("open limit: %+v, %v; want allowed without the owner", resp, err)
			}
			if got := overloadedCount(t, reg, "lax", overloadOpen); got != 1 {
				t.Errorf("lax: weir_overloaded_total{answer=open} = %v, want 1", got)
			}
			if _, err := sender.Acquire(ctx, api.AcquireRequest{Limit: "db", Key: "k", Holder: "h"}); err == nil {
				t.Fatal("acquire with a slow owner granted")
			} else if apiErr, ok := errors.AsType[*api.Error](err); !ok || apiErr.Code != api.CodeOverloaded {
				t.Fatalf("acquire with a slow owner: %v, want limiter_overloaded", err)
			}

			if _, err := sender.Allot(ctx, api.AllotRequest{Limit: "allotted", Key: "k", Holder: "c1", Want: 5}); err == nil {
				t.Fatal("allotment with a slow owner granted")
			} else if apiErr, ok := errors.AsType[*api.Error](err); !ok || apiErr.Code != api.CodeOverloaded {
				t.Fatalf("allotment with a slow owner: %v, want limiter_overloaded", err)
			}

			// Gossip comes to hold the owner suspect while each forward
			// waits: unreachable, and a local share of 25 answers.
			slow.onLate = func() { router.suspect.Store(true) }
			allowed := 0
			for range 30 {
				router.suspect.Store(false)
				if ok, src := takeOne(t, sender, "local", "k2", 1); ok {
					allowed++
					if src != api.SourceFallback {
						t.Fatalf("suspect owner: source %v, want fallback", src)
					}
				}
			}
			if allowed != 25 {
				t.Errorf("suspect owner: %d allowed from the local ceiling, want 25", allowed)
			}
		})
	}
}
