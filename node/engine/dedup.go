package engine

import (
	"hash/maphash"
	"slices"
	"sync"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/internal/dedup"
)

// dedupShards spreads request ids over this many locked caches.
const dedupShards = 16

// reqID is a request id held by value (api.MaxRequestIDBytes bytes and a
// length), so the ids an owner remembers hold no pointer.
type reqID struct {
	n uint8
	b [api.MaxRequestIDBytes]byte
}

// makeReqID returns id as a reqID; false when it is too long.
func makeReqID(id string) (reqID, bool) {
	var r reqID
	if len(id) > len(r.b) {
		return r, false
	}
	r.n = uint8(len(id)) //nolint:gosec // bounded by len(r.b) above
	copy(r.b[:], id)
	return r, true
}

// decided is an owner's answer to a take with a request id, kept so that a
// retry with the same id gets it again instead of spending twice. It holds
// no pointer: the answers of the common take (one check of a limit from
// the limits file) are kept whole in it, so that a million remembered ids
// are memory the garbage collector never scans. An answer that does not
// fit (several checks, an inline limit) is kept in the shard's second
// cache, and full says so.
type decided struct {
	sum  uint64 // keyed hash of what was asked, to refuse an id reused for another take
	ok   bool
	full bool
	r    packedResult
}

// packedResult is an api.Result without its pointers: Limit is the check's
// own, Evidence.Run this owner's run (or empty), DecidedAt Unix nanoseconds.
type packedResult struct {
	allowed, ownRun, fallback bool
	source                    api.Source
	remaining, capacity       int64
	retryAfter, resetAfter    time.Duration
	window                    time.Duration
	decidedAt                 int64 // 0: the zero time
	bucket                    uint64
}

// fullAnswer is an answer kept with its pointers, for the takes decided
// cannot hold.
type fullAnswer struct {
	checks  []api.Check // what was asked, compared exactly on a retry
	results []api.Result
}

// takeDedup is the owner's memory of recent request ids (package dedup),
// sharded by id. It is safe for concurrent use: each shard's mutex guards
// its caches.
type takeDedup struct {
	shards  [dedupShards]dedupShard
	seed    maphash.Seed
	run     string // this owner's run, the Evidence.Run of its own answers
	replays prometheus.Counter
}

type dedupShard struct {
	mu   sync.Mutex
	c    *dedup.Cache[reqID, decided]
	full *dedup.Cache[reqID, fullAnswer]
}

func newTakeDedup(cfg dedup.Config, run string, reg prometheus.Registerer) *takeDedup {
	d := &takeDedup{seed: maphash.MakeSeed(), run: run, replays: prometheus.NewCounter(prometheus.CounterOpts{
		Name: "weir_take_replays_total",
		Help: "Takes answered from the owner's memory of their request id (a caller's retry) instead of spending again.",
	})}
	for i := range d.shards {
		d.shards[i].c = dedup.New[reqID, decided](cfg)
		d.shards[i].full = dedup.New[reqID, fullAnswer](cfg)
	}
	reg.MustRegister(d.replays)
	return d
}

// once decides checks with take unless id was decided within the window, in
// which case it returns that decision again. A take of id still in progress
// is CodeUnavailable (the caller retries later); id reused for different
// checks is CodeInvalid. A failed take forgets id, so a retry decides it.
//
// A retry of a one-check take is recognised by a 64-bit keyed hash of its
// check: another take under the same id goes undetected with probability
// 2^-64, and only ever replays that id's own first answer.
func (d *takeDedup) once(now time.Time, id string, checks []api.Check, take func() ([]api.Result, bool, error)) ([]api.Result, bool, error) {
	rid, fits := makeReqID(id)
	if !fits {
		return nil, false, api.Errorf(api.CodeInvalid, "request_id has %d bytes, over the %d maximum", len(id), api.MaxRequestIDBytes)
	}
	sum := d.sum(checks)
	s := &d.shards[xxhash.Sum64String(id)%dedupShards]
	s.mu.Lock()
	prev, st := s.c.BeginAt(now, rid)
	var whole fullAnswer
	wholeSt := dedup.Done
	if st == dedup.Done && prev.full {
		whole, wholeSt = s.full.Lookup(now, rid)
	}
	s.mu.Unlock()
	switch st {
	case dedup.Done:
		return d.replay(prev, whole, wholeSt, sum, checks)
	case dedup.Pending:
		return nil, false, api.Errorf(api.CodeUnavailable, "a take with this request_id is being decided: retry")
	}
	res, ok, err := take()
	if err != nil {
		s.mu.Lock()
		s.c.Abort(rid)
		s.mu.Unlock()
		return res, ok, err
	}
	// What is kept is built before the lock is taken.
	kept := decided{sum: sum, ok: ok}
	var keptWhole fullAnswer
	if p, packs := d.pack(checks, res); packs {
		kept.r = p
	} else {
		kept.full = true
		keptWhole = fullAnswer{checks: slices.Clone(checks), results: slices.Clone(res)}
	}
	s.mu.Lock()
	if kept.full {
		s.full.Put(now, rid, keptWhole)
	}
	s.c.Finish(rid, kept)
	s.mu.Unlock()
	return res, ok, err
}

