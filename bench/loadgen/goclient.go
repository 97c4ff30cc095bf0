package main

import (
	"context"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/api/client"
)

// goClientTarget drives Weir through the cluster-aware Go client: one
// client.Dial over the seeds, shared by every caller, as one process
// holds one client. The client fetches the ring from the seeds and sends
// each take straight to its key's owner: over the owner's RESP endpoint
// (WEIR.CTAKE, pipelined on one connection per member, a second under
// load) when it serves
// one, else with concurrent takes sharing one TakeStream per member
// (client.Options.Transport).
type goClientTarget struct {
	c     *client.Client
	limit string
	cost  int64
	keys  []string
}

// newGoClientTarget dials the seeds (public gRPC addresses) with opts.
func newGoClientTarget(ctx context.Context, seeds []string, limit string, nkeys int, cost int64, opts client.Options) (target, error) {
	c, err := client.Dial(ctx, seeds, opts)
	if err != nil {
		return nil, err
	}
	t := &goClientTarget{c: c, limit: limit, cost: cost, keys: make([]string, nkeys)}
	for i := range t.keys {
		t.keys[i] = benchKey(i)
	}
	return t, nil
}

func (t *goClientTarget) newCaller(context.Context, int) (caller, error) {
	return goClientCaller{t}, nil
}

func (t *goClientTarget) close() error { return t.c.Close() }

type goClientCaller struct{ t *goClientTarget }

func (c goClientCaller) take(ctx context.Context, k int) (bool, error) {
	r, err := c.t.c.Take(ctx, api.Check{Limit: c.t.limit, Key: c.t.keys[k], Cost: c.t.cost})
	return r.Allowed, err
}

func (goClientCaller) close() error { return nil }
