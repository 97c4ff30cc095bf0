package engine

import (
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

// decided is an owner's answer to a take with a request id, kept so that a
// retry with the same id gets it again instead of spending twice.
type decided struct {
	checks  []api.Check // what was asked, to refuse an id reused for another take
	results []api.Result
	ok      bool
}

// takeDedup is the owner's memory of recent request ids (package dedup),
// sharded by id. It is safe for concurrent use: each shard's mutex guards
// its cache.
type takeDedup struct {
	shards  [dedupShards]dedupShard
	replays prometheus.Counter
}

type dedupShard struct {
	mu sync.Mutex
	c  *dedup.Cache[decided]
}

func newTakeDedup(cfg dedup.Config, reg prometheus.Registerer) *takeDedup {
	d := &takeDedup{replays: prometheus.NewCounter(prometheus.CounterOpts{
		Name: "weir_take_replays_total",
		Help: "Takes answered from the owner's memory of their request id (a caller's retry) instead of spending again.",
	})}
	for i := range d.shards {
		d.shards[i].c = dedup.New[decided](cfg)
	}
	reg.MustRegister(d.replays)
	return d
}

// once decides checks with take unless id was decided within the window, in
// which case it returns that decision again. A take of id still in progress
// is CodeUnavailable (the caller retries later); id reused for different
// checks is CodeInvalid. A failed take forgets id, so a retry decides it.
func (d *takeDedup) once(now time.Time, id string, checks []api.Check, take func() ([]api.Result, bool, error)) ([]api.Result, bool, error) {
	s := &d.shards[xxhash.Sum64String(id)%dedupShards]
	s.mu.Lock()
	prev, st := s.c.BeginAt(now, id)
	s.mu.Unlock()
	switch st {
	case dedup.Done:
		if !slices.EqualFunc(prev.checks, checks, sameCheck) {
			return nil, false, api.Errorf(api.CodeInvalid, "request_id was already used for a different take")
		}
		d.replays.Inc()
		return slices.Clone(prev.results), prev.ok, nil
	case dedup.Pending:
		return nil, false, api.Errorf(api.CodeUnavailable, "a take with this request_id is being decided: retry")
	}
	res, ok, err := take()
	s.mu.Lock()
	if err != nil {
		s.c.Abort(id)
	} else {
		s.c.Finish(id, decided{checks: slices.Clone(checks), results: slices.Clone(res), ok: ok})
	}
	s.mu.Unlock()
	return res, ok, err
}

// expire drops every shard's ids whose window ended by now (see
// dedup.Cache.ExpireAt). The engine's sweep calls it.
func (d *takeDedup) expire(now time.Time) {
	for i := range d.shards {
		s := &d.shards[i]
		s.mu.Lock()
		s.c.ExpireAt(now)
		s.mu.Unlock()
	}
}

// held returns the ids held over all shards.
func (d *takeDedup) held() int {
	n := 0
	for i := range d.shards {
		s := &d.shards[i]
		s.mu.Lock()
		n += s.c.Len()
		s.mu.Unlock()
	}
	return n
}

// sameCheck reports whether a and b are the same check: an inline limit
// compares by its parameters, not by the pointer a retry decodes anew.
func sameCheck(a, b api.Check) bool {
	if a.Limit != b.Limit || a.Key != b.Key || a.Cost != b.Cost || (a.Inline == nil) != (b.Inline == nil) {
		return false
	}
	return a.Inline == nil || *a.Inline == *b.Inline
}
