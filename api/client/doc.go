// Package client is a small Go client of Weir's gRPC service weir.v1.Limiter
// for callers that take tokens and hold concurrency permits.
//
// The caller dials and owns the connection; New wraps it:
//
//	conn, err := grpc.NewClient("weir:8081", grpc.WithTransportCredentials(...))
//	...
//	defer conn.Close()
//	c := client.New(conn)
//
// # Taking tokens
//
// Take spends every check or none. A denial is a value (Allowed false);
// errors are *api.Error for the service's own status codes (see Take), so
// callers branch on api.Code exactly as a node's Decider does.
//
// # Holding a permit
//
// Acquire returns a *Lease that renews itself in the background every
// RenewFraction x TTL (a third of the lease's lifetime by default) until it
// is closed. The lease must be closed on every path, which is easiest with
// defer right after the error check:
//
//	l, err := c.Acquire(ctx, "export-db", "tenant:acme", client.AcquireOptions{Wait: 5 * time.Second})
//	if errors.Is(err, client.ErrRefused) {
//		// no permit: err is a *client.RefusedError with a RetryAfter hint
//	}
//	if err != nil {
//		return err
//	}
//	defer l.Close()
//	return doWork(l.Context(), l.FencingToken())
//
// WithLease does the same in one call and cannot leak a permit: it acquires,
// runs a function with the lease's context and fencing token, and releases
// on every way out of the function (return, error, panic, cancellation):
//
//	err := c.WithLease(ctx, "export-db", "tenant:acme", opts, func(ctx context.Context, fencing uint64) error {
//		return doWork(ctx, fencing)
//	})
//
// # When a lease ends
//
// A lease's Context is cancelled, and Err says why, when
//
//   - Close was called (ErrClosed);
//   - a renewal was answered NotFound (ErrLost): the server no longer holds
//     the lease: it expired (the process was paused, say) or someone
//     released it by id;
//   - renewals kept failing (owner unreachable, say) until the lifetime of
//     the last successful grant or renewal, measured from when that request
//     was sent, ran out (ErrExpired).
//
// Work done under a lease should stop when its Context ends and should pass
// the fencing token to the resource it protects: an expiring lease alone is
// not a hard cap (a holder paused past its expiry may still be running), the
// fencing token is what lets the resource reject a stale holder.
//
// The lease's Context is not derived from the context passed to Acquire,
// whose deadline usually bounds only the wait for a permit; it keeps its
// values. WithLease's function gets a context that ends with either.
//
// # Caveats
//
// If Acquire's context ends after the server granted a permit but before the
// answer arrived, the client never learns the lease id; that permit is held
// until its TTL runs out. Keep TTLs short for work that may be abandoned.
//
// Client and Lease are safe for concurrent use. A Lease runs one goroutine,
// which Close stops; a Lease that is never closed renews forever.
package client
