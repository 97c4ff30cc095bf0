package main

import (
	"context"
	"fmt"
	"sync"

	"github.com/weir-rl/weir/api/weirv1"
)

// streamTarget drives weir.v1.Limiter/TakeStream: every caller holds its
// own stream on the target's shared connections and has one request in
// flight on it, so the figures compare with unary Take at the same
// concurrency.
type streamTarget struct {
	*grpcTarget
}

func (t streamTarget) newCaller(ctx context.Context, i int) (caller, error) {
	sctx, cancel := context.WithCancel(ctx)
	st, err := t.clients[i%len(t.clients)].TakeStream(sctx)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("loadgen: take stream: %w", err)
	}
	return &streamCaller{
		t: t.grpcTarget, st: st, cancel: cancel,
		req: &weirv1.TakeRequest{Checks: []*weirv1.Check{{Limit: t.limit, Cost: t.cost}}},
	}, nil
}

// streamCaller is one stream. A Recv is not bounded by a context of its
// own, so the first take of a cell ties the stream's life to that cell's
// context: a server that stops answering ends the stream, not the run.
type streamCaller struct {
	t      *grpcTarget
	st     weirv1.Limiter_TakeStreamClient
	cancel context.CancelFunc
	req    *weirv1.TakeRequest
	resp   weirv1.TakeResponse
	id     uint64
	watch  sync.Once
}

func (c *streamCaller) take(ctx context.Context, k int) (bool, error) {
	c.watch.Do(func() { context.AfterFunc(ctx, c.cancel) })
	c.id++
	c.req.Id = c.id
	c.req.Checks[0].Key = c.t.keys[k]
	if err := c.st.Send(c.req); err != nil {
		return false, err
	}
	c.resp.Reset()
	if err := c.st.RecvMsg(&c.resp); err != nil {
		return false, err
	}
	if e := c.resp.GetError(); e != nil {
		return false, fmt.Errorf("loadgen: take stream: code %v: %s", e.GetCode(), e.GetDetail())
	}
	if c.resp.GetId() != c.id {
		return false, fmt.Errorf("loadgen: take stream: answer to id %d, want %d", c.resp.GetId(), c.id)
	}
	return c.resp.GetAllowed(), nil
}

func (c *streamCaller) close() error {
	err := c.st.CloseSend()
	c.cancel()
	return err
}
