package client

import (
	"context"

	"google.golang.org/grpc"

	"github.com/weir-rl/weir/api/weirv1"
)

// leaseCaller is what a Lease needs to renew and release itself.
type leaseCaller interface {
	Renew(ctx context.Context, in *weirv1.RenewRequest, opts ...grpc.CallOption) (*weirv1.RenewResponse, error)
	Release(ctx context.Context, in *weirv1.ReleaseRequest, opts ...grpc.CallOption) (*weirv1.ReleaseResponse, error)
}

// leaseCallerFor returns the caller of a lease on (limit, key) granted by
// m: m itself for a client without a ring, else the key's owner at each
// call (ownerCaller).
func leaseCallerFor(r *router, m *member, limit, key string) leaseCaller {
	if r.static {
		return m.rpc
	}
	return ownerCaller{r: r, limit: limit, key: key}
}

// ownerCaller sends each renewal and release to the current owner of the
// lease's key; any member would forward by the lease id, so a member that
// fails is retried once on another. Both calls are idempotent, so the
// retry cannot hold or free a permit twice.
type ownerCaller struct {
	r          *router
	limit, key string
}

func (o ownerCaller) Renew(ctx context.Context, in *weirv1.RenewRequest, opts ...grpc.CallOption) (*weirv1.RenewResponse, error) {
	m, _ := o.r.pickFor(o.limit, o.key)
	resp, err := m.rpc.Renew(ctx, in, opts...)
	if retryable(ctx, err) {
		o.r.failed(m)
		m2, _, _ := o.r.pick(nil, m)
		resp, err = m2.rpc.Renew(ctx, in, opts...)
	}
	return resp, err
}

func (o ownerCaller) Release(ctx context.Context, in *weirv1.ReleaseRequest, opts ...grpc.CallOption) (*weirv1.ReleaseResponse, error) {
	m, _ := o.r.pickFor(o.limit, o.key)
	resp, err := m.rpc.Release(ctx, in, opts...)
	if retryable(ctx, err) {
		o.r.failed(m)
		m2, _, _ := o.r.pick(nil, m)
		resp, err = m2.rpc.Release(ctx, in, opts...)
	}
	return resp, err
}
