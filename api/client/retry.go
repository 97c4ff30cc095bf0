package client

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// backoff returns the pause before retry number attempt (0 for the first
// retry): full jitter, u × min(maxD, base × 2^attempt), with u uniform in
// [0, 1).
func backoff(attempt int, base, maxD time.Duration, u float64) time.Duration {
	capD := maxD
	if attempt < 62 && base <= maxD>>min(attempt, 62) {
		capD = base << attempt
	}
	return time.Duration(u * float64(capD))
}

// budgetSlots divides the budget's window.
const budgetSlots = 10

// retryBudget counts requests and retries over a sliding window of
// budgetSlots slots and allows a retry while retries stay within
// max(minRetries, ratio × requests). Time is an argument; not safe for
// concurrent use (Client guards it with a mutex).
type retryBudget struct {
	ratio      float64
	minRetries int
	slot       time.Duration
	slots      [budgetSlots]budgetSlot
}

type budgetSlot struct {
	idx              int64 // which slot of time it counts
	requests, retrys int
}

func newRetryBudget(p RetryPolicy) retryBudget {
	return retryBudget{ratio: p.Budget, minRetries: max(p.MinRetries, 0), slot: max(p.BudgetWindow/budgetSlots, time.Nanosecond)}
}

func (b *retryBudget) at(now time.Time) *budgetSlot {
	idx := now.UnixNano() / int64(b.slot)
	s := &b.slots[int(uint64(idx)%budgetSlots)]
	if s.idx != idx {
		*s = budgetSlot{idx: idx}
	}
	return s
}

// totals returns the requests and retries of the window ending at now.
func (b *retryBudget) totals(now time.Time) (requests, retries int) {
	idx := now.UnixNano() / int64(b.slot)
	for _, s := range b.slots {
		if s.idx <= idx && s.idx > idx-budgetSlots {
			requests += s.requests
			retries += s.retrys
		}
	}
	return requests, retries
}

// requestAt counts a request at now.
func (b *retryBudget) requestAt(now time.Time) { b.at(now).requests++ }

// retryAt reports whether a retry is allowed at now, and counts it if so.
func (b *retryBudget) retryAt(now time.Time) bool {
	req, ret := b.totals(now)
	if float64(ret+1) > max(float64(b.minRetries), b.ratio*float64(req)) {
		return false
	}
	b.at(now).retrys++
	return true
}

// retryable reports whether err is a transport failure worth retrying: the
// call failed before the service decided anything (Unavailable: the
// member is unreachable or closing, the owner of a fail-closed limit is
// unreachable, or a take with this request id is being decided), or the
// member's connection or stream broke under it (Canceled while ctx is
// live). A retry of a take is safe because it carries the same request id,
// which its owner deduplicates.
func retryable(ctx context.Context, err error) bool {
	if ctx.Err() != nil || err == nil {
		return false
	}
	if errors.Is(err, errStreamBroken) || errors.Is(err, errConnBroken) {
		return true
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.Canceled:
		return true
	}
	return false
}
