package jepsen

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// BucketCheck is the over-admission verdict for one bucket.
type BucketCheck struct {
	ID                    BucketID
	Owner                 string
	Relation              Relation
	Whole                 Window
	Before, During, After Window
	// OwnerBefore is the excess before the fault of the decisions the
	// bucket itself made, at its owner or from an allotment of it (every
	// source but a local ceiling): exactness says it is 0.
	OwnerBefore   Window
	Bound         float64 // OwnerChanges*B + Allowance
	OwnerChanges  int
	Allowance     float64 // FallbackAllowance over the whole run
	Lost          float64 // LostDebits at the inject (crash with replication)
	BoundWhy      string
	Indeterminate int64
	Fallbacks     int // allowed decisions with source fallback
	Allotted      int // allowed decisions with source allotment
	Pass          bool
}

// check fills res's verdicts from the history all, whose phases the fault
// bounds (before: up to tInject, during: up to tHeal, after: to tEnd; for
// leases, after ends at tSettle and settled follows): availability,
// over-admission per bucket, leases and linearizability. It then appends
// the failures they imply, in that order, and sets res.Pass.
func check(res *Result, sc ScenarioConfig, all []Op, owner map[BucketID]string, nm Nemesis, n int, tInject, tHeal, tSettle, tEnd int64) {
	ops := TakeOps(all)
	phases := []Phase{{"before", 0, tInject}, {"during", tInject, tHeal}, {"after", tHeal, tEnd + 1}}
	leasePhases := []Phase{phases[0], phases[1], {"after", tHeal, tSettle}, {"settled", tSettle, tEnd + 1}}
	hitNames := make(map[string]bool)
	for _, t := range nm.Targets {
		hitNames[Name(t)] = true
	}
	checkAvail(res, ops, phases, hitNames)
	fault := sc.Fault
	if sc.Standalone {
		fault = None
	}
	checkBuckets(res, sc, ops, owner, hitNames, fault, n, phases)
	checkAllots(res, sc, ops, owner)
	if hotDeniedBefore(ops, sc.Hot.Name, tInject) == 0 && tInject > 0 {
		res.Failures = append(res.Failures, "sanity: hot keys were never denied before the fault (not saturated; the check is vacuous)")
	}
	checkLeases(res, sc, all, owner, hitNames, fault, n, leasePhases)
	if fault == Pause {
		// A stopped node decides what it held once it resumes: within a
		// forward deadline, well inside a second.
		checkLinear(res, sc, HeldUntil(ops, hitNames, owner, tInject, tHeal+int64(time.Second)))
	} else {
		checkLinear(res, sc, ops)
	}
	judgeBuckets(res, sc.ExpectViolation)
	res.Pass = len(res.Failures) == 0
}

// checkAvail sets res's availability of the takes ops in each phase, and
// during the fault on the nodes it did not hit (hit holds the names of
// those it did). Fewer than 95% answered before the fault fails the run:
// the cluster was not healthy to begin with.
func checkAvail(res *Result, ops []Op, phases []Phase, hit map[string]bool) {
	res.Avail = make(map[string]Availability)
	for _, p := range phases {
		res.Avail[p.Name] = Availabilities(ops, p, nil)
	}
	res.AvailOther = Availabilities(ops, phases[1], func(o Op) bool { return !hit[o.Node] })
	if b := res.Avail["before"]; b.Share() < 0.95 {
		res.Failures = append(res.Failures, fmt.Sprintf("sanity: only %.1f%% answered before the fault", 100*b.Share()))
	}
}

// checkBuckets sets res.Buckets to the over-admission verdict of every
// bucket of the takes ops, sorted by limit and key, under the bound of
// fault on a cluster of n, and sets res.Detected when a bucket is over its
// bound. It appends no failure: judgeBuckets does, once the other checks
// have run.
func checkBuckets(res *Result, sc ScenarioConfig, ops []Op, owner map[BucketID]string, hit map[string]bool, fault Fault, n int, phases []Phase) {
	limits := map[string]Limit{sc.Hot.Name: sc.Hot, sc.Cold.Name: sc.Cold}
	for id, bops := range GroupByBucket(ops) {
		rel := OwnedElsewhere
		if hit[owner[id]] {
			rel = OwnedByTarget
		}
		bd := FaultBound(fault, rel, n)
		if limits[id.Limit].Allot != nil {
			bd.Why += "; " + AllotBoundNote
		}
		bc := checkBucket(id, bops, limits[id.Limit].Bucket(), owner[id], rel, bd, hit, phases)
		if !bc.Pass {
			res.Detected = true
		}
		res.Buckets = append(res.Buckets, bc)
	}
	slices.SortFunc(res.Buckets, func(a, b BucketCheck) int {
		return strings.Compare(a.ID.Limit+"/"+a.ID.Key, b.ID.Limit+"/"+b.ID.Key)
	})
}

