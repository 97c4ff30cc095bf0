package engine

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/lease"
	"github.com/weir-rl/weir/node/limits"
)

// leases is the shell around the pure lease.Table: it serialises access
// with one mutex, parks waiting callers on channels, and runs the one timer
// that drives expiry (the table is a step function; this loop does the
// I/O). Safe for concurrent use.
type leases struct {
	now func() time.Time
	m   *metrics
	// changes is told of every key whose leases changed (the replication
	// stream), with mu held.
	changes Changes

	mu      sync.Mutex // guards table and waiters
	table   *lease.Table
	waiters map[uint64]chan lease.Grant // parked callers by ticket; closed when dropped
	closed  bool                        // shutting down: nobody parks any more
	kick    chan struct{}               // wakes the timer loop when Next may have moved
}

func newLeases(cfg lease.Config, now func() time.Time, m *metrics, changes Changes) (*leases, error) {
	t, err := lease.NewTable(cfg)
	if err != nil {
		return nil, err
	}
	return &leases{now: now, m: m, changes: changes, table: t, waiters: map[uint64]chan lease.Grant{}, kick: make(chan struct{}, 1)}, nil
}

// params turns a concurrency limit of the limits file into lease rules.
func params(l *limits.Limit) lease.Params {
	return lease.Params{
		Permits: l.Permits, DefaultTTL: l.LeaseTTL, MaxTTL: l.MaxLeaseTTL,
		QueueLength: l.Queue.Length, MaxWait: l.Queue.MaxWait,
	}
}

