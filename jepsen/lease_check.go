package jepsen

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"
)

// ConcLimit is a concurrency limit written to the run's limits file.
type ConcLimit struct {
	Name        string
	Permits     int
	LeaseTTLms  int64
	MaxLeaseTTL int64 // milliseconds
	Strict      bool
}

// LeaseBound is the most leases of one (limit, key) the design allows to be
// valid at one instant. Healthy is the bound while no fault has been
// injected: Permits. Faulty applies from the inject to the end of the run:
//
//	Permits + T*Share + L + R*Permits + Members*Share
//
// with Share = max(1, floor(Permits/Members)): the owner's table holds at
// most Permits; a takeover after the owner fails (T = 1 when the fault hits
// the key's owner; 0 for strict limits, and 0 for a crash with
// replication, whose successor knows the leases from its replica) grants
// at most one Share for one max_lease_ttl while the old owner's leases may
// still run; L, for a crash with replication, the leases granted in the
// owner's last replication interval, which the replica may miss
// (LostGrants); a second table
// that grants in full while the first still holds leases (R = 1 when the
// fault hits the owner: a cut-off owner that keeps granting while the
// majority's owner does after its window, or a restarted owner that grants
// from an empty table before the interim owner's leases are handed back);
// and every node that cannot reach the owner grants from a local ceiling
// of one Share.
type LeaseBound struct {
	Healthy, Faulty int
	// Share is one local ceiling, max(1, floor(permits/members)): in a
	// healthy phase, every node that granted from its ceiling (a forward
	// that missed its deadline) adds one to Healthy, as for takes.
	Share int
	Why   string
}

// NewLeaseBound returns the bound of a key of limit l whose owner has
// relation rel to fault f in a cluster of n nodes.
func NewLeaseBound(l ConcLimit, f Fault, rel Relation, n int) LeaseBound {
	fb := FaultBound(f, rel, n)
	share := int(Share(Bucket{Capacity: float64(l.Permits)}, fb.Members))
	takeovers, returns := min(fb.OwnerChanges, 1), max(fb.OwnerChanges-1, 0)
	if fb.LastInterval {
		// A crash with replication: the takeover starts from the replica
		// (WithLost adds what it may miss); the restarted owner may still
		// grant from an empty table before the key is pulled back.
		takeovers, returns = 0, 1
	}
	if l.Strict {
		takeovers = 0
	}
	return LeaseBound{
		Share:   share,
		Healthy: l.Permits,
		Faulty:  l.Permits + takeovers*share + returns*l.Permits + fb.Members*share,
		Why: fmt.Sprintf("permits %d + %d takeover x share %d + %d second table x permits + %d local ceilings x share %d",
			l.Permits, takeovers, share, returns, fb.Members, share),
	}
}

// WithLost returns lb with the faulty bound raised by lost leases the
// successor's replica may have missed (LostGrants).
func (lb LeaseBound) WithLost(lost int) LeaseBound {
	lb.Faulty += lost
	lb.Why += fmt.Sprintf(" + %d granted in the crashed owner's last interval", lost)
	return lb
}

// LostGrants counts the grants of key id answered by an owner within
// LostWindow before a crash at at: the leases the successor's replica may
// not name. It filters as LostDebits does (Op.lostAt: allowed, Source
// "owner", in the window); the decider is the key's owner, since lease
// answers name no decider and the caller asks only for keys the crashed
// node owned.
func LostGrants(ops []Op, id BucketID, at int64) int {
	n := 0
	for _, o := range ops {
		if o.Kind == KindAcquire && o.Limit == id.Limit && o.Key == id.Key && o.lostAt(at) {
			n++
		}
	}
	return n
}

// HeldInterval is the span in which one granted lease was surely valid:
// from the acquire's Return to the earliest of its release's Call, the
// Call of a renew answered 404 (the holder is told to stop) and the latest
// expiry it was surely given (an acquire's or successful renew's Call plus
// the granted lifetime). The server decided inside [Call,
// Return], so the lease was valid at least over this span.
type HeldInterval struct {
	ID         string
	Node       string
	Start, End int64
	Fencing    uint64
}

// HeldIntervals returns the surely-held spans of the granted leases of one
// (limit, key) in ops (lease ops of that key, any order). Leases whose span
// is empty are left out.
func HeldIntervals(ops []Op) []HeldInterval {
	var out []HeldInterval
	for _, l := range leaseLives(ops, 0) {
		if end := min(l.sureExpiry, l.sureEnd); end > l.acq.Return {
			out = append(out, HeldInterval{ID: l.acq.LeaseID, Node: l.acq.Node, Start: l.acq.Return, End: end, Fencing: l.acq.Fencing})
		}
	}
	return out
}

