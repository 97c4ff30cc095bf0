package jepsen

import (
	"math"
	"time"
)

// Fault names a nemesis kind.
type Fault string

// The faults. None is a run without faults (and the acceptance run of a
// broken build); its bound is exactness up to fallback decisions.
const (
	None          Fault = "none"
	Kill          Fault = "kill"           // SIGKILL, restart after the fault length
	Pause         Fault = "pause"          // SIGSTOP, SIGCONT after the fault length
	Isolate       Fault = "isolate"        // one node's peer traffic silently dropped
	LongPartition Fault = "long-partition" // isolate for longer than GossipToTheDeadTime
	Split         Fault = "split"          // a minority half cut from the majority half
	Loss          Fault = "loss"           // random loss of one node's peer packets
	Leave         Fault = "leave"          // SIGTERM (graceful leave), restart after the fault length
	// Skew restarts a node gracefully with its decision clock 30 s ahead
	// (weir serve --test-clock-offset), and back at the heal: every bucket
	// it hands over or takes in crosses clocks that disagree by 30 s, which
	// would be a full bucket each way if state crossed as timestamps.
	Skew Fault = "skew"
	// Ring is Jepsen's majorities ring: the nodes are placed on a ring and
	// each hears only the majority nearest it (itself included), dropping
	// what the others send. Every node sees a majority, but no two see the
	// same one. With 3 nodes each cut is one-way: each node is deaf to its
	// predecessor.
	Ring Fault = "ring"
	// Upgrade is a rolling upgrade: each node in turn leaves gracefully
	// (SIGTERM) and starts again from the new binary
	// (ClusterConfig.FromBin is the old one), the next only once every
	// node agrees on the members again.
	Upgrade Fault = "upgrade"
)

// Relation says how a bucket's owner (before the fault) relates to the
// nodes the fault hits.
type Relation string

const (
	// OwnedByTarget means the key's owner is hit by the fault (or is on the
	// minority side of a split).
	OwnedByTarget Relation = "target-owned"
	// OwnedElsewhere means the key's owner is not hit.
	OwnedElsewhere Relation = "other-owned"
)

// Bound is the design bound on one bucket's excess under one fault
// (docs/placement-and-replication.md):
//
//	OwnerChanges*B  +  LostDebits  +  sum over nodes that decided from fallback of
//	                                  (max(1, floor(B/Members)) + r/Members * span)
//
// The first term: a new owner that could not get the bucket starts it
// full. The second, for a crash with replication on (LastInterval): the
// successor starts the key from its replica, which misses only the debits
// of the owner's last replication interval, taken from the history
// (LostDebits). The third is what local ceilings admit by construction: a
// node's ceiling holds one share and refills at r/Members, so over the
// span from its first fallback decision on the key to its last allowed one
// it admits at most a share plus the refill. The spans come from the
// history (FallbackAllowance); everything else is the design's.
type Bound struct {
	OwnerChanges int
	// LastInterval: a crash of the key's owner costs the debits of its last
	// replication interval (LostDebits) instead of a full bucket.
	LastInterval bool
	Members      int // the N the local ceilings divide by (known members)
	Why          string
}

// Tokens evaluates the bound for bucket b given the fallback allowance fb
// (from FallbackAllowance) and the lost debits lost (from LostDebits; only
// counted with LastInterval).
func (bd Bound) Tokens(b Bucket, fb, lost float64) float64 {
	if !bd.LastInterval {
		lost = 0
	}
	return float64(bd.OwnerChanges)*b.Capacity + lost + fb
}

// LostWindow is how far before a crash the owner's debits may be missing
// from its successor's replica: one replication interval (20ms) for the
// batch not yet sent, one for the batch in flight, and the forward
// deadline (50ms) for decisions whose answers were still on their way.
const LostWindow = 90 * time.Millisecond

// LostDebits is the cost the owner nodes decided (Decider in owners,
// Source "owner", allowed) with a Return in [at - LostWindow, at]: what a
// crash at at may take away from the successor's replica. Decisions
// answered later were made before the crash too, but their Return bounds
// them only from above; the window's width covers them.
func LostDebits(ops []Op, owners map[string]bool, at int64) float64 {
	total := 0.0
	for _, o := range ops {
		if o.lostAt(at) && owners[o.Decider] {
			total += float64(o.Cost)
		}
	}
	return total
}

