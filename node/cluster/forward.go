package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/node/engine"
	"github.com/weir-rl/weir/transport"
)

// This file forwards steps to their owners: the engine.Peers side of the
// cluster. A missed deadline (transport.ErrDeadline, the caller's
// cancellation, or the owner's Expired refusal) is engine.ErrOwnerLate;
// any other transport error means the owner is unreachable; a reply's
// error code is the owner's semantic error, returned as an *api.Error.

// Take implements engine.Peers.
//
// A take whose caller set no deadline, sent while the ring was settled,
// that got no answer in time while this node's view changed (a join or a
// leave began meanwhile, see settling) is sent once more, within the
// settle bound: it was late because the key's state started moving. The
// first may have been spent at the owner only if the owner decided it
// before its deadline and the reply came late; then the second spends
// again (a retry with a request id is answered from the owner's memory):
// it can admit less, never more.
func (c *Cluster) Take(ctx context.Context, peer string, checks []api.Check, requestID string) ([]api.Result, bool, error) {
	req := transport.Request{Op: transport.OpTake, Checks: checks, RequestID: requestID, Tenant: api.TenantFrom(ctx)}
	sctx, cancel, settled := c.settling(ctx, 0)
	rep, err := c.send(sctx, peer, req)
	cancel()
	if settled && errors.Is(err, engine.ErrOwnerLate) && c.Settling() && ctx.Err() == nil {
		c.m.settleRetries.Inc()
		rep, err = c.do(ctx, peer, req)
	}
	if err != nil {
		return nil, false, err
	}
	if len(rep.Results) != len(checks) {
		return nil, false, errors.New("cluster: owner answered the wrong number of results")
	}
	allowed := true
	for i := range rep.Results {
		r := &rep.Results[i]
		r.Limit, r.Source = checks[i].Limit, api.SourceOwner
		allowed = allowed && r.Allowed
	}
	return rep.Results, allowed, nil
}

// Refund implements engine.Peers: best effort, an owner that cannot be
// reached keeps the debit.
func (c *Cluster) Refund(ctx context.Context, peer string, checks []api.Check) {
	_, _ = c.do(ctx, peer, transport.Request{Op: transport.OpRefund, Checks: checks})
}

// Acquire implements engine.Peers.
func (c *Cluster) Acquire(ctx context.Context, peer string, req api.AcquireRequest) (api.AcquireResponse, error) {
	rep, err := c.do(ctx, peer, transport.Request{
		Op:     transport.OpAcquire,
		Checks: []api.Check{{Limit: req.Limit, Key: req.Key}}, Holder: req.Holder, TTL: req.TTL, Wait: req.Wait,
	})
	if err != nil {
		return api.AcquireResponse{}, err
	}
	g := rep.Lease
	return api.AcquireResponse{
		Granted: g.Granted, ID: g.ID, FencingToken: g.FencingToken, TTL: g.TTL,
		Permits: g.Permits, RetryAfter: g.RetryAfter, Source: api.SourceOwner,
	}, nil
}

// Renew implements engine.Peers.
func (c *Cluster) Renew(ctx context.Context, peer, id string, ttl time.Duration) (time.Duration, error) {
	rep, err := c.leaseOp(ctx, peer, transport.Request{Op: transport.OpRenew, LeaseID: id, TTL: ttl})
	return rep.Lease.TTL, err
}

// Release implements engine.Peers.
func (c *Cluster) Release(ctx context.Context, peer, id string) error {
	_, err := c.leaseOp(ctx, peer, transport.Request{Op: transport.OpRelease, LeaseID: id})
	return err
}

// leaseOp forwards a renew or release, whose every error is an *api.Error:
// the lease's permit stays where it is, so there is no fallback to take.
func (c *Cluster) leaseOp(ctx context.Context, peer string, req transport.Request) (transport.Reply, error) {
	rep, err := c.do(ctx, peer, req)
	switch {
	case errors.Is(err, engine.ErrNotOwner):
		return rep, api.Errorf(api.CodeUnavailable, "lease owner unknown while the ring settles")
	case err != nil:
		if _, semantic := errors.AsType[*api.Error](err); semantic {
			return rep, err
		}
		return rep, api.Errorf(api.CodeUnavailable, "lease owner unreachable: %v", err)
	}
	return rep, nil
}