// leaseLife is what the ops of one granted lease bound about its life, on
// both sides of the uncertainty [Call, Return] of each op: the latest
// expiry it was surely given (Call + TTL of its grant and successful
// renews) and when its holder surely stopped counting on it (the Call of
// any release or of a renew answered 404), for the surely-held span; the
// latest expiry it may have been given (Return + TTL, or + maxTTL for a
// renew that timed out) and when it surely ended (the Return of a release
// answered 204 or of a renew answered 404), for the possibly-held span.
type leaseLife struct {
	acq                         Op
	sureExpiry, sureEnd         int64
	possibleExpiry, possibleEnd int64
}

// leaseLives returns the life of every granted lease in ops (lease ops of
// one key, any order), in grant order.
func leaseLives(ops []Op, maxTTL int64) []*leaseLife {
	byID := make(map[string]*leaseLife)
	var order []*leaseLife
	for _, o := range ops {
		if o.Kind == KindAcquire && o.Result == Allowed && o.LeaseID != "" {
			l := &leaseLife{
				acq:        o,
				sureExpiry: o.Call + o.TTLms*1e6, sureEnd: math.MaxInt64,
				possibleExpiry: o.Return + o.TTLms*1e6, possibleEnd: math.MaxInt64,
			}
			byID[o.LeaseID] = l
			order = append(order, l)
		}
	}
	for _, o := range ops {
		l := byID[o.LeaseID]
		if l == nil {
			continue
		}
		switch {
		case o.Kind == KindRenew && o.Result == Allowed:
			l.sureExpiry = max(l.sureExpiry, o.Call+o.TTLms*1e6)
			l.possibleExpiry = max(l.possibleExpiry, o.Return+o.TTLms*1e6)
		case o.Kind == KindRenew && o.Result == Timeout:
			l.possibleExpiry = max(l.possibleExpiry, o.Return+maxTTL)
		case o.Kind == KindRenew && o.Result == Denied:
			// A renew answered 404 tells the holder to stop: from its
			// call on the holder no longer counts on the lease.
			l.sureEnd = min(l.sureEnd, o.Call)
			l.possibleEnd = min(l.possibleEnd, o.Return)
		case o.Kind == KindRelease:
			l.sureEnd = min(l.sureEnd, o.Call)
			if o.Result == Allowed {
				l.possibleEnd = min(l.possibleEnd, o.Return)
			}
		}
	}
	return order
}

// PhaseMax is the most leases of one key surely held at one instant of a
// phase, and when.
type PhaseMax struct {
	Phase string
	Max   int
	At    int64
	Bound int
}

// MaxHeld returns, per phase, the most intervals that overlap at one
// instant inside the phase. Touching intervals (one ends where the other
// starts) do not overlap, so the count never exceeds the truth.
func MaxHeld(iv []HeldInterval, phases []Phase) []PhaseMax {
	type ev struct {
		at    int64
		delta int
	}
	evs := make([]ev, 0, 2*len(iv))
	for _, h := range iv {
		evs = append(evs, ev{h.Start, +1}, ev{h.End, -1})
	}
	slices.SortFunc(evs, func(a, b ev) int {
		if c := cmp.Compare(a.at, b.at); c != 0 {
			return c
		}
		return cmp.Compare(a.delta, b.delta) // ends first
	})
	out := make([]PhaseMax, len(phases))
	for i, p := range phases {
		out[i].Phase = p.Name
	}
	n := 0
	for _, e := range evs {
		n += e.delta
		if e.delta < 0 {
			continue
		}
		for i, p := range phases {
			if e.at >= p.Start && e.at < p.End && n > out[i].Max {
				out[i].Max, out[i].At = n, e.at
			}
		}
	}
	// A phase that starts while leases are held counts them at its start.
	for i, p := range phases {
		c := 0
		for _, h := range iv {
			if h.Start < p.Start && h.End > p.Start {
				c++
			}
		}
		if c > out[i].Max {
			out[i].Max, out[i].At = c, p.Start
		}
	}
	return out
}

// ownerGrants returns the acquires of ops granted by a key's owner (not a
// local ceiling) and called in p.
func ownerGrants(ops []Op, p Phase) []Op {
	var out []Op
	for _, o := range ops {
		if o.Kind == KindAcquire && o.Result == Allowed && o.Source != "fallback" && o.Call >= p.Start && o.Call < p.End {
			out = append(out, o)
		}
	}
	return out
}

// fallbackGranters counts the nodes that granted a lease of one key from
// their local ceiling (Source "fallback") with the acquire called in p.
func fallbackGranters(ops []Op, p Phase) int {
	nodes := map[string]bool{}
	for _, o := range ops {
		if o.Kind == KindAcquire && o.Result == Allowed && o.Source == "fallback" && o.Call >= p.Start && o.Call < p.End {
			nodes[o.Node] = true
		}
	}
	return len(nodes)
}

