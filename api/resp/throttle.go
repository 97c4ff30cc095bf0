package resp

import (
	"context"
	"errors"
	"math"
	"strconv"
	"time"

	"github.com/tidwall/redcon"

	"github.com/weir-rl/weir/api"
)

// errNoResult is a Decider answer without the results asked for.
var errNoResult = errors.New("resp: decider answered without a result per check")

// throttle serves redis-cell's CL.THROTTLE key max_burst count period
// [quantity] with its reply:
//
//	[limited (0 or 1), limit (max_burst+1), remaining, retry_after_s (-1 when allowed), reset_after_s]
//
// It is the inline limit {algorithm: gcra, burst: max_burst+1, rate:
// count/period s} on the bucket (Config.ThrottleLimit, key), decided,
// forwarded and validated like any inline limit, so the limits file must
// set inline_limits: true. Weir's gcra decides exactly like redis-cell's
// (emission interval period/count, tolerance (max_burst+1) x interval),
// and seconds are rounded as redis-cell rounds them: whole seconds, plus
// one when the remainder has at least a millisecond. quantity must lie in
// 1..max_burst+1: redis-cell's zero-quantity peek and its "limited, retry
// -1" answer to a quantity above the limit are -ERR here, since Weir has
// no take that spends nothing.
func (s *Server) throttle(ctx context.Context, _ *session, args [][]byte, w *redcon.Writer) {
	if len(args) > 6 {
		w.WriteError("ERR wrong number of arguments for 'cl.throttle' command")
		return
	}
	var nums [4]int64
	nums[3] = 1
	for i, name := range [...]string{"max_burst", "count per period", "period", "quantity"} {
		if 2+i >= len(args) {
			break
		}
		n, ok := parseInt(args[2+i])
		if !ok {
			w.WriteError("ERR " + name + " must be an integer")
			return
		}
		nums[i] = n
	}
	maxBurst, count, period, quantity := nums[0], nums[1], nums[2], nums[3]
	if maxBurst < 0 {
		w.WriteError("ERR max_burst must be >= 0")
		return
	}
	switch {
	case quantity == 0:
		w.WriteError("ERR quantity must be a positive integer: Weir has no take that spends nothing")
		return
	case quantity < 0:
		w.WriteError("ERR quantity must be a positive integer: a negative quantity would give tokens back")
		return
	}
	burst := maxBurst
	if maxBurst < math.MaxInt64 {
		burst = maxBurst + 1
	}
	in := &api.InlineLimit{
		Algorithm: "gcra",
		Burst:     burst,
		Rate:      strconv.FormatInt(count, 10) + "/" + strconv.FormatInt(period, 10) + "s",
	}
	resp, ok := s.decide(ctx, []api.Check{{Limit: s.cfg.ThrottleLimit, Key: string(args[1]), Cost: quantity, Inline: in}}, w)
	if !ok {
		return
	}
	r := resp.Results[0]
	retry := int64(-1)
	if !resp.Allowed {
		retry = cellSeconds(r.RetryAfter)
	}
	w.WriteArray(5)
	w.WriteInt64(bool01(!resp.Allowed))
	w.WriteInt64(r.Capacity)
	w.WriteInt64(r.Remaining)
	w.WriteInt64(retry)
	w.WriteInt64(cellSeconds(r.ResetAfter))
}

// cellSeconds rounds d to seconds as redis-cell does: the whole seconds,
// plus one when the remainder holds at least one whole millisecond (so a
// caller never retries early by more than a millisecond).
func cellSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := int64(d / time.Second)
	if (d%time.Second)/time.Millisecond > 0 {
		s++
	}
	return s
}
