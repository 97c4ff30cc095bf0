package client

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"math"
	"math/rand/v2"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// Options configure a Client made by Dial or NewWith. The zero value of
// every field means its default (DefaultOptions); Validate reports fields
// out of range.
type Options struct {
	// TLSConfig, when set, dials every member over TLS with this
	// configuration (clone it per call site if you mutate it). Nil dials in
	// plaintext, unless Credentials is set.
	TLSConfig *tls.Config
	// Credentials, when set, are the transport credentials for every
	// member; they take precedence over TLSConfig.
	Credentials credentials.TransportCredentials
	// DialOptions are appended to the options of every member connection
	// (interceptors, per-RPC credentials, ...).
	DialOptions []grpc.DialOption
	// Token, when set, is the caller token (weir serve --tokens-file) sent
	// with every call as "authorization: Bearer TOKEN". It is refused over
	// plaintext (Validate fails without TLSConfig or Credentials, and gRPC
	// will not send it on an insecure connection) unless PlaintextToken is
	// set, for a loopback or a network that is private by other means.
	Token string
	// PlaintextToken allows sending Token without TLS.
	PlaintextToken bool
	// RefreshInterval is how often the ring is fetched again when no answer
	// asked for it sooner. Default 30 s; at least 10 ms.
	RefreshInterval time.Duration
	// MinRefreshInterval spaces refreshes that answers ask for (a newer
	// epoch, a forward, a failed member). Default 100 ms; at least 1 ms.
	MinRefreshInterval time.Duration
	// StreamInFlight bounds the takes in flight on one member's shared
	// TakeStream; a take beyond it is sent as a unary call instead of
	// queueing. Default 512; at least 1.
	StreamInFlight int
	// Retry says when transport failures are retried.
	Retry RetryPolicy
	// WaitJitter is the fraction of the server's retry-after that Wait adds
	// at random (uniform in [0, WaitJitter × retry-after], and at least up
	// to 1 ms), so that callers denied together do not come back together.
	// Default 0.2; in (0, 10], or -1 for no jitter.
	WaitJitter float64
	// Clock is the client's time source for backoff, the retry budget,
	// Wait and refresh spacing. Nil means the real clock. Tests inject one.
	Clock Clock
	// Rand returns uniform numbers in [0, 1) for jitter; it must be safe
	// for concurrent use. Nil means math/rand/v2's Float64.
	Rand func() float64
	// Logger receives ring refreshes and member failures. Nil discards.
	Logger *slog.Logger
	// Allot turns on allotments: hot keys decided in this process from
	// slices of their buckets (AllotOptions). Off by default.
	Allot AllotOptions
	// Transport chooses how takes travel to a member (Dial only; a client
	// made by New or NewWith uses the caller's connection). The default,
	// TransportAuto, sends a take over the member's RESP endpoint
	// (WEIR.CTAKE on weir serve --resp-addr) when the member advertises
	// one, the take has no inline limit, and the options leave RESP able
	// to do what gRPC would: no Credentials (TLS comes from TLSConfig) and
	// no DialOptions (interceptors and per-RPC credentials apply to gRPC
	// calls only). Everything else, leases, allotments and the ring always
	// go over gRPC. TransportGRPC sends every take over gRPC.
	Transport Transport
	// LeanConns is the most RESP connections the client keeps to each
	// member for its takes (TransportAuto); concurrent takes share them,
	// pipelined. A take goes on the first connection with fewer than 32
	// takes in flight, and the next one is opened only when those before
	// it are that busy: the more takes share a write and a read, the less
	// each costs on both ends, and a member serves a connection on one
	// goroutine, so a busy client spreads over more. Default 2; from 1 to
	// 64.
	LeanConns int
}

// Transport says how a Client made by Dial sends its takes (see
// Options.Transport).
type Transport int

const (
	// TransportAuto sends takes over a member's RESP endpoint when it
	// advertises one, else over gRPC.
	TransportAuto Transport = iota
	// TransportGRPC sends every take over gRPC.
	TransportGRPC
)

// leanOK reports whether the options let takes go over RESP.
func (o Options) leanOK() bool {
	return o.Transport == TransportAuto && o.Credentials == nil && len(o.DialOptions) == 0
}

// RetryPolicy bounds the retries of transport failures. A denial is never
// retried, nor is an error the service returned about the request itself
// (invalid input, overload).
type RetryPolicy struct {
	// MaxAttempts bounds the tries of one take, the first included.
	// Default 3; 1 disables retries.
	MaxAttempts int
	// BaseBackoff is the backoff cap of the first retry; the cap doubles
	// with each retry up to MaxBackoff, and the pause is uniform in
	// [0, cap] (full jitter). Default 10 ms.
	BaseBackoff time.Duration
	// MaxBackoff caps the backoff. Default 1 s; at least BaseBackoff.
	MaxBackoff time.Duration
	// Budget bounds retries to this fraction of the requests of the last
	// BudgetWindow (plus MinRetries); past it, failures are returned at
	// once. Default 0.1; in (0, 1].
	Budget float64
	// BudgetWindow is the sliding window of the budget. Default 10 s; at
	// least 10 ms.
	BudgetWindow time.Duration
	// MinRetries are allowed per BudgetWindow whatever the request count,
	// so that a client with little traffic can still retry. Default 5;
	// -1 means none.
	MinRetries int
}