// AllotBoundNote is what a limit's allotments add to a fault's bound:
// nothing. The owner debits an allotment before it grants it and caps its
// bucket at capacity minus the tokens outstanding, so what owner and
// holders admit together is the bucket's own B + r·T; a holder that dies
// strands at most its allotment (tokens lost, under-admission), and a
// holder cut off stops at its allotment's expiry.
const AllotBoundNote = "allotments add nothing: a dead or cut-off holder strands at most its allotment (under-admission)"

// checkBucket is the over-admission verdict of bucket id, b, from its
// takes bops, under bound bd. It passes when the owner's decisions alone
// were exact before the fault, the bucket's excess before the fault is
// within the fallback allowance then, and its excess over the whole run is
// within bd (with the debits lost in a crashed owner's last interval when
// bd counts them; phases[1] starts at the inject).
func checkBucket(id BucketID, bops []Op, b Bucket, owner string, rel Relation, bd Bound, hit map[string]bool, phases []Phase) BucketCheck {
	allotted := 0
	for _, o := range bops {
		if o.Source == SourceAllotment && o.Result == Allowed {
			allotted++
		}
	}
	allow, nfb := FallbackAllowance(bops, b, bd.Members, math.MinInt64, math.MaxInt64)
	allowBefore, _ := FallbackAllowance(bops, b, bd.Members, phases[0].Start, phases[0].End)
	lost := 0.0
	if bd.LastInterval {
		lost = LostDebits(bops, hit, phases[1].Start)
	}
	bc := BucketCheck{
		ID: id, Owner: owner, Relation: rel,
		Whole:         Excess(bops, b, math.MinInt64, math.MaxInt64),
		Before:        Excess(bops, b, phases[0].Start, phases[0].End),
		During:        Excess(bops, b, phases[1].Start, phases[1].End),
		After:         Excess(bops, b, phases[2].Start, phases[2].End),
		OwnerBefore:   Excess(decidedOps(bops), b, phases[0].Start, phases[0].End),
		Bound:         bd.Tokens(b, allow, lost),
		OwnerChanges:  bd.OwnerChanges,
		Allowance:     allow,
		Lost:          lost,
		BoundWhy:      bd.Why,
		Indeterminate: Indeterminate(bops),
		Fallbacks:     nfb,
		Allotted:      allotted,
	}
	const eps = 1e-6
	bc.Pass = bc.OwnerBefore.Excess <= eps && bc.Before.Excess <= allowBefore+eps && bc.Whole.Excess <= bc.Bound+eps
	return bc
}

// checkAllots sets res.Allot to the allotment figures of every bucket of a
// limit with allotments (the hot limit) and, with sc.AllotTargets, appends
// the targets each misses to res.Failures.
func checkAllots(res *Result, sc ScenarioConfig, ops []Op, owner map[BucketID]string) {
	if sc.Hot.Allot == nil {
		return
	}
	settle := sc.AllotSettle
	if settle == 0 {
		settle = 2 * time.Second
	}
	for _, bc := range res.Buckets {
		if bc.ID.Limit != sc.Hot.Name {
			continue
		}
		var bops []Op
		for _, o := range ops {
			if o.Limit == bc.ID.Limit && o.Key == bc.ID.Key {
				bops = append(bops, o)
			}
		}
		ac := CheckAllot(bc.ID, bops, sc.Hot.Bucket(), owner[bc.ID], int64(settle))
		res.Allot = append(res.Allot, ac)
		if sc.AllotTargets {
			res.Failures = append(res.Failures, ac.Failures()...)
		}
	}
}

// hotDeniedBefore counts the takes of ops on limit hot denied before
// tInject: none means the hot keys were never saturated.
func hotDeniedBefore(ops []Op, hot string, tInject int64) int {
	denied := 0
	for _, o := range ops {
		if o.Limit == hot && o.Result == Denied && o.Call < tInject {
			denied++
		}
	}
	return denied
}

// judgeBuckets appends the failures of res.Buckets' verdicts: one per
// bucket over its bound or, in the broken-build run (expectViolation),
// one if no bucket was.
func judgeBuckets(res *Result, expectViolation bool) {
	if expectViolation {
		if !res.Detected {
			res.Failures = append(res.Failures, "acceptance: the broken build's over-admission went undetected")
		}
		return
	}
	for _, bc := range res.Buckets {
		if !bc.Pass {
			res.Failures = append(res.Failures, fmt.Sprintf("over-admission: %s/%s (%s, owner %s): excess %.1f > bound %.1f (%d owner changes, %.0f debits of the crashed owner's last interval, fallback allowance %.1f from %d fallback admissions); before the fault: excess %.1f, owner and allotment decisions alone %.1f",
				bc.ID.Limit, bc.ID.Key, bc.Relation, bc.Owner, bc.Whole.Excess, bc.Bound, bc.OwnerChanges, bc.Lost, bc.Allowance, bc.Fallbacks, bc.Before.Excess, bc.OwnerBefore.Excess))
		}
	}
}

