// Package client is the Go client of Weir's gRPC service weir.v1.Limiter,
// for callers that take tokens and hold concurrency permits.
//
// # Connecting
//
// Dial makes a cluster-aware client from a few seed addresses (any
// members' public gRPC addresses):
//
//	c, err := client.Dial(ctx, []string{"weir-0:8081", "weir-1:8081"}, client.Options{
//		TLSConfig: tlsConfig, // nil: plaintext
//	})
//	...
//	defer c.Close()
//
// It fetches the ring from the first seed that answers (GetRing: the
// members with their public addresses and the partition table), holds one
// connection per live member, and sends each take and lease straight to the
// owner of its key, computed exactly as a node computes it (package
// ring/ownership, which nodes and this client share). A multi-check goes to
// its owner when its keys share one (hash tags: "tenant:{acme}:route"),
// else to any member, which splits it.
//
// New wraps one connection the caller dialled and owns, and sends
// everything there; the node forwards what it does not own:
//
//	conn, err := grpc.NewClient("weir:8081", grpc.WithTransportCredentials(...))
//	...
//	defer conn.Close()
//	c := client.New(conn)
//
// # Keeping the ring current
//
// Every answer says the epoch of the ring view the member routed it by, and
// whether it had to forward. The client fetches the ring again when a
// member answers with a newer epoch than it last did, when an answer was
// forwarded (the client's view is stale), when a member fails, and every
// Options.RefreshInterval, at most every Options.MinRefreshInterval. A
// stale view never fails a request: whichever member gets it forwards it
// to the owner in its own view, and a member that fails is skipped for a
// second while the ring is fetched again. Epochs of different members are
// unrelated, so the client compares each member's epochs only with its own.
//
// # Taking tokens
//
// Take spends every check or none. A denial is a value (Allowed false);
// errors are *api.Error for the service's own status codes (see Take), so
// callers branch on api.Code exactly as a node's Decider does.
//
// # The lean transport
//
// When a member advertises a Redis-protocol endpoint (weir serve
// --resp-addr; GetRing's resp_addr), a client made by Dial sends its takes
// there, as WEIR.CTAKE (package api/resp), and keeps gRPC for the ring,
// leases, allotments, takes with inline limits and members without one
// (Options.Transport; TransportGRPC keeps every take on gRPC). The reason
// is a lone caller's latency: a gRPC take crosses four goroutine hand-offs
// (the client's writer, the server's reader and writer, the client's
// reader), which cost it about 160-200 µs at p50 on two cores against
// 47-49 µs for the same decision over RESP (issue 19's measurements).
// WEIR.CTAKE carries what a gRPC take carries: the request id (so retries
// are deduplicated exactly as over gRPC) and the remaining deadline, and
// its answer carries the ring epoch and the forwarded flag the ring refresh
// reads; its errors map to the same *api.Error.
//
// The client keeps up to Options.LeanConns connections per member (two by
// default): a take goes on the first with fewer than 32 takes in flight,
// so callers share one connection, and full writes, until the load asks
// for a second. A connection is opened on first use: TLS with
// Options.TLSConfig when set, AUTH with Options.Token when set, then a
// probe that the node serves WEIR.CTAKE. Concurrent takes share them: each appends its command under a
// lock and the first to reach the socket writes every command appended so
// far in one write, so takes that arrive while a write is under way leave
// together in the next (pipelining without a delay: a lone caller's take is
// written at once; a take that finds others in flight yields the processor
// once first, so that more of them share its write). The takes read the answers themselves, in order: the
// one that finds no one reading reads and hands each answer to its take
// until its own arrives, then passes the turn to the oldest take still
// waiting, so a lone caller reads its own answer with no goroutine in
// between. A connection that breaks fails the
// takes in flight on it as transport failures (retried under the usual
// rules, with the same request id); a member whose endpoint cannot be
// reached, or refuses the handshake, gets its takes over gRPC for a second.
// RESP is used only when it can do what gRPC would: Options.Credentials and
// Options.DialOptions (interceptors, per-RPC credentials) apply to gRPC
// calls, so with either set every take stays on gRPC.
//
// Over gRPC, concurrent takes from one process share one TakeStream per
// member: each is sent at once with its own stream id and matched to its
// response by that id, and many callers pay one stream message each
// instead of one HTTP/2 stream. Beyond Options.StreamInFlight takes in
// flight on a member, further takes use unary calls rather than queue.
//
// Wait blocks until a take is allowed: while denied it sleeps the server's
// retry-after plus jitter (Options.WaitJitter) and tries again, until ctx
// ends or its deadline falls before the next try.
//
// # Retries
//
// The client never retries a denial, nor an error about the request itself
// (invalid input, an overloaded node). It retries transport failures (a
// member unreachable, a connection or stream broken under a take) only when
// the retry cannot spend twice: every take carries a 16-byte request id (a
// random per-client prefix and a counter), and the owner that decides it
// remembers the decision for a short window (10 s, bounded in memory) and
// answers a retry of the same id with the first decision instead of
// spending again, whichever member the retry enters through. Only a take
// whose checks all have one owner is deduplicated, so a take over several
// owners is not retried. Decisions from local ceilings (the owner
// unreachable) are not remembered, and a retry after ownership moved is
// decided afresh by the new owner. A retry goes to a member other than
// those that failed the take's earlier attempts while one is left, healthy
// or not.
//
// Retries back off exponentially with full jitter (uniform in [0, cap],
// the cap doubling from RetryPolicy.BaseBackoff to MaxBackoff) and are
// bounded by a retry budget: at most RetryPolicy.Budget (10 %) of the
// requests of the last BudgetWindow (10 s), plus MinRetries per window so
// that a quiet client can still retry; past it, failures are returned at
// once. Acquire is not retried (a retried grant would hold a second
// permit until its TTL); renewals and releases are idempotent and try a
// second member when the first fails.
//
// Clock and Rand in Options make backoff, the budget and Wait
// deterministic in tests.
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
// Takes on a shared stream carry the stream's metadata, not the metadata
// of each call's context. A node with --tokens-file wants a caller token
// with every call: set Options.Token (sent as "authorization: Bearer
// TOKEN", and only over TLS unless Options.PlaintextToken):
//
//	c, err := client.Dial(ctx, seeds, client.Options{
//		TLSConfig: &tls.Config{RootCAs: pool},
//		Token:     os.Getenv("WEIR_TOKEN"),
//	})
//
// # Concurrency
//
// Client and Lease are safe for concurrent use. A Lease runs one goroutine,
// which Close stops; a Lease that is never closed renews forever. A client
// made by Dial runs a ring refresher and one receiver per member stream
// (lean connections are read by the takes waiting on them); Close stops
// them and closes its connections, and takes in flight on them fail.
package client
