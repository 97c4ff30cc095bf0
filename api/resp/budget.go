package resp

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// budgetCtx is a context whose deadline (a WEIR.CTAKE's budget_ms) starts
// no timer until something waits on it. context.WithTimeout allocates a
// timer per call and puts it in the runtime's timer heap, then takes it
// out again: about a tenth of the node's CPU for client takes that the
// owner decides in memory without ever waiting. Here a take that only asks
// Deadline or Err costs a clock read; the first Done (a forward to the
// owner, a wait) makes the real context.WithDeadline, and everything
// after goes to it.
type budgetCtx struct {
	context.Context // the parent
	deadline        time.Time
	mu              sync.Mutex // serializes the first Dones
	started         atomic.Pointer[startedCtx]
	stopped         atomic.Bool
}

type startedCtx struct {
	ctx    context.Context
	cancel context.CancelFunc
}

// withBudget returns ctx with a deadline budget from now. Call its stop
// when the request is done, as a context.WithTimeout's cancel.
func withBudget(ctx context.Context, budget time.Duration) *budgetCtx {
	return &budgetCtx{Context: ctx, deadline: time.Now().Add(budget)}
}

// Deadline implements context.Context: the budget's end, or the parent's
// when it is earlier.
func (c *budgetCtx) Deadline() (time.Time, bool) {
	if d, ok := c.Context.Deadline(); ok && d.Before(c.deadline) {
		return d, true
	}
	return c.deadline, true
}

// Done implements context.Context: it starts the deadline's timer.
func (c *budgetCtx) Done() <-chan struct{} { return c.start().Done() }

// Err implements context.Context without starting a timer: the parent's
// error, or DeadlineExceeded once the deadline has passed. A Done asked
// after that is closed already.
func (c *budgetCtx) Err() error {
	if s := c.started.Load(); s != nil {
		return s.ctx.Err()
	}
	if c.stopped.Load() {
		return context.Canceled
	}
	if err := c.Context.Err(); err != nil {
		return err
	}
	if !time.Now().Before(c.deadline) {
		return context.DeadlineExceeded
	}
	return nil
}

// Value implements context.Context. Once started, it answers from the
// started context, so that the context package finds that context's
// cancellation (and links a child's to it) rather than the parent's.
func (c *budgetCtx) Value(key any) any {
	if s := c.started.Load(); s != nil {
		return s.ctx.Value(key)
	}
	return c.Context.Value(key)
}

func (c *budgetCtx) start() context.Context {
	if s := c.started.Load(); s != nil {
		return s.ctx
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.started.Load(); s != nil {
		return s.ctx
	}
	ctx, cancel := context.WithDeadline(c.Context, c.deadline)
	c.started.Store(&startedCtx{ctx: ctx, cancel: cancel})
	if c.stopped.Load() {
		cancel() // released before anything waited: done, as WithTimeout's would be
	}
	return ctx
}

// stop cancels the context, as a WithTimeout's cancel does, and releases
// the timer if Done started one. It stores stopped before it loads
// started, and start the other way round, so one of them cancels.
func (c *budgetCtx) stop() {
	c.stopped.Store(true)
	if s := c.started.Load(); s != nil {
		s.cancel()
	}
}
