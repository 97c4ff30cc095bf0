package engine

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/weir-rl/weir/allot"
	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/bucket"
	"github.com/weir-rl/weir/node/limits"
)

// This file is the owner's side of allotments (package allot): the ledger
// of holdings, the capacity they reduce, and the steps that grant, refresh
// and take them back. Every step on a key of a limit with allotments runs
// under that key's stripe of ledger.locks, from settling the holdings that
// expired to its debit, so the capacity in force never changes between the
// two.

// ledger is the owner's record of its holdings, behind its locks. Safe for
// concurrent use.
type ledger struct {
	// locks serialize the steps on one allotted key (by stripe); lock
	// order: the cluster's Hold first, then these, in ascending order,
	// then mu.
	locks [64]sync.Mutex
	// unlocks are locks' Unlock method values, made once by initUnlocks,
	// so locking one stripe returns its release without allocating.
	unlocks [64]func()
	mu      sync.Mutex // guards l
	l       *allot.Ledger
	// n and tokens mirror the ledger's holdings and their tokens, for the
	// gauges.
	n, tokens atomic.Int64
}

// ownerMetrics count the owner's side of allotments.
type ownerMetrics struct {
	grants, refreshes, returns prometheus.Counter
	stranded                   prometheus.Counter // tokens of holdings that expired unreturned
	denied                     prometheus.Counter // asks refused: the bucket was empty
}

func newOwnerMetrics(reg prometheus.Registerer, l *ledger) *ownerMetrics {
	m := &ownerMetrics{
		grants: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "weir_allotment_grants_total", Help: "Allotments this node granted as an owner to a holder that held none of the key.",
		}),
		refreshes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "weir_allotment_refreshes_total", Help: "Allotments this node renewed as an owner for a holder that held the key already.",
		}),
		returns: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "weir_allotment_returns_total", Help: "Allotments holders gave back to this node as an owner.",
		}),
		stranded: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "weir_allotment_expired_tokens_total", Help: "Tokens of allotments that expired before their holder returned them (lost, the safe side: at most what the holders did not spend).",
		}),
		denied: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "weir_allotment_denials_total", Help: "Asks for an allotment this node refused as an owner because the bucket was empty.",
		}),
	}
	tokens := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "weir_allotments_outstanding_tokens", Help: "Tokens this node granted as an owner that holders have not returned or spent as far as it knows; its buckets' capacity is reduced by them.",
	}, func() float64 { return float64(l.tokens.Load()) })
	holders := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "weir_allotment_holdings", Help: "Allotments outstanding at this node as an owner: one per holder and key.",
	}, func() float64 { return float64(l.n.Load()) })
	reg.MustRegister(m.grants, m.refreshes, m.returns, m.stranded, m.denied, tokens, holders)
	return m
}

// allotStripe is the lock stripe of (limit, key).
func allotStripe(limit, key string) int {
	return int(xxhash.Sum64String(limit+"\x00"+key) % 64)
}

// lockAllotted locks the stripes of the checks whose limits allot (lims
// parallels checks; a nil limit does not allot), in ascending order, and
// returns the unlock. Checks of other limits take no lock.
func (e *Engine) lockAllotted(checks []bucket.Check, lims []*limits.Limit) func() {
	var buf [8]int
	stripes := buf[:0]
	for i, c := range checks {
		if allots(lims[i]) {
			stripes = append(stripes, allotStripe(c.Name, c.Key))
		}
	}
	switch len(stripes) {
	case 0:
		return noRelease
	case 1: // the common case allocates nothing
		e.ledger.locks[stripes[0]].Lock()
		return e.ledger.unlocks[stripes[0]]
	}
	slices.Sort(stripes)
	held := slices.Clone(slices.Compact(stripes)) // buf stays on the stack
	for _, s := range held {
		e.ledger.locks[s].Lock()
	}
	return func() {
		for _, s := range held {
			e.ledger.locks[s].Unlock()
		}
	}
}

