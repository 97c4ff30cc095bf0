package client

import (
	"context"
	"fmt"
	"time"

	"github.com/weir-rl/weir/api"
)

// Wait takes checks like Take, and while the take is denied sleeps the
// server's retry-after plus jitter (Options.WaitJitter) and tries again,
// until a take is allowed or ctx ends. It returns the allowed response; a
// Take error at once; or, when ctx ends or its deadline falls before the
// next try could be made, the last denial and an error wrapping ctx's
// error (context.DeadlineExceeded when the deadline is too near).
//
// A denial is not a failure: each try is a new take, counted by the limit
// like any other, and not a retry under the retry budget.
func (c *Client) Wait(ctx context.Context, checks ...api.Check) (api.TakeResponse, error) {
	clock := c.opts.Clock
	for {
		resp, err := c.Take(ctx, checks...)
		if err != nil || resp.Allowed {
			return resp, err
		}
		d := waitFor(resp.RetryAfter, c.opts.WaitJitter, c.opts.Rand())
		if dl, ok := ctx.Deadline(); ok && clock.Now().Add(d).After(dl) {
			return resp, fmt.Errorf("client: wait: denied until after the deadline: %w", context.DeadlineExceeded)
		}
		if err := clock.Sleep(ctx, d); err != nil {
			return resp, fmt.Errorf("client: wait: %w", err)
		}
	}
}

// waitFor is the pause before the next try of a denied take: retryAfter
// plus u × jitter × retryAfter, at least 1 ms (u uniform in [0, 1)).
func waitFor(retryAfter time.Duration, jitter, u float64) time.Duration {
	extra := time.Duration(u * max(jitter, 0) * float64(retryAfter))
	return max(retryAfter+extra, time.Millisecond)
}
