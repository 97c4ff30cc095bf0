// Package lease implements Weir's concurrency permits: a table of leases per
// (limit, key), with expiry, renewal, fencing tokens and a bounded FIFO wait
// queue. It is the pure core; the node shell owns the goroutines, the timer,
// the lock and the network.
//
// # Model
//
// A concurrency limit (`kind: concurrency` in the limits file) allows
// Params.Permits leases of one (limit, key) at once. A lease is a permit
// held until it is released or until its expiry passes: the holder renews it
// while its work is healthy, and a holder that crashed or was cut off loses
// it after at most one TTL. Each lease carries
//
//   - an opaque id that routes to the owner by itself: ParseID recovers the
//     limit and key, so any node can forward a renew or release. The id is
//     the lease's only credential (whoever holds it may renew or release
//     it), so it ends in NonceBytes (128 bits) from crypto/rand
//     (Config.Rand): one's own id says nothing about the next;
//   - a fencing token, strictly increasing per (limit, key): a resource the
//     lease protects can reject a writer whose token is lower than one it has
//     already seen, which is what makes an expired-but-still-running holder
//     harmless (an expiring lease alone is not a hard cap);
//   - an expiry on the owner's clock, valid while now < Expires.
//
// When every permit is held, a caller that asked to wait is parked in the
// key's FIFO queue (at most Params.QueueLength long, each waiter at most
// Params.MaxWait old); a freed permit goes to the oldest waiter. A full queue,
// or a caller that does not wait, is refused at once with a RetryAfter hint.
// A refusal is a value (Status Refused), not an error.
//
// # Step functions
//
// Table is a state machine in the style of raft's RawNode: every method that
// takes a now first advances the table to now, replaying expiries and
// waiter deadlines in time order, and returns what happened as Events
// (leases that expired, leases granted to waiters, waiters dropped) beside
// its own answer. Nothing happens between steps. The shell drives it:
//
//	mu.Lock()
//	out, ev, err := table.Acquire(now, req, params)
//	next, ok := table.Next()
//	mu.Unlock()
//	deliver(ev)          // wake granted and dropped waiters, count expiries
//	resetTimer(next, ok) // when it fires: ev := table.Expire(now)
//
// Time is an argument, never read from a clock; a now earlier than one
// already seen is treated as that one, so a step never undoes time.
// Lifetimes handed to a waiter start at the step that grants them, never in
// the past, so a late timer never shortens the lease the holder is told of.
//
// Table is not safe for concurrent use.
//
// # Fencing and ownership changes
//
// Tokens come from one counter per Table (Config.FirstFencing upward), so
// they increase per key for as long as the table lives, across releases,
// expiries and keys that were forgotten in between, with no per-key state
// kept once a key holds nothing. When ownership of keys moves, the old owner
// Exports a Handoff (leases with relative remaining time, plus its counter)
// and the new owner Imports it, which raises the new owner's counter above
// every token the old one issued; RaiseFencing does the same from a
// replicated floor. A new owner that learns nothing (a crash without
// replication) is safe only if its own counter is already higher, which is
// why a node may seed FirstFencing from the wall clock.
//
// # Bounds
//
// Config.MaxLeases and Config.MaxWaiters bound the memory one node spends;
// at a cap Acquire returns ErrOverloaded so the node can apply the limit's
// failure policy (docs/architecture.md §8.3). A (limit, key) with no lease and no
// waiter is deleted at once.
package lease