// initUnlocks makes the Unlock method values of l's stripes.
func (l *ledger) initUnlocks() {
	for i := range l.locks {
		l.unlocks[i] = l.locks[i].Unlock
	}
}

// allots reports whether l is a limit with allotments.
func allots(l *limits.Limit) bool { return l != nil && l.Allotments.Auto }

// capAllotted replaces, in checks, the limit of each check whose limit
// allots by its capped one at now (see capped), and reports whether every
// cost still fits its capacity. The caller holds their stripes
// (lockAllotted).
func (e *Engine) capAllotted(now time.Time, checks []bucket.Check, lims []*limits.Limit) bool {
	fits := true
	for i := range checks {
		if allots(lims[i]) {
			checks[i].Limit = e.capped(now, checks[i].Name, checks[i].Key, lims[i].Bucket)
			fits = fits && checks[i].Cost <= checks[i].Limit.Capacity
		}
	}
	return fits
}

// unfit is the decisions of a step with a cost beyond the capacity that
// allotments outstanding leave the owner: denied, until the allotments of
// now have expired or come back (their TTL).
func unfit(checks []bucket.Check, lims []*limits.Limit, out []bucket.Decision) []bucket.Decision {
	for i, c := range checks {
		retry := time.Duration(0)
		if allots(lims[i]) {
			retry = lims[i].Allotments.TTL
		}
		out = append(out, bucket.Decision{Limit: c.Limit.Capacity, RetryAfter: max(retry, time.Nanosecond), ResetAfter: retry})
	}
	return out
}

// takeLeavingClaims is the owner's take of checks under the capacities in
// force, leaving in each allotted bucket the tokens holders claimed
// (allot.Ledger.Claim): each such check is taken at its cost plus the
// claims (at most its capacity) and the claims are given back at once, so
// the take is allowed only when the bucket holds both. Decisions report
// what is left beside the claims. New buckets count for tenant tn
// (bucket.Store.TakeTenantAt). The caller holds the checks' stripes.
func (e *Engine) takeLeavingClaims(now time.Time, tn bucket.Tenant, checks []bucket.Check, lims []*limits.Limit, buf []bucket.Decision) ([]bucket.Decision, bool, error) {
	var rbuf [4]int64
	reserved := rbuf[:0]
	claimed := false
	for i, c := range checks {
		p := int64(0)
		if allots(lims[i]) {
			e.ledger.mu.Lock()
			p = min(e.ledger.l.Claimed(now, allot.Key{Limit: c.Name, Key: c.Key}, ""), max(c.Limit.Capacity-c.Cost, 0))
			e.ledger.mu.Unlock()
		}
		reserved = append(reserved, p)
		claimed = claimed || p > 0
	}
	if !claimed {
		return e.store.TakeTenantAt(now, tn, checks, buf)
	}
	for i := range checks {
		checks[i].Cost += reserved[i]
	}
	ds, ok, err := e.store.TakeTenantAt(now, tn, checks, buf)
	back := make([]bucket.Check, 0, len(checks))
	for i := range checks {
		checks[i].Cost -= reserved[i]
		if reserved[i] > 0 {
			c := checks[i]
			c.Cost = reserved[i]
			back = append(back, c)
		}
	}
	if ok && err == nil {
		e.store.RefundAt(now, back)
	}
	return ds, ok, err
}

// ownerDemand counts the owner's own takes of allotted keys that have
// holdings, admitted or denied, for the holders' shares.
func (e *Engine) ownerDemand(now time.Time, checks []bucket.Check, lims []*limits.Limit) {
	for i, c := range checks {
		if allots(lims[i]) {
			e.ledger.mu.Lock()
			e.ledger.l.AddOwner(now, allot.Key{Limit: c.Name, Key: c.Key}, c.Cost, allotWindow)
			e.ledger.mu.Unlock()
		}
	}
}

