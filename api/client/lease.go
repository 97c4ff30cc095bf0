package client

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/api/weirv1"
)

// Why a lease ended, as returned by Lease.Err and context.Cause of
// Lease.Context. Compare with errors.Is: ErrLost and ErrExpired come wrapped
// with the server's detail or the last renewal error.
var (
	// ErrRefused is what a *RefusedError wraps: Acquire got no permit.
	ErrRefused = errors.New("client: no permit granted")
	// ErrLost means a renewal was answered NotFound: the server no longer
	// holds the lease (it expired there, or it was released by id).
	ErrLost = errors.New("client: lease lost")
	// ErrExpired means renewals kept failing until the lease's lifetime, as
	// last granted, ran out.
	ErrExpired = errors.New("client: lease expired: renewals failed until its lifetime ran out")
	// ErrClosed means Close was called.
	ErrClosed = errors.New("client: lease closed")
)

// DefaultRenewFraction is the part of a lease's lifetime between renewals
// when AcquireOptions.RenewFraction is zero: a renewal may fail twice before
// the lease is in danger.
const DefaultRenewFraction = 1.0 / 3

// minRetry is the shortest pause between failed renewals.
const minRetry = 5 * time.Millisecond

// RefusedError is Acquire's error when the node granted no permit: all were
// held and the caller did not wait, the queue was full, or the wait ran out.
// It wraps ErrRefused.
type RefusedError struct {
	// RetryAfter is the node's hint of when a permit may free; zero when
	// it gave none.
	RetryAfter time.Duration
}

// Error implements error.
func (e *RefusedError) Error() string {
	return fmt.Sprintf("%v (retry after %v)", ErrRefused, e.RetryAfter)
}

// Unwrap returns ErrRefused, so errors.Is(err, ErrRefused) holds.
func (e *RefusedError) Unwrap() error { return ErrRefused }

// AcquireOptions are the optional parts of an Acquire. The zero value asks
// for the limit's lease_ttl, does not wait, and renews every third of the
// lifetime.
type AcquireOptions struct {
	// Holder names the holder, for the node's logs and status. Optional.
	Holder string
	// TTL is the lease lifetime asked for, on acquire and on every
	// renewal; the node clamps it to the limit's max_lease_ttl. Zero means
	// the limit's lease_ttl. Sent in whole milliseconds, rounded up.
	TTL time.Duration
	// Wait is how long the caller may queue for a permit; the node caps it
	// at the limit's queue.max_wait. Zero means do not queue. Acquire's
	// context may end the wait sooner.
	Wait time.Duration
	// RenewFraction is the part of the granted lifetime between renewals,
	// in (0, 1). Zero means DefaultRenewFraction.
	RenewFraction float64
}

// Validate reports a negative duration or a RenewFraction outside [0, 1).
// It changes nothing.
func (o AcquireOptions) Validate() error {
	switch {
	case o.TTL < 0:
		return errors.New("client: AcquireOptions.TTL must not be negative")
	case o.Wait < 0:
		return errors.New("client: AcquireOptions.Wait must not be negative")
	case math.IsNaN(o.RenewFraction) || o.RenewFraction < 0 || o.RenewFraction >= 1:
		return errors.New("client: AcquireOptions.RenewFraction must be in (0, 1), or 0 for the default")
	}
	return nil
}

// Lease is one held concurrency permit. It renews itself in the background
// until Close; its Context ends when it is closed or lost. Its methods are
// safe for concurrent use.
type Lease struct {
	rpc      leaseCaller
	id       string
	fencing  uint64
	askTTL   time.Duration // sent on every renewal
	fraction float64

	ctx    context.Context
	cancel context.CancelCauseFunc // its cause is why the lease ended
	done   chan struct{}           // closed when the renewal loop returned

	closeOnce sync.Once
	closeErr  error // set inside closeOnce
}

// Acquire asks for a permit of the concurrency limit for key, queueing up
// to opts.Wait, and on a grant starts renewing it. It returns a
// *RefusedError (errors.Is ErrRefused) when no permit was granted, and
// *api.Error for the service's errors as Take does.
//
// The caller must Close the lease on every path; defer l.Close() right
// after the error check, or use WithLease. ctx bounds the request and the
// wait; the lease outlives it (its Context keeps ctx's values, such as
// outgoing gRPC metadata, but not its cancellation or deadline).
func (c *Client) Acquire(ctx context.Context, limit, key string, opts AcquireOptions) (*Lease, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	fraction := opts.RenewFraction
	if fraction == 0 {
		fraction = DefaultRenewFraction
	}
	sent := time.Now()
	m, toOwner := c.r.pickFor(limit, key)
	resp, err := m.rpc.Acquire(ctx, &weirv1.AcquireRequest{
		Limit: limit, Key: key, Holder: opts.Holder, TtlMs: api.MillisUp(opts.TTL), WaitMs: api.MillisUp(opts.Wait),
	})
	if err != nil {
		if retryable(ctx, err) {
			c.r.failed(m)
		}
		return nil, fromStatus(ctx, "acquire", err)
	}
	c.r.observe(m, resp.GetRingEpoch(), toOwner && resp.GetForwarded())
	if !resp.GetGranted() {
		return nil, &RefusedError{RetryAfter: api.MillisDuration(resp.GetRetryAfterMs())}
	}
	if resp.GetId() == "" {
		return nil, errors.New("client: acquire: the node granted a lease without an id")
	}
	l := &Lease{
		rpc: leaseCallerFor(c.r, m, limit, key), id: resp.GetId(), fencing: resp.GetFencingToken(),
		askTTL: opts.TTL, fraction: fraction, done: make(chan struct{}),
	}
	l.ctx, l.cancel = context.WithCancelCause(context.WithoutCancel(ctx))
	// The lifetime runs from the node's grant, which is after sent: an
	// expiry counted from sent is never later than the node's.
	go l.renew(sent.Add(api.MillisDuration(resp.GetTtlMs())), api.MillisDuration(resp.GetTtlMs()))
	return l, nil
}