// replay is once's answer for an id already decided: prev from the first
// cache and, when prev.full, whole and its status from the second.
func (d *takeDedup) replay(prev decided, whole fullAnswer, wholeSt dedup.Status, sum uint64, checks []api.Check) ([]api.Result, bool, error) {
	if prev.sum != sum {
		return nil, false, errReused()
	}
	if !prev.full {
		d.replays.Inc()
		return []api.Result{d.unpack(checks[0], prev.r)}, prev.ok, nil
	}
	if wholeSt != dedup.Done {
		// The second cache holds no more ids than the first and evicts
		// the oldest first, so it cannot have let go of an id the first
		// still holds; should it have, deciding again could spend twice.
		return nil, false, api.Errorf(api.CodeUnavailable, "the answer to this request_id was lost: use a new request_id")
	}
	if !slices.EqualFunc(whole.checks, checks, sameCheck) {
		return nil, false, errReused()
	}
	d.replays.Inc()
	return slices.Clone(whole.results), prev.ok, nil
}

// errReused refuses an id reused for a different take.
func errReused() error {
	return api.Errorf(api.CodeInvalid, "request_id was already used for a different take")
}

// sum is the keyed hash of checks that a retry must match.
func (d *takeDedup) sum(checks []api.Check) uint64 {
	var h maphash.Hash
	h.SetSeed(d.seed)
	for _, c := range checks {
		maphash.WriteComparable(&h, len(c.Limit))
		h.WriteString(c.Limit)
		maphash.WriteComparable(&h, len(c.Key))
		h.WriteString(c.Key)
		maphash.WriteComparable(&h, c.Cost)
		if c.Inline != nil {
			maphash.WriteComparable(&h, *c.Inline)
		}
	}
	return h.Sum64()
}

// pack returns res as a packedResult when it is one plain check's answer
// that unpack gives back exactly (but for DecidedAt's monotonic reading).
func (d *takeDedup) pack(checks []api.Check, res []api.Result) (packedResult, bool) {
	if len(checks) != 1 || len(res) != 1 || checks[0].Inline != nil {
		return packedResult{}, false
	}
	r := res[0]
	ev := r.Evidence
	at := ev.DecidedAt
	if r.Limit != checks[0].Limit || (ev.Run != "" && ev.Run != d.run) ||
		(!at.IsZero() && (at.Location() != time.Local || !time.Unix(0, at.UnixNano()).Equal(at))) {
		return packedResult{}, false
	}
	p := packedResult{
		allowed: r.Allowed, ownRun: ev.Run != "", fallback: ev.Fallback, source: r.Source,
		remaining: r.Remaining, capacity: r.Capacity, retryAfter: r.RetryAfter, resetAfter: r.ResetAfter,
		window: r.Window, bucket: ev.Bucket,
	}
	if !at.IsZero() {
		p.decidedAt = at.UnixNano()
	}
	return p, true
}

// unpack is pack's inverse for the check c it was packed with.
func (d *takeDedup) unpack(c api.Check, p packedResult) api.Result {
	r := api.Result{
		Limit: c.Limit, Allowed: p.allowed, Remaining: p.remaining, Capacity: p.capacity,
		RetryAfter: p.retryAfter, ResetAfter: p.resetAfter, Source: p.source, Window: p.window,
		Evidence: api.Evidence{Bucket: p.bucket, Fallback: p.fallback},
	}
	if p.ownRun {
		r.Evidence.Run = d.run
	}
	if p.decidedAt != 0 {
		r.Evidence.DecidedAt = time.Unix(0, p.decidedAt)
	}
	return r
}

// expire drops every shard's ids whose window ended by now (see
// dedup.Cache.ExpireAt). The engine's sweep calls it.
func (d *takeDedup) expire(now time.Time) {
	for i := range d.shards {
		s := &d.shards[i]
		s.mu.Lock()
		s.c.ExpireAt(now)
		s.full.ExpireAt(now)
		s.mu.Unlock()
	}
}

// sameCheck reports whether a and b are the same check: an inline limit
// compares by its parameters, not by the pointer a retry decodes anew.
func sameCheck(a, b api.Check) bool {
	if a.Limit != b.Limit || a.Key != b.Key || a.Cost != b.Cost || (a.Inline == nil) != (b.Inline == nil) {
		return false
	}
	return a.Inline == nil || *a.Inline == *b.Inline
}