// deliver acts on the side effects of a step: it hands grants to parked
// callers, tells dropped ones, and counts. Called with mu held.
func (s *leases) deliver(ev lease.Events) {
	for _, g := range ev.Expired {
		s.m.leaseEvents.WithLabelValues(g.Limit, "expired").Inc()
		s.changed(g.Limit, g.Key)
	}
	for _, g := range ev.Granted {
		s.changed(g.Limit, g.Key)
		if ch, ok := s.waiters[g.Waiter]; ok {
			delete(s.waiters, g.Waiter)
			ch <- g // buffered: never blocks
		}
	}
	for _, t := range ev.Dropped {
		if ch, ok := s.waiters[t]; ok {
			delete(s.waiters, t)
			close(ch)
		}
	}
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// changed tells changes that (limit, key) changed. Called with mu held.
func (s *leases) changed(limit, key string) {
	s.changes.Lease(limit, key, s.now())
}

// acquire asks the local table for a permit, parking up to the request's
// wait. The limit was validated by the caller.
func (s *leases) acquire(ctx context.Context, l *limits.Limit, req api.AcquireRequest) (api.AcquireResponse, error) {
	p := params(l)
	start := s.now()
	s.mu.Lock()
	out, ev, err := s.table.Acquire(start, lease.Request{Limit: l.Name, Key: req.Key, Holder: req.Holder, TTL: req.TTL, Wait: req.Wait}, p)
	if err == nil && out.Status == lease.Granted {
		s.changed(l.Name, req.Key)
	}
	var ch chan lease.Grant
	if err == nil && out.Status == lease.Queued {
		ch = make(chan lease.Grant, 1)
		s.waiters[out.Waiter] = ch
		if s.closed { // shutting down: refuse at once instead of parking
			s.table.Cancel(out.Waiter)
			delete(s.waiters, out.Waiter)
			close(ch)
		}
	}
	s.deliver(ev)
	s.mu.Unlock()
	switch {
	case errors.Is(err, lease.ErrOverloaded):
		s.m.denials.WithLabelValues(l.Name, denialError).Inc()
		return api.AcquireResponse{}, api.Errorf(api.CodeOverloaded, "limiter_overloaded: lease table full on this node")
	case err != nil:
		return api.AcquireResponse{}, api.Errorf(api.CodeInvalid, "%v", err)
	}
	resp := api.AcquireResponse{Permits: l.Permits, Source: api.SourceOwner}
	switch out.Status {
	case lease.Granted:
		s.granted(l, &resp, out.Grant, 0)
		return resp, nil
	case lease.Refused:
		s.refused(l, &resp, out.RetryAfter)
		return resp, nil
	}
	s.m.leaseEvents.WithLabelValues(l.Name, "queued").Inc()
	select {
	case g, ok := <-ch:
		if !ok { // dropped: its wait or the queue's age limit ran out
			s.refused(l, &resp, max(p.DefaultTTL/10, time.Millisecond))
			return resp, nil
		}
		s.granted(l, &resp, g, s.now().Sub(start))
		return resp, nil
	case <-ctx.Done():
		s.mu.Lock()
		stillParked := s.table.Cancel(out.Waiter)
		delete(s.waiters, out.Waiter)
		s.mu.Unlock()
		if !stillParked { // a grant raced the cancellation: give it back
			select {
			case g := <-ch:
				s.release(g.ID)
			default:
			}
		}
		return api.AcquireResponse{}, api.Errorf(api.CodeUnavailable, "acquire cancelled while queued: %v", ctx.Err())
	}
}

func (s *leases) granted(l *limits.Limit, resp *api.AcquireResponse, g lease.Grant, waited time.Duration) {
	resp.Granted, resp.ID, resp.FencingToken, resp.TTL = true, g.ID, g.Fencing, g.TTL
	s.m.leaseEvents.WithLabelValues(l.Name, "granted").Inc()
	s.m.leaseWait.WithLabelValues(l.Name).Observe(waited.Seconds())
}

func (s *leases) refused(l *limits.Limit, resp *api.AcquireResponse, retry time.Duration) {
	resp.Granted, resp.RetryAfter = false, retry
	s.m.leaseEvents.WithLabelValues(l.Name, "refused").Inc()
	s.m.denials.WithLabelValues(l.Name, denialConcurrency).Inc()
}

// renew extends a lease held in the local table.
func (s *leases) renew(l *limits.Limit, id string, ttl time.Duration) (time.Duration, error) {
	s.mu.Lock()
	g, ev, err := s.table.Renew(s.now(), id, ttl, params(l))
	if err == nil {
		s.changed(g.Limit, g.Key)
	}
	s.deliver(ev)
	s.mu.Unlock()
	switch {
	case errors.Is(err, lease.ErrNotFound):
		return 0, api.Errorf(api.CodeNotFound, "lease not found: expired, released or never granted")
	case err != nil:
		return 0, api.Errorf(api.CodeInvalid, "%v", err)
	}
	s.m.leaseEvents.WithLabelValues(l.Name, "renewed").Inc()
	return g.TTL, nil
}

// release gives a lease back; unknown or already released is fine.
func (s *leases) release(id string) {
	s.mu.Lock()
	held, ev := s.table.Release(s.now(), id)
	if limit, key, ok := lease.ParseID(id); ok && held {
		s.changed(limit, key)
	}
	s.deliver(ev)
	s.mu.Unlock()
	if held {
		if limit, _, ok := lease.ParseID(id); ok {
			s.m.leaseEvents.WithLabelValues(limit, "released").Inc()
		}
	}
}

// drain answers every parked caller with a refusal and parks nobody after,
// so a graceful shutdown is not held up by queued acquires.
func (s *leases) drain() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for t, ch := range s.waiters {
		s.table.Cancel(t)
		delete(s.waiters, t)
		close(ch)
	}
}

// holds reports whether lease id is in this table.
func (s *leases) holds(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.table.Holds(id)
}

// export snapshots the leases of the keys pick selects, removing them
// with remove (a handover) or not (a replication snapshot), and delivers
// the events of the step.
func (s *leases) export(now time.Time, pick func(limit, key string) bool, remove bool) lease.Handoff {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ev := s.table.Export(now, pick, remove)
	s.deliver(ev)
	return h
}

// importFrom takes in handed-over leases and delivers the step's events.
func (s *leases) importFrom(now time.Time, h lease.Handoff) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	ev, err := s.table.Import(now, h)
	s.deliver(ev)
	return err
}

// held is the number of leases in the table, for the gauge.
func (s *leases) held() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return float64(s.table.Len())
}

// run drives expiry: it sleeps until the table's next deadline, expires,
// and delivers, until ctx ends.
func (s *leases) run(ctx context.Context) {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		s.mu.Lock()
		next, ok := s.table.Next()
		s.mu.Unlock()
		wait := time.Hour
		if ok {
			wait = max(next.Sub(s.now()), 0)
		}
		t.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-s.kick:
		case <-t.C:
			s.mu.Lock()
			s.deliver(s.table.Expire(s.now()))
			s.mu.Unlock()
		}
	}
}