// WithLease acquires a permit as Acquire does, runs fn with a context that
// ends when ctx ends or the lease is lost, and releases the permit however
// fn returns, panics included. fencing is the lease's fencing token, for
// the resource the permit protects.
//
// It returns Acquire's error, or fn's error joined with the lease's Err when
// the lease was lost or expired before fn returned (errors.Is(err, ErrLost)
// then holds: the work may have run without its permit). A failed release
// is not reported: the work is done and the permit expires by itself within
// its TTL.
func (c *Client) WithLease(ctx context.Context, limit, key string, opts AcquireOptions, fn func(ctx context.Context, fencing uint64) error) error {
	l, err := c.Acquire(ctx, limit, key, opts)
	if err != nil {
		return err
	}
	defer func() { _ = l.Close() }()
	fctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(l.ctx, func() { cancel(context.Cause(l.ctx)) })
	defer stop()
	fnErr := fn(fctx, l.fencing)
	if lost := l.Err(); lost != nil && !errors.Is(fnErr, lost) {
		return errors.Join(fnErr, lost)
	}
	return fnErr
}

// ID returns the lease id, which a node resolves to the lease's owner by
// itself.
func (l *Lease) ID() string { return l.id }

// FencingToken returns the lease's fencing token: it strictly increases per
// (limit, key), so a protected resource can reject a holder whose token is
// lower than one it has already seen.
func (l *Lease) FencingToken() uint64 { return l.fencing }

// Context returns a context that is cancelled when the lease ends: on
// Close, or when it is lost or expired (see Err). context.Cause reports the
// same error as Err.
func (l *Lease) Context() context.Context { return l.ctx }

// Err returns nil while the lease is held, else why it ended: ErrClosed,
// or an error wrapping ErrLost or ErrExpired. A lease lost before Close
// keeps that reason after Close.
func (l *Lease) Err() error {
	if l.ctx.Err() == nil {
		return nil
	}
	return context.Cause(l.ctx)
}

// Close stops renewing, cancels the lease's Context and releases the
// permit, waiting at most ReleaseTimeout. It is idempotent and safe after
// the lease was lost (then it sends nothing). It returns only a failure to
// release, in which case the permit expires by itself within its TTL; Err
// says whether the lease was lost while it was held.
func (l *Lease) Close() error {
	l.closeOnce.Do(func() {
		l.cancel(ErrClosed) // a no-op when the lease already ended
		<-l.done            // no renewal may follow the release
		if errors.Is(context.Cause(l.ctx), ErrLost) {
			return // the node no longer holds it
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(l.ctx), ReleaseTimeout)
		defer cancel()
		if _, err := l.rpc.Release(ctx, &weirv1.ReleaseRequest{Id: l.id}); err != nil {
			l.closeErr = fromStatus(ctx, "release", err)
		}
	})
	return l.closeErr
}

// every is the pause between renewals of a lease granted for ttl.
func (l *Lease) every(ttl time.Duration) time.Duration {
	return max(time.Duration(float64(ttl)*l.fraction), time.Millisecond)
}

// renew is the lease's one goroutine: it renews every fraction of the
// granted lifetime until the lease's context ends, and ends the lease when
// the node answers NotFound or when renewals fail until expiry. expiry is
// the local instant by which the node surely stopped holding the lease
// unless renewed.
func (l *Lease) renew(expiry time.Time, ttl time.Duration) {
	defer close(l.done)
	t := time.NewTimer(l.every(ttl))
	defer t.Stop()
	var lastErr error
	for {
		select {
		case <-l.ctx.Done():
			return
		case <-t.C:
		}
		sent := time.Now()
		if !sent.Before(expiry) {
			if lastErr != nil {
				l.cancel(fmt.Errorf("%w (last renewal error: %w)", ErrExpired, lastErr))
			} else {
				l.cancel(ErrExpired) // the process was paused past the expiry
			}
			return
		}
		rctx, cancel := context.WithDeadline(l.ctx, expiry)
		resp, err := l.rpc.Renew(rctx, &weirv1.RenewRequest{Id: l.id, TtlMs: api.MillisUp(l.askTTL)})
		cancel()
		switch {
		case l.ctx.Err() != nil: // closed meanwhile
			return
		case err == nil:
			ttl = api.MillisDuration(resp.GetTtlMs())
			expiry = sent.Add(ttl)
			lastErr = nil
			t.Reset(time.Until(sent.Add(l.every(ttl))))
		case status.Code(err) == codes.NotFound:
			l.cancel(fmt.Errorf("%w: %s", ErrLost, status.Convert(err).Message()))
			return
		default:
			lastErr = err
			left := time.Until(expiry)
			d := min(l.every(ttl), left/2)
			if d < minRetry {
				d = min(minRetry, max(left, 0))
			}
			t.Reset(d)
		}
	}
}
