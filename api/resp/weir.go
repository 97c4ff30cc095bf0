package resp

import (
	"context"
	"strconv"
	"strings"

	"github.com/tidwall/redcon"

	"github.com/weir-rl/weir/api"
)

// take serves WEIR.TAKE limit key [cost]:
// [allowed, remaining, retry_after_ms, reset_after_ms].
func (s *Server) take(ctx context.Context, _ *session, args [][]byte, w *redcon.Writer) {
	if len(args) > 4 {
		w.WriteError("ERR wrong number of arguments for 'weir.take' command")
		return
	}
	c := api.Check{Limit: string(args[1]), Key: string(args[2]), Cost: 1}
	if len(args) == 4 {
		n, ok := parseInt(args[3])
		if !ok || n < 1 {
			w.WriteError("ERR cost must be a positive integer")
			return
		}
		c.Cost = n
	}
	resp, ok := s.decide(ctx, []api.Check{c}, w)
	if !ok {
		return
	}
	writeResult(w, resp.Allowed, resp.Results[0])
}

// decide validates checks exactly as the HTTP API does, takes them and
// returns the answer, with one result per check. On any failure it writes
// the error reply and reports false; nothing was spent unless the Decider
// decided.
func (s *Server) decide(ctx context.Context, checks []api.Check, w *redcon.Writer) (api.TakeResponse, bool) {
	if err := api.ValidateChecks(checks, s.cfg.MaxKeyBytes, s.cfg.MaxChecks); err != nil {
		s.writeError(w, err)
		return api.TakeResponse{}, false
	}
	return s.ask(ctx, checks, w)
}

// ask asks the Decider about validated checks and checks its answer has a
// result per check; on an error it writes it and reports false.
func (s *Server) ask(ctx context.Context, checks []api.Check, w *redcon.Writer) (api.TakeResponse, bool) {
	resp, err := s.d.Take(ctx, checks)
	if err != nil {
		s.writeError(w, err)
		return api.TakeResponse{}, false
	}
	if len(resp.Results) != len(checks) {
		s.writeError(w, errNoResult)
		return api.TakeResponse{}, false
	}
	return resp, true
}

// writeResult writes one check's [allowed, remaining, retry_after_ms,
// reset_after_ms].
func writeResult(w *redcon.Writer, allowed bool, r api.Result) {
	w.WriteArray(4)
	w.WriteInt64(bool01(allowed))
	w.WriteInt64(r.Remaining)
	w.WriteInt64(api.MillisUp(r.RetryAfter))
	w.WriteInt64(api.MillisUp(r.ResetAfter))
}

// mtake serves WEIR.MTAKE limit key cost [limit key cost ...]: every check
// is spent or none, answered [allowed, retry_after_ms, result...] with one
// WEIR.TAKE-shaped result per check.
func (s *Server) mtake(ctx context.Context, _ *session, args [][]byte, w *redcon.Writer) {
	if (len(args)-1)%3 != 0 {
		w.WriteError("ERR wrong number of arguments for 'weir.mtake' command")
		return
	}
	checks, bad := parseChecks(args[1:], false)
	if bad != "" {
		w.WriteError(bad)
		return
	}
	resp, ok := s.decide(ctx, checks, w)
	if !ok {
		return
	}
	w.WriteArray(2 + len(checks))
	w.WriteInt64(bool01(resp.Allowed))
	w.WriteInt64(api.MillisUp(resp.RetryAfter))
	for _, r := range resp.Results {
		writeResult(w, r.Allowed, r)
	}
}