// lostAt reports whether o is a decision a crash at at may take away from
// the successor's replica: allowed by an owner (Source "owner"; fallback
// and allotment answers never were in the owner's bucket as decisions of
// their own) and answered within LostWindow before at or still on its way
// then. LostDebits and LostGrants both count with it, so a take and a
// lease acquire of the same crash are counted alike.
func (o Op) lostAt(at int64) bool {
	return o.Result == Allowed && o.Source == "owner" && o.Return >= at-int64(LostWindow) && o.Call <= at
}

// Share is a local ceiling's capacity: max(1, floor(B/n)).
func Share(b Bucket, n int) float64 { return math.Max(1, math.Floor(b.Capacity/float64(max(n, 1)))) }

// FallbackAllowance is what the local ceilings of n known members may have
// admitted for one bucket: for every node that answered from fallback in
// ops (decisions with Source "fallback" and Call in [from, to]), one share
// plus r/n for the span from its first fallback decision to the Return of
// its last allowed one. It also returns how many allowed fallback decisions
// there were.
func FallbackAllowance(ops []Op, b Bucket, n int, from, to int64) (float64, int) {
	type span struct {
		first, last int64
		any         bool
	}
	spans := make(map[string]*span)
	count := 0
	for _, o := range ops {
		if o.Source != "fallback" || o.Call < from || o.Call > to {
			continue
		}
		s := spans[o.Node]
		if s == nil {
			s = &span{first: o.Call, last: o.Call}
			spans[o.Node] = s
		}
		s.first = min(s.first, o.Call)
		if o.Result == Allowed {
			s.last = max(s.last, o.Return)
			s.any = true
			count++
		}
	}
	total := 0.0
	for _, s := range spans {
		if !s.any {
			continue
		}
		total += Share(b, n) + b.Rate/float64(max(n, 1))*float64(s.last-s.first)/1e9
	}
	return total, count
}

// FaultBound returns the owner-change part of the bound for a bucket with
// relation rel under fault f in a cluster of n nodes.
func FaultBound(f Fault, rel Relation, n int) Bound {
	target := rel == OwnedByTarget
	switch f {
	case Kill:
		if target {
			return Bound{
				LastInterval: true, Members: n,
				Why: "takeover starts from the successor's replica (+ the last interval's debits); the restarted owner pulls the key back",
			}
		}
		return Bound{Members: n, Why: "a minority crash changes nothing for the rest"}
	case Pause:
		if target {
			return Bound{
				OwnerChanges: 2, Members: n,
				Why: "takeover starts full (+B); the owner's return may lose the debt again (+B)",
			}
		}
		return Bound{Members: n, Why: "a minority crash changes nothing for the rest"}
	case Isolate, LongPartition, Split:
		if target {
			return Bound{
				OwnerChanges: 2, Members: n,
				Why: "majority takes over full (+B), owner returns (+B); the minority answers from local ceilings",
			}
		}
		return Bound{Members: n, Why: "minority nodes answer from local ceilings for keys owned across the cut"}
	case Loss:
		if target {
			return Bound{
				OwnerChanges: 2, Members: n,
				Why: "a lossy owner may be declared dead and return (+2B)",
			}
		}
		return Bound{Members: n, Why: "the lossy node falls back when its forwards fail"}
	case Ring:
		// Every node is hit and every node sees a majority, so each may
		// take a key over from a full bucket once its view loses the
		// owner, and the owner's return may lose the debt again.
		return Bound{
			OwnerChanges: n + 1, Members: n,
			Why: "every node sees a majority: up to N takeovers from a full bucket plus the owner's return (+(N+1)B)",
		}
	case Leave, Skew, Upgrade:
		// A graceful leave is forgotten at once, so ceilings divide by n-1;
		// the leaving owner hands its buckets over, keeping their debt.
		return Bound{Members: max(n-1, 1), Why: "a leaving owner hands its buckets over (debt kept)"}
	default:
		return Bound{Members: n, Why: "exactness without faults (up to fallback decisions)"}
	}
}
