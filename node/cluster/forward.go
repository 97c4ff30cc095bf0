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
func (c *Cluster) Take(ctx context.Context, peer string, checks []api.Check, requestID string) ([]api.Result, bool, error) {
	rep, err := c.do(ctx, peer, transport.Request{Op: transport.OpTake, Checks: checks, RequestID: requestID, Tenant: api.TenantFrom(ctx)})
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

// do sends req to the owner at peer with this node's epoch and turns the
// reply's owner errors into errors: *api.Error for a semantic one,
// engine.ErrNotOwner when the owner's ring disagreed, engine.ErrOwnerLate
// when no answer came in time or the owner refused the request as past its
// deadline.
func (c *Cluster) do(ctx context.Context, peer string, req transport.Request) (transport.Reply, error) {
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