// parseChecks reads (limit, key, cost) triples; len(args) is a multiple of
// 3, bounded by MaxArgs. A cost must be a positive integer, or with
// zeroIsOne (WEIR.CTAKE, as a gRPC Check) any integer, 0 meaning 1 and a
// negative one left to api.ValidateChecks. bad is the error reply for the
// first cost that is not, "" when none.
func parseChecks(args [][]byte, zeroIsOne bool) (checks []api.Check, bad string) {
	checks = make([]api.Check, len(args)/3)
	for i := range checks {
		a := args[3*i:]
		n, ok := parseInt(a[2])
		switch {
		case !ok && zeroIsOne:
			return nil, "ERR checks[" + strconv.Itoa(i) + "].cost must be an integer"
		case zeroIsOne && n == 0:
			n = 1
		case !ok || (n < 1 && !zeroIsOne):
			return nil, "ERR checks[" + strconv.Itoa(i) + "].cost must be a positive integer"
		}
		checks[i] = api.Check{Limit: string(a[0]), Key: string(a[1]), Cost: n}
	}
	return checks, ""
}

// acquire serves WEIR.ACQUIRE limit key [TTL ms] [WAIT ms] [HOLDER name]:
// [granted, id, fencing_token, ttl_ms, retry_after_ms]; a refusal has id
// "", fencing token and ttl 0.
func (s *Server) acquire(ctx context.Context, _ *session, args [][]byte, w *redcon.Writer) {
	var ttl, wait int64
	var holder string
	seen := map[string]bool{}
	for rest := args[3:]; len(rest) > 0; rest = rest[2:] {
		opt := strings.ToLower(string(rest[0]))
		if len(rest) < 2 {
			w.WriteError("ERR " + strings.ToUpper(opt) + " needs a value")
			return
		}
		if seen[opt] {
			w.WriteError("ERR " + strings.ToUpper(opt) + " is given twice")
			return
		}
		seen[opt] = true
		switch opt {
		case "ttl", "wait":
			n, ok := parseInt(rest[1])
			if !ok {
				w.WriteError("ERR " + opt + "_ms must be an integer")
				return
			}
			if opt == "ttl" {
				ttl = n
			} else {
				wait = n
			}
		case "holder":
			holder = string(rest[1])
		default:
			w.WriteError("ERR unknown option '" + printable(rest[0]) + "' (want TTL, WAIT or HOLDER)")
			return
		}
	}
	req, err := api.NewAcquireRequest(string(args[1]), string(args[2]), holder, ttl, wait, s.cfg.MaxKeyBytes)
	if err != nil {
		s.writeError(w, err)
		return
	}
	resp, err := s.d.Acquire(ctx, req)
	if err != nil {
		s.writeError(w, err)
		return
	}
	w.WriteArray(5)
	w.WriteInt64(bool01(resp.Granted))
	w.WriteBulkString(resp.ID)
	w.WriteUint64(resp.FencingToken)
	w.WriteInt64(api.MillisDown(resp.TTL))
	w.WriteInt64(api.MillisUp(resp.RetryAfter))
}

// renew serves WEIR.RENEW id [ttl_ms]: the lease's new ttl_ms, or
// -NOTFOUND when it expired or is unknown (stop working).
func (s *Server) renew(ctx context.Context, _ *session, args [][]byte, w *redcon.Writer) {
	if len(args) > 3 {
		w.WriteError("ERR wrong number of arguments for 'weir.renew' command")
		return
	}
	id := string(args[1])
	if err := api.ValidateLeaseID(id); err != nil {
		s.writeError(w, err)
		return
	}
	var ttlMs int64
	if len(args) == 3 {
		n, ok := parseInt(args[2])
		if !ok {
			w.WriteError("ERR ttl_ms must be an integer")
			return
		}
		ttlMs = n
	}
	ttl, err := api.Milliseconds("ttl_ms", ttlMs)
	if err != nil {
		s.writeError(w, err)
		return
	}
	got, err := s.d.Renew(ctx, id, ttl)
	if err != nil {
		s.writeError(w, err)
		return
	}
	w.WriteInt64(api.MillisDown(got))
}

// release serves WEIR.RELEASE id: OK, also when already released.
func (s *Server) release(ctx context.Context, _ *session, args [][]byte, w *redcon.Writer) {
	id := string(args[1])
	if err := api.ValidateLeaseID(id); err != nil {
		s.writeError(w, err)
		return
	}
	if err := s.d.Release(ctx, id); err != nil {
		s.writeError(w, err)
		return
	}
	w.WriteString("OK")
}