// FencingViolation is a grant whose token is not above the token of a
// grant of the same key that returned before this one was called.
type FencingViolation struct {
	Earlier, Later HeldGrant
}

// HeldGrant is one granted acquire as the fencing check sees it.
type HeldGrant struct {
	ID           string
	Node         string
	Call, Return int64
	Fencing      uint64
}

// FencingCheck returns the grants of one key (granted acquires in ops)
// whose token is at or below the highest token of the grants that
// returned before their call, each with the earlier grant of that highest
// token. Only such pairs are certainly ordered in real time.
func FencingCheck(ops []Op) []FencingViolation {
	var gs []HeldGrant
	for _, o := range ops {
		if o.Kind == KindAcquire && o.Result == Allowed {
			gs = append(gs, HeldGrant{ID: o.LeaseID, Node: o.Node, Call: o.Call, Return: o.Return, Fencing: o.Fencing})
		}
	}
	byReturn := slices.Clone(gs)
	slices.SortFunc(byReturn, func(a, b HeldGrant) int { return cmp.Compare(a.Return, b.Return) })
	byCall := slices.Clone(gs)
	slices.SortFunc(byCall, func(a, b HeldGrant) int { return cmp.Compare(a.Call, b.Call) })
	var out []FencingViolation
	var best HeldGrant
	have := false
	j := 0
	for _, g := range byCall {
		for ; j < len(byReturn) && byReturn[j].Return < g.Call; j++ {
			if !have || byReturn[j].Fencing > best.Fencing {
				best, have = byReturn[j], true
			}
		}
		if have && g.Fencing <= best.Fencing {
			out = append(out, FencingViolation{Earlier: best, Later: g})
		}
	}
	return out
}

// Healthy reports whether phase name is one in which the cluster is
// whole and settled, so a key's leases are bound by its permits: "before"
// the fault, and "settled", which starts once every lease granted before
// convergence has surely ended.
func Healthy(phase string) bool { return phase == "before" || phase == "settled" }

// Leak is a refused acquire that only a lease the owner failed to reclaim
// explains: at every instant of the acquire, fewer leases of the key could
// possibly have been held than the key has permits.
type Leak struct {
	Refused   Op
	MostHeld  int    // the most leases possibly held during the acquire
	Phase     string // the healthy phase it fell in
	Abandoned int    // abandoned leases of the key that had expired by its call
}

// possiblyHeld returns, per lease of one key, the widest span in which the
// owner may still have counted it: from the acquire's Call to the Return
// of its release or of a renew answered 404, or else to the latest expiry
// it may have been given (the Return of its last acquire or renew that may
// have succeeded, plus the lifetime granted, or maxTTL when unknown). An
// acquire that timed out, or that a node answered from its local ceiling
// after its forward failed, may have been granted unseen by the owner and
// also counts from its Call to its Return plus maxTTL.
func possiblyHeld(ops []Op, maxTTL int64) [][2]int64 {
	var out [][2]int64
	for _, o := range ops {
		// A node that gave up on its forward and answered from its local
		// ceiling (granted or not) may have had the forward reach the
		// owner, which then granted a lease nobody holds (a 3-loss run:
		// eight refusals while two leases were held).
		if o.Kind == KindAcquire && (o.Result == Timeout || o.Source == "fallback") {
			out = append(out, [2]int64{o.Call, o.Return + maxTTL})
		}
	}
	for _, l := range leaseLives(ops, maxTTL) {
		out = append(out, [2]int64{l.acq.Call, min(l.possibleEnd, l.possibleExpiry)})
	}
	return out
}

// Leaks returns the refused acquires of one key (its lease ops, any
// order) that fall inside a healthy phase and that no lease explains: at
// every instant of [Call, Return] fewer than permits leases were possibly
// held (possiblyHeld). A holder that abandons its lease never releases it,
// so a leak is a lease the owner did not reclaim when it expired. Only
// refusals wholly inside a healthy phase count, where one owner decides.
func Leaks(ops []Op, permits int, maxTTL time.Duration, phases []Phase) []Leak {
	spans := possiblyHeld(ops, int64(maxTTL))
	var out []Leak
	for _, o := range ops {
		if o.Kind != KindAcquire || o.Result != Denied {
			continue
		}
		phase := ""
		for _, p := range phases {
			if Healthy(p.Name) && o.Call >= p.Start && o.Return < p.End {
				phase = p.Name
			}
		}
		if phase == "" {
			continue
		}
		// The most spans overlapping one instant of [Call, Return]: count
		// those open at Call, then sweep the starts inside the interval.
		type ev struct {
			at    int64
			delta int
		}
		var evs []ev
		open := 0
		for _, sp := range spans {
			if sp[0] <= o.Call && sp[1] > o.Call {
				open++
			}
			if sp[0] > o.Call && sp[0] <= o.Return {
				evs = append(evs, ev{sp[0], +1})
			}
			if sp[1] > o.Call && sp[1] <= o.Return {
				evs = append(evs, ev{sp[1], -1})
			}
		}
		slices.SortFunc(evs, func(a, b ev) int {
			if c := cmp.Compare(a.at, b.at); c != 0 {
				return c
			}
			return cmp.Compare(b.delta, a.delta) // starts first: the larger count
		})
		most := open
		for _, e := range evs {
			open += e.delta
			most = max(most, open)
		}
		if most >= permits {
			continue
		}
		abandoned := 0
		for _, a := range ops {
			if a.Kind == KindAbandon && a.Call < o.Call {
				abandoned++
			}
		}
		out = append(out, Leak{Refused: o, MostHeld: most, Phase: phase, Abandoned: abandoned})
	}
	return out
}

