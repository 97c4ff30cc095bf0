package client

import (
	"context"
	"fmt"
	"math"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/api/weirv1"
)

// ReleaseTimeout bounds the Release call that Lease.Close makes. A release
// that does not finish in time leaves the permit to expire by itself.
const ReleaseTimeout = 5 * time.Second

// Client calls a Weir node's weir.v1.Limiter service. It holds no state of
// its own besides the connection and is safe for concurrent use. The zero
// value is not usable: call New.
type Client struct {
	rpc weirv1.LimiterClient
}

// New returns a client over conn. The caller owns conn and closes it after
// every Lease of this client was closed.
func New(conn grpc.ClientConnInterface) *Client {
	return &Client{rpc: weirv1.NewLimiterClient(conn)}
}

// Take spends every check or none. A denial is a response with Allowed
// false, not an error. A Cost of 0 means the default of 1.
//
// Errors from the service come back as *api.Error: InvalidArgument as
// api.CodeInvalid, NotFound as api.CodeNotFound, Unavailable as
// api.CodeUnavailable (a fail-closed limit whose owner is unreachable, or
// the node itself unreachable: either way nothing was decided) and
// ResourceExhausted as api.CodeOverloaded. When ctx ended, the error wraps
// ctx.Err(); anything else wraps the gRPC status error.
func (c *Client) Take(ctx context.Context, checks ...api.Check) (api.TakeResponse, error) {
	req := &weirv1.TakeRequest{Checks: make([]*weirv1.Check, len(checks))}
	for i, ch := range checks {
		req.Checks[i] = &weirv1.Check{Limit: ch.Limit, Key: ch.Key, Cost: ch.Cost}
	}
	resp, err := c.rpc.Take(ctx, req)
	if err != nil {
		return api.TakeResponse{}, fromStatus(ctx, "take", err)
	}
	out := api.TakeResponse{
		Allowed:      resp.GetAllowed(),
		RetryAfter:   fromMs(resp.GetRetryAfterMs()),
		RulesVersion: resp.GetRulesVersion(),
		Results:      make([]api.Result, len(resp.GetResults())),
	}
	for i, r := range resp.GetResults() {
		out.Results[i] = api.Result{
			Limit:      r.GetLimit(),
			Allowed:    r.GetAllowed(),
			Remaining:  r.GetRemaining(),
			Capacity:   r.GetCapacity(),
			RetryAfter: fromMs(r.GetRetryAfterMs()),
			ResetAfter: fromMs(r.GetResetAfterMs()),
			Source:     fromSource(r.GetSource()),
			Window:     fromMs(r.GetWindowMs()),
		}
	}
	return out, nil
}

// fromStatus maps an RPC error back to the error a Decider would have
// returned (see Take).
func fromStatus(ctx context.Context, op string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("client: %s: %w", op, ctx.Err())
	}
	st, ok := status.FromError(err)
	if !ok {
		return fmt.Errorf("client: %s: %w", op, err)
	}
	var code api.Code
	switch st.Code() {
	case codes.InvalidArgument:
		code = api.CodeInvalid
	case codes.NotFound:
		code = api.CodeNotFound
	case codes.Unavailable:
		code = api.CodeUnavailable
	case codes.ResourceExhausted:
		code = api.CodeOverloaded
	default:
		return fmt.Errorf("client: %s: %w", op, err)
	}
	return &api.Error{Code: code, Detail: st.Message()}
}

func fromSource(s weirv1.Source) api.Source {
	if s == weirv1.Source_SOURCE_FALLBACK {
		return api.SourceFallback
	}
	return api.SourceOwner
}

// fromMs converts a wire millisecond figure; negative figures (never sent
// by a server) become zero.
func fromMs(ms int64) time.Duration {
	switch {
	case ms <= 0:
		return 0
	case ms > math.MaxInt64/int64(time.Millisecond):
		return math.MaxInt64
	}
	return time.Duration(ms) * time.Millisecond
}

// toMs converts a duration to whole milliseconds for the wire, rounding up
// so that a caller never gets less than it asked for.
func toMs(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}