// Clock is what a Client needs of time. It must be safe for concurrent use.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// Sleep waits d, or until ctx ends, whichever is first, and returns
	// ctx.Err() in the second case.
	Sleep(ctx context.Context, d time.Duration) error
}

// DefaultOptions returns the defaults: plaintext, takes over a member's
// RESP endpoint when it advertises one (one connection per member, a second
// under load), ring refresh every 30 s
// (at most every 100 ms on demand), 512 takes in flight per member stream,
// three attempts with 10 ms to 1 s of
// full-jitter backoff under a 10 % retry budget over 10 s, 20 % wait
// jitter, the real clock.
func DefaultOptions() Options {
	return Options{
		RefreshInterval:    30 * time.Second,
		MinRefreshInterval: 100 * time.Millisecond,
		Retry: RetryPolicy{
			MaxAttempts: 3, BaseBackoff: 10 * time.Millisecond, MaxBackoff: time.Second,
			Budget: 0.1, BudgetWindow: 10 * time.Second, MinRetries: 5,
		},
		WaitJitter:     0.2,
		StreamInFlight: 512,
		LeanConns:      2,
	}
}

// Validate reports the first field out of range. It changes nothing.
func (o Options) Validate() error {
	o = o.withDefaults()
	r := o.Retry
	switch {
	case o.RefreshInterval < 10*time.Millisecond:
		return errors.New("client: Options.RefreshInterval must be at least 10ms")
	case o.MinRefreshInterval < time.Millisecond:
		return errors.New("client: Options.MinRefreshInterval must be at least 1ms")
	case o.StreamInFlight < 1:
		return errors.New("client: Options.StreamInFlight must be at least 1")
	case math.IsNaN(o.WaitJitter) || (o.WaitJitter < 0 && o.WaitJitter != -1) || o.WaitJitter > 10:
		return errors.New("client: Options.WaitJitter must be in (0, 10], or -1 for none")
	case r.MaxAttempts < 1:
		return errors.New("client: RetryPolicy.MaxAttempts must be at least 1")
	case r.BaseBackoff <= 0 || r.MaxBackoff < r.BaseBackoff:
		return errors.New("client: RetryPolicy backoffs must be positive, MaxBackoff at least BaseBackoff")
	case math.IsNaN(r.Budget) || r.Budget <= 0 || r.Budget > 1:
		return errors.New("client: RetryPolicy.Budget must be in (0, 1]")
	case r.BudgetWindow < 10*time.Millisecond:
		return errors.New("client: RetryPolicy.BudgetWindow must be at least 10ms")
	case r.MinRetries < -1:
		return errors.New("client: RetryPolicy.MinRetries must be -1 or more")
	case o.Transport != TransportAuto && o.Transport != TransportGRPC:
		return errors.New("client: Options.Transport must be TransportAuto or TransportGRPC")
	case o.LeanConns < 1 || o.LeanConns > 64:
		return errors.New("client: Options.LeanConns must be from 1 to 64")
	case o.Token != "" && !o.PlaintextToken && o.TLSConfig == nil && o.Credentials == nil:
		return errors.New("client: Options.Token is not sent over plaintext: set TLSConfig or Credentials, or PlaintextToken")
	}
	return o.Allot.validate()
}

// withDefaults fills zero fields with DefaultOptions'.
func (o Options) withDefaults() Options {
	d := DefaultOptions()
	if o.RefreshInterval == 0 {
		o.RefreshInterval = d.RefreshInterval
	}
	if o.MinRefreshInterval == 0 {
		o.MinRefreshInterval = d.MinRefreshInterval
	}
	if o.WaitJitter == 0 {
		o.WaitJitter = d.WaitJitter
	}
	if o.StreamInFlight == 0 {
		o.StreamInFlight = d.StreamInFlight
	}
	if o.LeanConns == 0 {
		o.LeanConns = d.LeanConns
	}
	r, dr := &o.Retry, d.Retry
	if r.MaxAttempts == 0 {
		r.MaxAttempts = dr.MaxAttempts
	}
	if r.BaseBackoff == 0 {
		r.BaseBackoff = dr.BaseBackoff
	}
	if r.MaxBackoff == 0 {
		r.MaxBackoff = max(dr.MaxBackoff, r.BaseBackoff)
	}
	if r.Budget == 0 {
		r.Budget = dr.Budget
	}
	if r.BudgetWindow == 0 {
		r.BudgetWindow = dr.BudgetWindow
	}
	if r.MinRetries == 0 {
		r.MinRetries = dr.MinRetries
	}
	if o.Clock == nil {
		o.Clock = realClock{}
	}
	if o.Rand == nil {
		o.Rand = rand.Float64
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// realClock is the system clock.
type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
