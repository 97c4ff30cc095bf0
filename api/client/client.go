package client

import (
	"context"
	"fmt"
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

// Client calls Weir's weir.v1.Limiter service: over one caller-owned
// connection (New, NewWith), or over one connection per cluster member,
// routing each request to its key's owner (Dial). It is safe for
// concurrent use. The zero value is not usable.
type Client struct {
	r    *router
	al   *allotter
	opts Options
}

// New returns a client over conn with DefaultOptions. The caller owns conn
// and closes it after every Lease of this client was closed.
func New(conn grpc.ClientConnInterface) *Client {
	c, _ := NewWith(conn, Options{}) // the zero Options are valid
	return c
}

// NewWith returns a client over conn, which the caller owns, with opts (its
// connection fields are ignored, but for Token, sent with each call):
// takes are unary calls on conn, retried under opts.Retry.
func NewWith(conn grpc.ClientConnInterface, opts Options) (*Client, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	if opts.Token != "" {
		// A caller-owned connection: the token goes with each call.
		conn = tokenConn{conn, grpc.PerRPCCredentials(newTokenCreds(opts.Token, opts.PlaintextToken))}
	}
	r := newRouter(opts)
	r.static = true
	m := &member{name: "", rpc: weirv1.NewLimiterClient(conn)}
	r.members.Store(&memberSet{byName: map[string]*member{}, list: []*member{m}})
	return &Client{r: r, al: newAllotter(r, opts), opts: opts}, nil
}

// Close returns the allotments the client holds (Options.Allot, within
// two seconds), then stops a client made by Dial: its ring refresher, its
// streams and its member connections (takes in flight fail). Close leases
// first. For a client made by New, Close closes no connection: the caller
// owns it. Close is idempotent.
func (c *Client) Close() error {
	c.al.close()
	c.r.close()
	return nil
}

// Owner returns the name of the member this client would send a take of
// (limit, key) to by its current ring; ok is false for a client without a
// ring (New) or before it has one.
func (c *Client) Owner(limit, key string) (string, bool) {
	v := c.r.view.Load()
	if v == nil {
		return "", false
	}
	return v.owner(limit, key)
}

// Stats counts what a Client did since it was made. All counts only grow.
type Stats struct {
	// Takes counts Take calls (each try of Wait is one).
	Takes uint64
	// Retries counts retried attempts of takes after transport failures.
	Retries uint64
	// BudgetRefused counts failures returned without a retry because the
	// retry budget was spent.
	BudgetRefused uint64
	// MemberFailures counts requests that found a member unreachable.
	MemberFailures uint64
	// RingUpdates counts the rings installed (Dial's first included).
	RingUpdates uint64
	// Allotted counts takes decided in this process from allotments
	// (Options.Allot), allowed or denied; they are counted in Takes too.
	Allotted uint64
	// AllotAsks counts allotments asked of owners (first asks and
	// refreshes); AllotFailures those that got no allotment (an owner
	// unreachable, or refusing allotments of the limit).
	AllotAsks, AllotFailures uint64
	// AllotReturns counts allotments given back (idle keys, Close).
	AllotReturns uint64
	// LeanTakes counts attempts of takes sent over a member's RESP
	// endpoint (Options.Transport), retries included.
	LeanTakes uint64
}

// Stats returns the client's counters.
func (c *Client) Stats() Stats {
	s := &c.r.stats
	return Stats{
		Takes: s.takes.Load(), Retries: s.retries.Load(), BudgetRefused: s.budgetRefused.Load(),
		MemberFailures: s.failures.Load(), RingUpdates: s.refreshes.Load(), LeanTakes: s.lean.Load(),
		Allotted: c.al.allotted.Load(), AllotAsks: c.al.asks.Load(), AllotFailures: c.al.failures.Load(), AllotReturns: c.al.returns.Load(),
	}
}

// RingEpoch returns the epoch of the ring the client routes by and the
// member that published it; zero and "" for a client without a ring.
func (c *Client) RingEpoch() (uint64, string) {
	v := c.r.view.Load()
	if v == nil {
		return 0, ""
	}
	return v.epoch, v.from
}

// Take spends every check or none. A denial is a response with Allowed
// false, not an error, and is never retried. A Cost of 0 means the default
// of 1. A client made by Dial sends the take to the owner of its keys when
// they share one (hash tags), else to any member, which forwards.
//
// A transport failure is retried under Options.Retry (capped exponential
// backoff with full jitter, within the retry budget) when every check has
// one owner: the take carries a request id, and its owner answers a retry
// with the first decision instead of spending again. A take over several
// owners is not retried.
//
// Errors from the service come back as *api.Error: InvalidArgument as
// api.CodeInvalid, NotFound as api.CodeNotFound, Unavailable as
// api.CodeUnavailable (a fail-closed limit whose owner is unreachable, or
// the node itself unreachable: either way nothing was decided) and
// ResourceExhausted as api.CodeOverloaded. When ctx ended, the error wraps
// ctx.Err(); anything else wraps the gRPC status error.
//
// With Options.Allot on, a take of up to four named-limit checks on keys
// this client holds allotments of is decided in this process, without a
// call: its results say Source api.SourceAllotment, Remaining is what is
// left of the client's allotment (not of the bucket), and a denial the
// owner gave (the bucket empty) is repeated until its retry-after.
func (c *Client) Take(ctx context.Context, checks ...api.Check) (api.TakeResponse, error) {
	if resp, ok := c.al.take(checks); ok {
		c.r.stats.takes.Add(1)
		return resp, nil
	}
	return c.r.take(ctx, checks)
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
	switch s {
	case weirv1.Source_SOURCE_FALLBACK:
		return api.SourceFallback
	case weirv1.Source_SOURCE_ALLOTMENT:
		return api.SourceAllotment
	}
	return api.SourceOwner
}