// LeaseKeyCheck is the lease verdict for one (limit, key).
type LeaseKeyCheck struct {
	ID       BucketID
	Owner    string
	Relation Relation
	Bound    LeaseBound
	Phases   []PhaseMax // before, during, after
	Grants   int
	Refused  int // 429s
	Renewed  int
	Lost     int // renews answered 404
	Unknown  int // acquires that timed out or failed
	// Abandoned counts the leases whose holder died holding them; Leaks
	// lists refusals that only an unreclaimed lease explains (Leaks).
	Abandoned int
	Leaks     []Leak
	// Fencing lists fencing-order violations over the whole run
	// (report-only: across owners the design does not promise order
	// without replication).
	Fencing []FencingViolation
	// FencingHealthy lists the violations among the owner's grants of one
	// healthy phase (before, settled), when one owner issued every token:
	// these fail the key.
	FencingHealthy []FencingViolation
	Pass           bool // every phase's max within its bound, no leak, tokens ordered while healthy
}

// Worst returns the phase with the largest max minus bound.
func (k LeaseKeyCheck) Worst() PhaseMax {
	var w PhaseMax
	for i, p := range k.Phases {
		if i == 0 || p.Max-p.Bound > w.Max-w.Bound {
			w = p
		}
	}
	return w
}

// CheckLeases runs the lease checker over the lease ops of a history: per
// key, the most leases surely held at once in each phase against the
// bound (Healthy phases against permits, the others against the fault's
// bound), reclamation (Leaks) and the fencing order. The first phase must
// be the healthy one before the fault. owner and rel give each key's owner
// and relation; maxTTL is the limit's max_lease_ttl.
func CheckLeases(ops []Op, phases []Phase, maxTTL time.Duration, bound func(BucketID) LeaseBound, owner func(BucketID) (string, Relation)) []LeaseKeyCheck {
	var out []LeaseKeyCheck
	for id, kops := range GroupByBucket(LeaseOps(ops)) {
		bd := bound(id)
		ow, rel := owner(id)
		k := LeaseKeyCheck{ID: id, Owner: ow, Relation: rel, Bound: bd, Pass: true}
		for _, o := range kops {
			switch {
			case o.Kind == KindAcquire && o.Result == Allowed:
				k.Grants++
			case o.Kind == KindAcquire && o.Result == Denied:
				k.Refused++
			case o.Kind == KindAcquire:
				k.Unknown++
			case o.Kind == KindRenew && o.Result == Allowed:
				k.Renewed++
			case o.Kind == KindRenew && o.Result == Denied:
				k.Lost++
			case o.Kind == KindAbandon:
				k.Abandoned++
			}
		}
		k.Phases = MaxHeld(HeldIntervals(kops), phases)
		for i := range k.Phases {
			k.Phases[i].Bound = bd.Faulty
			if Healthy(k.Phases[i].Phase) {
				k.Phases[i].Bound = bd.Healthy + bd.Share*fallbackGranters(kops, phases[i])
			}
			if k.Phases[i].Max > k.Phases[i].Bound {
				k.Pass = false
			}
		}
		k.Leaks = Leaks(kops, bd.Healthy, maxTTL, phases)
		if len(k.Leaks) > 0 {
			k.Pass = false
		}
		k.Fencing = FencingCheck(kops)
		for _, p := range phases {
			if Healthy(p.Name) {
				k.FencingHealthy = append(k.FencingHealthy, FencingCheck(ownerGrants(kops, p))...)
			}
		}
		if len(k.FencingHealthy) > 0 {
			k.Pass = false
		}
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b LeaseKeyCheck) int { return cmp.Compare(a.ID.Limit+"/"+a.ID.Key, b.ID.Limit+"/"+b.ID.Key) })
	return out
}
