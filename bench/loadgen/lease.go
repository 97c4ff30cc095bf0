package main

import (
	"context"
	"fmt"

	"google.golang.org/grpc"

	"github.com/weir-rl/weir/api/weirv1"
)

// leaseTarget drives weir.v1.Limiter/Acquire then Release: one request of
// the load generator is a whole lease round trip on a concurrency limit.
// Its connections are laid out like grpcTarget's: conns per address,
// connection i to addrs[i mod len(addrs)].
type leaseTarget struct {
	conns   []*grpc.ClientConn
	clients []weirv1.LimiterClient
	limit   string
	keys    []string
	rotate  bool
}

// newLeaseTarget creates conns client connections per address. With
// rotate, a caller moves to the next connection (so the next address) on
// every round trip; without, caller i keeps connection i.
func newLeaseTarget(addrs []string, conns int, limit string, nkeys int, rotate bool) (*leaseTarget, error) {
	t := &leaseTarget{limit: limit, keys: make([]string, nkeys), rotate: rotate}
	for i := range t.keys {
		t.keys[i] = benchKey(i)
	}
	var err error
	if t.conns, t.clients, err = dialLimiters(addrs, conns); err != nil {
		return nil, err
	}
	return t, nil
}

func (t *leaseTarget) newCaller(_ context.Context, i int) (caller, error) {
	return &leaseCaller{
		t:   t,
		n:   i % len(t.clients),
		acq: &weirv1.AcquireRequest{Limit: t.limit, Holder: "loadgen"},
		rel: &weirv1.ReleaseRequest{},
	}, nil
}

func (t *leaseTarget) close() error { return closeAll(t.conns) }

// leaseCaller reuses its two request messages, as grpcCaller does.
type leaseCaller struct {
	t   *leaseTarget
	n   int // index of the connection of the next round trip
	acq *weirv1.AcquireRequest
	rel *weirv1.ReleaseRequest
}

// take acquires a permit on key index k without queueing and, when it is
// granted, releases it through the same connection. A refusal is a
// denial; a failed Release is an error, since the permit stays held until
// it expires.
func (c *leaseCaller) take(ctx context.Context, k int) (bool, error) {
	cl := c.t.clients[c.n]
	if c.t.rotate {
		c.n = (c.n + 1) % len(c.t.clients)
	}
	c.acq.Key = c.t.keys[k]
	resp, err := cl.Acquire(ctx, c.acq)
	if err != nil {
		return false, err
	}
	if !resp.GetGranted() {
		return false, nil
	}
	c.rel.Id = resp.GetId()
	if _, err := cl.Release(ctx, c.rel); err != nil {
		return false, fmt.Errorf("loadgen: release: %w", err)
	}
	return true, nil
}

func (c *leaseCaller) close() error { return nil }
