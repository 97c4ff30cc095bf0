package middleware

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/bucket"
)

// Taker decides takes. *client.Client satisfies it, and so does any client
// with the same Take.
type Taker interface {
	// Take spends every check or none; a denial is a response, errors are
	// *api.Error as the Go client returns them.
	Take(ctx context.Context, checks ...api.Check) (api.TakeResponse, error)
}

// Policy is what a route does when Weir cannot decide.
type Policy uint8

const (
	// FailOpen lets the request through undecided. It is the zero value.
	FailOpen Policy = iota
	// FailClosed refuses the request: 503 or Unavailable.
	FailClosed
	// FailLocal decides from Route.Fallback in this process.
	FailLocal
)

// String returns "open", "closed" or "local".
func (p Policy) String() string {
	switch p {
	case FailOpen:
		return "open"
	case FailClosed:
		return "closed"
	case FailLocal:
		return "local"
	}
	return fmt.Sprintf("policy(%d)", uint8(p))
}

// Route is the limit of one route (an HTTP handler, a gRPC method).
type Route struct {
	// Limit is the Weir limit's name. Required.
	Limit string
	// OnUnavailable is the failure policy; the zero value is FailOpen.
	OnUnavailable Policy
	// Fallback is the local limit FailLocal decides by, per key, in this
	// process; required for FailLocal and ignored otherwise. Size it as a
	// share of the Weir limit (the capacity divided by the replicas of the
	// service, say).
	Fallback bucket.Limit
}

// Validate reports a route that cannot be served. It changes nothing.
func (r Route) Validate() error {
	switch {
	case r.Limit == "":
		return errors.New("middleware: Route.Limit is empty")
	case r.OnUnavailable > FailLocal:
		return fmt.Errorf("middleware: route %q: unknown policy %d", r.Limit, r.OnUnavailable)
	case r.OnUnavailable == FailLocal:
		if err := r.Fallback.Validate(); err != nil {
			return fmt.Errorf("middleware: route %q: FailLocal needs a valid Fallback: %w", r.Limit, err)
		}
	}
	return nil
}

// errKey is the error of a config without a key function.
var errKey = errors.New("middleware: Key is nil: a key function is required (no default reads a client's header)")

// DefaultTimeout bounds one call to Weir when a config's Timeout is zero.
const DefaultTimeout = 100 * time.Millisecond

// core is what the HTTP and gRPC middleware share: the call to Weir and the
// failure policies. It is safe for concurrent use (bucket.Store locks its
// shards).
type core struct {
	taker   Taker
	timeout time.Duration
	now     func() time.Time
	local   *bucket.Store
	log     *slog.Logger
}

// validateCommon checks what both configs hold.
func validateCommon(taker Taker, noKey bool, timeout time.Duration, fallbackBuckets int) error {
	switch {
	case taker == nil:
		return errors.New("middleware: Taker is nil")
	case noKey:
		return errKey
	case timeout < 0 || fallbackBuckets < 0:
		return errors.New("middleware: negative Timeout or FallbackBuckets")
	}
	return nil
}

// newCore builds the shared part of a validated config.
func newCore(taker Taker, timeout time.Duration, fallbackBuckets int, clock func() time.Time, log *slog.Logger) (*core, error) {
	if err := validateCommon(taker, false, timeout, fallbackBuckets); err != nil {
		return nil, err
	}
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	sc := bucket.LocalConfig()
	if fallbackBuckets > 0 {
		sc.MaxBuckets = max(fallbackBuckets, sc.Shards)
	}
	if clock == nil {
		clock = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &core{taker: taker, timeout: timeout, now: clock, local: bucket.NewStore(sc), log: log}, nil
}

// verdict is what the middleware does with a request.
type verdict uint8

const (
	pass        verdict = iota // run the handler, with headers when decided
	deny                       // 429 / ResourceExhausted with headers
	unavailable                // 503 / Unavailable
	misrouted                  // 500 / Internal: Weir refused the check itself
)

// outcome is a verdict and, when something decided, its response.
type outcome struct {
	v       verdict
	resp    api.TakeResponse
	decided bool
}

// decide asks Weir, and applies route's failure policy when it cannot
// answer. Logs never hold the key.
func (c *core) decide(ctx context.Context, route Route, key string, cost int64) outcome {
	tctx, cancel := context.WithTimeout(ctx, c.timeout)
	resp, err := c.taker.Take(tctx, api.Check{Limit: route.Limit, Key: key, Cost: cost})
	cancel()
	if err == nil {
		if len(resp.Results) == 0 {
			c.log.Error("middleware: Weir answered without results", "limit", route.Limit)
			return outcome{v: misrouted}
		}
		return verdictOf(resp)
	}
	if e, ok := errors.AsType[*api.Error](err); ok && (e.Code == api.CodeInvalid || e.Code == api.CodeNotFound) {
		c.log.Error("middleware: Weir refused the check; fix the route", "limit", route.Limit, "err", err)
		return outcome{v: misrouted}
	}
	c.log.Warn("middleware: Weir could not decide; applying the route's policy",
		"limit", route.Limit, "policy", route.OnUnavailable.String(), "err", err)
	switch route.OnUnavailable {
	case FailClosed:
		return outcome{v: unavailable}
	case FailLocal:
		return c.decideLocal(route, key, cost)
	}
	return outcome{v: pass}
}

// decideLocal decides from the route's local fallback bucket. A cost above
// its capacity can never fit: it is denied without spending.
func (c *core) decideLocal(route Route, key string, cost int64) outcome {
	l := route.Fallback
	if cost > l.Capacity {
		w := l.PolicyWindow()
		return verdictOf(localResponse(route, bucket.Decision{Limit: l.Capacity, RetryAfter: w, ResetAfter: w}))
	}
	ds, _, err := c.local.TakeAt(c.now(), []bucket.Check{{Name: route.Limit, Limit: l, Key: key, Cost: cost}}, nil)
	if err != nil { // the local store is full of buckets in debt
		return outcome{v: unavailable}
	}
	return verdictOf(localResponse(route, ds[0]))
}

func localResponse(route Route, d bucket.Decision) api.TakeResponse {
	return api.TakeResponse{
		Allowed:    d.Allowed,
		RetryAfter: d.RetryAfter,
		Results: []api.Result{{
			Limit: route.Limit, Allowed: d.Allowed, Remaining: d.Remaining, Capacity: d.Limit,
			RetryAfter: d.RetryAfter, ResetAfter: d.ResetAfter, Source: api.SourceFallback,
			Window: route.Fallback.PolicyWindow(),
		}},
	}
}

func verdictOf(resp api.TakeResponse) outcome {
	if resp.Allowed {
		return outcome{v: pass, resp: resp, decided: true}
	}
	return outcome{v: deny, resp: resp, decided: true}
}