// Allot implements engine.Peers.
func (c *Cluster) Allot(ctx context.Context, peer string, req api.AllotRequest) (api.AllotResponse, error) {
	rep, err := c.do(ctx, peer, transport.Request{
		Op: transport.OpAllot, Checks: []api.Check{{Limit: req.Limit, Key: req.Key}},
		Holder: req.Holder, Want: req.Want, Demand: req.Demand, Unspent: req.Unspent, Seq: req.Seq,
	})
	return rep.Allot, err
}

// Return implements engine.Peers: best effort.
func (c *Cluster) Return(ctx context.Context, peer string, req api.ReturnRequest) error {
	_, err := c.do(ctx, peer, transport.Request{
		Op: transport.OpReturn, Checks: []api.Check{{Limit: req.Limit, Key: req.Key}}, Holder: req.Holder, Unspent: req.Unspent, Seq: req.Seq,
	})
	return err
}

// Reachable implements engine.Peers: the ring may still list as alive an
// owner this node cannot reach. It sends an empty pull.
func (c *Cluster) Reachable(ctx context.Context, peer string) bool {
	_, err := c.pool.Do(ctx, peer, transport.Request{Op: transport.OpPull})
	return err == nil
}

// settling bounds a forward whose caller set no deadline by
// Forward.Settle() (plus the acquire's wait) instead of the transport's
// Deadline while this node's view changed within HandoffWindow, and
// reports settled: the caller set no deadline and the ring was settled,
// so the transport's Deadline applies. Then a
// key's state may be moving: its new owner pulls it from the previous one
// before deciding, a joining node takes in its share of every bucket, and
// a sender with an older view reaches the new owner through the old one.
// That is bounded work, not overload, and the budget meant for a settled
// ring (--forward-timeout) would answer it limiter_overloaded. A caller's
// own deadline is always kept.
func (c *Cluster) settling(ctx context.Context, wait time.Duration) (_ context.Context, _ context.CancelFunc, settled bool) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}, false
	}
	if !c.Settling() {
		return ctx, func() {}, true
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Forward.Settle()+wait)
	return ctx, cancel, false
}

// do sends req to the owner at peer with this node's epoch and turns the
// reply's owner errors into errors: *api.Error for a semantic one,
// engine.ErrNotOwner when the owner's ring disagreed, engine.ErrOwnerLate
// when no answer came in time or the owner refused the request as past its
// deadline.
func (c *Cluster) do(ctx context.Context, peer string, req transport.Request) (transport.Reply, error) {
	ctx, cancel, _ := c.settling(ctx, req.Wait)
	defer cancel()
	return c.send(ctx, peer, req)
}

// send is do within ctx as it is, after settling.
func (c *Cluster) send(ctx context.Context, peer string, req transport.Request) (transport.Reply, error) {
	req.Epoch = c.ring.View().Epoch
	ctx, span, parent := c.tracer.Forward(ctx, peer, req.Op.String())
	req.TraceParent = parent
	rep, err := c.pool.Do(ctx, peer, req)
	span.EndForward(err, err == nil && rep.NotOwner)
	switch {
	case errors.Is(err, transport.ErrDeadline) || errors.Is(err, context.Canceled):
		return rep, fmt.Errorf("%w: %w", engine.ErrOwnerLate, err)
	case err != nil:
		return rep, err
	case rep.Expired:
		return rep, fmt.Errorf("%w: %s refused the request as past its deadline", engine.ErrOwnerLate, peer)
	case rep.ErrCode != 0:
		return rep, &api.Error{Code: api.Code(rep.ErrCode), Detail: rep.ErrDetail}
	case rep.NotOwner:
		if req.Op == transport.OpTake || req.Op == transport.OpRefund {
			c.m.notOwner.Inc()
		}
		return rep, engine.ErrNotOwner
	}
	return rep, nil
}