// checkLeases fills res's lease verdicts. A key over its bound fails the
// run, except in the broken-build acceptance run, where it is expected.
func checkLeases(res *Result, sc ScenarioConfig, all []Op, owner map[BucketID]string, hitNames map[string]bool, fault Fault, n int, phases []Phase) {
	rel := func(id BucketID) Relation {
		if hitNames[owner[id]] {
			return OwnedByTarget
		}
		return OwnedElsewhere
	}
	tInject := int64(0)
	if len(phases) > 1 {
		tInject = phases[1].Start
	}
	res.Leases = CheckLeases(all, phases, time.Duration(sc.Conc.MaxLeaseTTL)*time.Millisecond,
		func(id BucketID) LeaseBound {
			lb := NewLeaseBound(sc.Conc, fault, rel(id), n)
			if FaultBound(fault, rel(id), n).LastInterval {
				lb = lb.WithLost(LostGrants(all, id, tInject))
			}
			return lb
		},
		func(id BucketID) (string, Relation) { return owner[id], rel(id) })
	for _, k := range res.Leases {
		if k.Pass {
			continue
		}
		res.LeaseDetected = true
		if sc.ExpectViolation {
			continue
		}
		if w := k.Worst(); w.Max > w.Bound {
			res.Failures = append(res.Failures, fmt.Sprintf("leases: %s/%s (%s, owner %s): %d held at once %s (at %.3fs) > bound %d (%s)",
				k.ID.Limit, k.ID.Key, k.Relation, k.Owner, w.Max, w.Phase, float64(w.At)/1e9, w.Bound, k.Bound.Why))
		}
		if len(k.FencingHealthy) > 0 {
			v := k.FencingHealthy[0]
			res.Failures = append(res.Failures, fmt.Sprintf("leases: %s/%s: %d owner grants of a healthy phase with a fencing token not above an earlier one (first: %d at %.3fs after %d at %.3fs)",
				k.ID.Limit, k.ID.Key, len(k.FencingHealthy), v.Later.Fencing, float64(v.Later.Call)/1e9, v.Earlier.Fencing, float64(v.Earlier.Return)/1e9))
		}
		if len(k.Leaks) > 0 {
			l := k.Leaks[0]
			res.Failures = append(res.Failures, fmt.Sprintf("leases: %s/%s: %d acquires refused %s while fewer than %d leases could be held (first at %.3fs by %s, at most %d held; %d abandoned leases expired before it): a lease was not reclaimed",
				k.ID.Limit, k.ID.Key, len(k.Leaks), l.Phase, k.Bound.Healthy, float64(l.Refused.Call)/1e9, l.Refused.Node, l.MostHeld, l.Abandoned))
		}
	}
}

// checkLinear fills res's linearizability verdicts: every instance of an
// owner's bucket must replay its decisions exactly. A failed instance
// fails the run (porcupine's visualization is written next to the
// history), except in the broken-build run.
//
// The buckets of a limit with allotments are not replayed: a grant debits
// the owner's bucket outside the history and caps its capacity by the
// tokens outstanding, so its answers are not those of one bucket of
// capacity B. Their limits go to res.LinearSkipped; the over-admission
// checker still bounds them.
func checkLinear(res *Result, sc ScenarioConfig, ops []Op) {
	limits := map[string]Limit{sc.Hot.Name: sc.Hot, sc.Cold.Name: sc.Cold}
	var keep []Op
	for _, l := range []Limit{sc.Hot, sc.Cold} {
		if l.Allot != nil {
			res.LinearSkipped = append(res.LinearSkipped, l.Name)
		}
	}
	for _, o := range ops {
		if limits[o.Limit].Allot == nil {
			keep = append(keep, o)
		}
	}
	res.Linear = CheckLinear(keep, func(name string) (Limit, bool) { l, ok := limits[name]; return l, ok }, sc.Dir, 30*time.Second)
	for _, lc := range res.Linear {
		if lc.Pass {
			continue
		}
		res.LinearDetected = true
		if sc.ExpectViolation {
			continue
		}
		res.Failures = append(res.Failures, fmt.Sprintf("linearizability: %s/%s instance %s (%d decisions, %d timeouts): %s; see %s",
			lc.ID.Limit, lc.ID.Key, lc.Instance, lc.Ops, lc.Unknown, lc.Result, lc.Visualization))
	}
}
