package jepsen

import (
	"fmt"
	"math"
	"time"
)

// SourceAllotment is the source of a take a non-owner node decided from
// the allotment its key's owner granted it (Op.Source).
const SourceAllotment = "allotment"

// decided reports whether o's answer came from the bucket itself, at its
// owner or from an allotment of it: every source but a local ceiling. Such
// admissions are real spends of the bucket, so without a fault they must
// fit it exactly.
func (o Op) decided() bool { return o.Source == "owner" || o.Source == SourceAllotment }

// decidedOps returns the ops of ops that the bucket itself decided
// (Op.decided): local ceilings' answers left out.
func decidedOps(ops []Op) []Op {
	var out []Op
	for _, o := range ops {
		if o.decided() {
			out = append(out, o)
		}
	}
	return out
}

// forwarded reports whether o was passed on to another node: decided by an
// owner other than the node asked, or answered from a local ceiling after
// a forward that failed.
func (o Op) forwarded() bool {
	return (o.Source == "owner" && o.Decider != "" && o.Decider != o.Node) || o.Source == "fallback"
}

// AllotCheck is what allotments did for one bucket of a limit with
// allotments: exactness and utilisation over the run and locality once
// settled.
type AllotCheck struct {
	ID    BucketID
	Owner string // the key's owner before any fault
	// Excess is the over-admission checker's worst window of the bucket
	// over the whole run (Excess), from every source, local ceilings
	// included: issue 18's exactness target is that it is 0, with no
	// fallback allowance.
	Excess Window
	// Decided is the same window over the admissions the bucket itself
	// decided, at its owner or from an allotment (Op.decided): local
	// ceilings left out. Under a fault that kills or cuts off the owner,
	// Excess counts the local ceilings' grants, which the fault's bound
	// allows; Decided says whether the bucket and its allotments
	// over-admitted on their own, which they must never do.
	Decided Window
	// Admitted is the cost of every take answered allowed, from any
	// source; Ideal is B + r·Span, Span the key's traffic from its first
	// call to its last return; Utilisation is Admitted / Ideal.
	Admitted    int64
	Span        time.Duration
	Ideal       float64
	Utilisation float64
	// From is the instant (on the run's base) from which the locality
	// figures count takes (their Call): the traffic's start plus
	// ScenarioConfig.AllotSettle.
	From int64
	// NonOwner is how many takes asked at a node other than Owner were
	// answered (allowed or denied) from From on; FromAllotment how many of
	// those came from an allotment; AllotShare their ratio.
	NonOwner, FromAllotment int
	AllotShare              float64
	// Requests is every take of the key from From on (timeouts and errors
	// included); Forwarded how many were passed to another node (Op's
	// forwarded: decided by an owner other than the node asked, or
	// answered from a local ceiling after a failed forward);
	// ForwardShare their ratio.
	Requests, Forwarded int
	ForwardShare        float64
}

// Targets of issue 18 that AllotTargets asserts on a run without faults.
const (
	AllotMinUtilisation = 0.95
	AllotMinShare       = 0.80
	AllotMaxForwarded   = 0.05
)

// CheckAllot measures allotments for the takes bops of one bucket id of
// limit b, owned by owner, counting locality from from on.
func CheckAllot(id BucketID, bops []Op, b Bucket, owner string, from int64) AllotCheck {
	ac := AllotCheck{ID: id, Owner: owner, From: from, Excess: Excess(bops, b, math.MinInt64, math.MaxInt64)}
	first, last := int64(math.MaxInt64), int64(math.MinInt64)
	for _, o := range bops {
		first, last = min(first, o.Call), max(last, o.Return)
		if o.Result == Allowed {
			ac.Admitted += o.Cost
		}
		if o.Call < from {
			continue
		}
		ac.Requests++
		if o.forwarded() {
			ac.Forwarded++
		}
		if o.Node != owner && (o.Result == Allowed || o.Result == Denied) {
			ac.NonOwner++
			if o.Source == SourceAllotment {
				ac.FromAllotment++
			}
		}
	}
	if last > first {
		ac.Span = time.Duration(last - first)
		ac.Ideal = b.Admits(last - first)
		ac.Utilisation = float64(ac.Admitted) / ac.Ideal
	}
	ac.Decided = Excess(decidedOps(bops), b, math.MinInt64, math.MaxInt64)
	ac.AllotShare = ratio(ac.FromAllotment, ac.NonOwner)
	ac.ForwardShare = ratio(ac.Forwarded, ac.Requests)
	return ac
}