// refundOwned gives debits back to the owner store, under the capacity in
// force for allotted keys, and tells the replication stream.
func (e *Engine) refundOwned(debits []bucket.Check) {
	f := e.limits()
	lims := make([]*limits.Limit, len(debits))
	for i, d := range debits {
		lims[i], _ = f.Lookup(d.Name)
	}
	now := e.now()
	unlock := e.lockAllotted(debits, lims)
	e.capAllotted(now, debits, lims)
	e.store.RefundAt(now, debits)
	unlock()
	e.touchedAt(now, debits, nil)
}

// capped returns the bucket limit to decide (limit, key) by at now: l's,
// with its capacity reduced by the key's outstanding holdings, after it
// dropped the holdings that ended (earliest first, each at its Expires,
// see rehold). A holding the store has no room to settle for stays until
// the next step: the capacity stays lower, the safe side. The caller
// holds the key's stripe.
func (e *Engine) capped(now time.Time, name, key string, l bucket.Limit) bucket.Limit {
	k := allot.Key{Limit: name, Key: key}
	e.ledger.mu.Lock()
	if !e.ledger.l.Holds(k) {
		e.ledger.mu.Unlock()
		return l
	}
	expired := e.ledger.l.Expired(now, k)
	e.ledger.mu.Unlock()
	for _, h := range expired {
		err := e.rehold(h.Expires, k, l, func(lg *allot.Ledger) { lg.Drop(k, h.Holder) })
		if err != nil {
			break
		}
		e.om.stranded.Add(float64(h.Tokens))
		e.changes.Bucket(name, key, now, bucket.State{}, false)
	}
	return e.cappedNow(k, l)
}

// cappedNow is l with its capacity reduced by k's outstanding holdings as
// the ledger has them.
func (e *Engine) cappedNow(k allot.Key, l bucket.Limit) bucket.Limit {
	e.ledger.mu.Lock()
	defer e.ledger.mu.Unlock()
	return withCapacity(l, e.ledger.l.Outstanding(k))
}

// rehold changes k's holdings at at with change, materializing the bucket
// around it (bucket.Store.SettleAt): settled under the capacity in force
// before, so refill up to at counts under it, and again under the one
// after, so the bucket is not evicted as full under a capacity that rose.
// It fails, changing nothing, when the store has no room for a missing
// bucket (bucket.ErrFull). The caller holds the key's stripe.
func (e *Engine) rehold(at time.Time, k allot.Key, l bucket.Limit, change func(*allot.Ledger)) error {
	if _, err := e.store.SettleAt(at, bucket.Check{Name: k.Limit, Limit: e.cappedNow(k, l), Key: k.Key}); err != nil {
		return err
	}
	e.ledger.mu.Lock()
	change(e.ledger.l)
	e.ledger.n.Store(int64(e.ledger.l.Len()))
	e.ledger.tokens.Store(e.ledger.l.Total())
	after := withCapacity(l, e.ledger.l.Outstanding(k))
	e.ledger.mu.Unlock()
	_, err := e.store.SettleAt(at, bucket.Check{Name: k.Limit, Limit: after, Key: k.Key})
	return err
}

// withCapacity is l with its capacity reduced by outstanding tokens.
// Grants never let holdings reach the whole capacity (the owner keeps one
// token of it), so the result is at least 1.
func withCapacity(l bucket.Limit, outstanding int64) bucket.Limit {
	l.Capacity = max(1, l.Capacity-outstanding)
	return l
}

// errNoAllotments is an allotment asked of a limit that does not allot.
func errNoAllotments(limit string) error {
	return api.Errorf(api.CodeInvalid, "limit %q does not allot: its limits file entry sets no allotments: auto", limit)
}

// allotLimit resolves the limit of an allotment request: a rate limit of
// the limits in force with allotments on.
func (e *Engine) allotLimit(name string) (*limits.Limit, error) {
	l, ok := e.limits().Lookup(name)
	if !ok {
		return nil, api.Errorf(api.CodeInvalid, "unknown limit %q", name)
	}
	if l.Kind != limits.KindRate || !l.Allotments.Auto {
		return nil, errNoAllotments(name)
	}
	return l, nil
}

// allotWindow is the demand meters' window, holder and owner alike.
const allotWindow = 100 * time.Millisecond
