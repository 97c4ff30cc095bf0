package resp

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/tidwall/redcon"

	"github.com/weir-rl/weir/api"
)

// MaxBudgetMs bounds WEIR.CTAKE's budget_ms: a day. A caller with a
// longer deadline sends this much.
const MaxBudgetMs = 24 * 60 * 60 * 1000

// ctakeHead is the number of WEIR.CTAKE's arguments before its checks:
// the name, the request id and the budget.
const ctakeHead = 3

// ctake serves WEIR.CTAKE request_id budget_ms limit key cost [limit key
// cost ...], the Go client's take (package api/client): what a gRPC Take
// carries for it and what its answer carries back. request_id (0 to
// api.MaxRequestIDBytes bytes; empty is none) goes to the Decider as
// api.WithRequestID does on gRPC, so the owner answers a retry with its
// first decision; budget_ms (0: none) bounds the decision as the caller's
// gRPC deadline would. A cost of 0 means 1, as in a gRPC Check. The reply
// is one flat array:
//
//	[allowed, retry_after_ms, rules_version, ring_epoch, forwarded,
//	 then per check: limit, allowed, remaining, capacity, retry_after_ms,
//	 reset_after_ms, source (0 owner, 1 fallback, 2 allotment), window_ms]
//
// Errors are those of writeCError.
func (s *Server) ctake(ctx context.Context, _ *session, args [][]byte, w *redcon.Writer) {
	if (len(args)-ctakeHead)%3 != 0 {
		w.WriteError("ERR wrong number of arguments for 'weir.ctake' command")
		return
	}
	rid := args[1]
	if len(rid) > api.MaxRequestIDBytes {
		w.WriteError("ERR request_id has " + strconv.Itoa(len(rid)) + " bytes, over the " + strconv.Itoa(api.MaxRequestIDBytes) + " maximum")
		return
	}
	budget, ok := parseInt(args[2])
	if !ok || budget < 0 || budget > MaxBudgetMs {
		w.WriteError("ERR budget_ms must be an integer from 0 to " + strconv.Itoa(MaxBudgetMs))
		return
	}
	checks, bad := parseChecks(args[ctakeHead:], true)
	if bad != "" {
		w.WriteError(bad)
		return
	}
	if err := api.ValidateChecks(checks, s.cfg.MaxKeyBytes, s.cfg.MaxChecks); err != nil {
		writeCError(s, w, err)
		return
	}
	if budget > 0 {
		bctx := withBudget(ctx, time.Duration(budget)*time.Millisecond)
		defer bctx.stop()
		ctx = bctx
	}
	ctx = api.WithRequestID(ctx, string(rid)) // outermost: RequestID reads it without a lookup
	resp, err := s.d.Take(ctx, checks)
	if err == nil && len(resp.Results) != len(checks) {
		err = errNoResult
	}
	if err != nil {
		writeCError(s, w, err)
		return
	}
	w.WriteArray(5 + 8*len(resp.Results))
	w.WriteInt64(bool01(resp.Allowed))
	w.WriteInt64(api.MillisUp(resp.RetryAfter))
	w.WriteInt64(resp.RulesVersion)
	w.WriteUint64(resp.RingEpoch)
	w.WriteInt64(bool01(resp.Forwarded))
	for _, r := range resp.Results {
		w.WriteBulkString(r.Limit)
		w.WriteInt64(bool01(r.Allowed))
		w.WriteInt64(r.Remaining)
		w.WriteInt64(r.Capacity)
		w.WriteInt64(api.MillisUp(r.RetryAfter))
		w.WriteInt64(api.MillisUp(r.ResetAfter))
		w.WriteInt64(int64(r.Source))
		w.WriteInt64(api.MillisUp(r.Window))
	}
}

// writeCError writes WEIR.CTAKE's error reply: writeError's, except that
// it keeps apart what the gRPC Take keeps apart, so that the client
// returns the same error over either: QUOTA for a tenant's bucket quota
// (gRPC ResourceExhausted, as OVERLOADED), and DEADLINE when budget_ms ran
// out (gRPC DeadlineExceeded, not retried).
func writeCError(s *Server, w *redcon.Writer, err error) {
	if e, ok := errors.AsType[*api.Error](err); ok {
		if e.Code == api.CodeQuota {
			w.WriteError("QUOTA " + e.Detail)
			return
		}
	} else if errors.Is(err, context.DeadlineExceeded) {
		w.WriteError("DEADLINE deadline exceeded")
		return
	}
	s.writeError(w, err)
}
