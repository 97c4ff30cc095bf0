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
// one when the remainder has at least a millisecond.
//
// As in redis-cell, quantity 0 peeks: it answers the key's state (not
// limited, its remaining and reset) and spends nothing; and a quantity
// above max_burst+1, which can never fit, answers limited with retry -1
// and the key's state, spending nothing. Both are a take of cost 0 (a
// peek, api.Check) at the key's owner.
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
	switch {
	case maxBurst < 0:
		w.WriteError("ERR max_burst must be >= 0")
		return
	case quantity < 0:
		w.WriteError("ERR quantity must not be negative: a negative quantity would give tokens back")
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
	check := api.Check{Limit: s.cfg.ThrottleLimit, Key: string(args[1]), Cost: quantity, Inline: in}
	tooBig := quantity > burst
	if tooBig {
		check.Cost = 0 // never fits: answer the state, as redis-cell does
	}
	resp, ok := s.decidePeek(ctx, check, w)
	if !ok {
		return
	}
	r := resp.Results[0]
	limited := !resp.Allowed || tooBig
	retry := int64(-1)
	if limited && !tooBig {
		retry = cellSeconds(r.RetryAfter)
	}
	w.WriteArray(5)
	w.WriteInt64(bool01(limited))
	w.WriteInt64(r.Capacity)
	w.WriteInt64(r.Remaining)
	w.WriteInt64(retry)
	w.WriteInt64(cellSeconds(r.ResetAfter))
}

// decidePeek is decide for one check that may be a peek (cost 0): the
// check is validated as a take of cost 1 would be, then decided as it is.
func (s *Server) decidePeek(ctx context.Context, c api.Check, w *redcon.Writer) (api.TakeResponse, bool) {
	v := c
	v.Cost = max(v.Cost, 1)
	if err := api.ValidateChecks([]api.Check{v}, s.cfg.MaxKeyBytes, s.cfg.MaxChecks); err != nil {
		s.writeError(w, err)
		return api.TakeResponse{}, false
	}
	return s.ask(ctx, []api.Check{c}, w)
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