func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// Failures are the targets ac misses: any excess over B + r·T in some
// window, utilisation below AllotMinUtilisation, non-owner answers from allotments below
// AllotMinShare, forwards at or above AllotMaxForwarded.
func (ac AllotCheck) Failures() []string {
	var out []string
	name := ac.ID.Limit + "/" + ac.ID.Key
	if w := ac.Excess; w.Excess > 1e-6 {
		out = append(out, fmt.Sprintf("allotments: %s admitted %d in [%.3fs, %.3fs] where B + r·T is %.1f: %.1f over, with no fault",
			name, w.Admitted, float64(w.Start)/1e9, float64(w.End)/1e9, w.Ideal, w.Excess))
	}
	if ac.Utilisation < AllotMinUtilisation {
		out = append(out, fmt.Sprintf("allotments: %s admitted %d of B + r·T = %.0f (%.1f%% < %.0f%%)",
			name, ac.Admitted, ac.Ideal, 100*ac.Utilisation, 100*AllotMinUtilisation))
	}
	if ac.NonOwner == 0 || ac.AllotShare < AllotMinShare {
		out = append(out, fmt.Sprintf("allotments: %s: %d of %d answers at non-owners from an allotment once settled (%.1f%% < %.0f%%)",
			name, ac.FromAllotment, ac.NonOwner, 100*ac.AllotShare, 100*AllotMinShare))
	}
	if ac.ForwardShare >= AllotMaxForwarded {
		out = append(out, fmt.Sprintf("allotments: %s: %d of %d requests forwarded once settled (%.1f%% >= %.0f%%)",
			name, ac.Forwarded, ac.Requests, 100*ac.ForwardShare, 100*AllotMaxForwarded))
	}
	return out
}

// String is the one-line summary of ac.
func (ac AllotCheck) String() string {
	return fmt.Sprintf("allotments %s/%s (owner %s): excess %.1f, %.1f without local ceilings; admitted %d of B + r·T %.0f over %v (%.1f%%); once settled %.1f%% of non-owner answers from an allotment (%d/%d), %.1f%% forwarded (%d/%d)",
		ac.ID.Limit, ac.ID.Key, ac.Owner, ac.Excess.Excess, ac.Decided.Excess, ac.Admitted, ac.Ideal, ac.Span.Round(100*time.Millisecond), 100*ac.Utilisation,
		100*ac.AllotShare, ac.FromAllotment, ac.NonOwner, 100*ac.ForwardShare, ac.Forwarded, ac.Requests)
}

// AllotScenario turns sc (a DefaultScenario with its fault set) into the
// hot-key-with-allotments workload of issue 18: the hot limit, capacity
// 200 at 100/s, with allotments: auto (threshold 10/s, horizon 50ms, TTL
// 1s); 8 callers per node, 24 on 3 nodes, each asking the nodes in turn
// (no client routing) 25 times a second, 95% of it on the hot keys at
// cost 1 and the rest on the cold keys; no lease traffic. Without a fault
// there is one hot key for 22 s and issue 18's targets are asserted
// (AllotTargets); with a fault, one hot key owned by each node, so the
// fault hits one key's owner and the other keys' holders.
func AllotScenario(sc ScenarioConfig) ScenarioConfig {
	sc.Hot = Limit{
		Name: "hot", Capacity: 200, RatePerSec: 100,
		Allot: &Allot{Threshold: "10/s", Horizon: 50 * time.Millisecond, TTL: time.Second},
	}
	sc.WorkersPerNode, sc.RatePerWorker, sc.HotShare = 8, 25, 0.95
	sc.RoundRobin, sc.UnitCost = true, true
	sc.HoldersPerNode = 0
	if sc.Fault == None {
		sc.HotKeys, sc.Before, sc.AllotTargets = 1, 22*time.Second, true
	}
	return sc
}
