// Package bucket holds Weir's rate-limiting algorithms and the in-memory
// store of live buckets on an owner node.
//
// # Algorithms
//
// TakeAt is the atomic transition of one bucket: token_bucket, gcra,
// sliding_window or fixed_window (docs/architecture.md §3). The algorithms are pure
// functions of (Limit, State, now, cost): they never read a clock, start no
// goroutine and allocate nothing. A State is 32 bytes; its zero value is a
// missing bucket, which is full.
//
//   - token_bucket is the classic lazy-refill bucket: lazy refill capped at
//     Capacity, t = max(now, last) so a backward clock mints nothing, spend on
//     allow, store balance and time on allow and on deny.
//   - gcra keeps the theoretical arrival time instead of a balance. Its
//     burst is Capacity, the number of cost-1 requests admitted at once from
//     idle, so gcra(r, B) decides exactly like token_bucket(r, B) on every
//     arrival sequence.
//   - sliding_window estimates the trailing window from two counters.
//   - fixed_window counts per UTC calendar minute, hour, day or month; up to
//     twice Capacity can pass across a boundary, which is its contract.
//
// Token counts and arrival times are exact rationals held in integers
// (128-bit intermediates from math/bits): a rate of 1/3s is never rounded,
// nothing drifts, and no parameter within the bounds that Limit.Validate
// enforces can overflow. Durations in a Decision are rounded up to the
// nanosecond and come from the same now as the decision.
//
// A Limit that changes under a live State migrates it: token_bucket clamps
// its balance to the new capacity, gcra keeps its debt (as time) clamped to
// the new burst, windows keep their counts clamped to the new limit; nothing
// resets. A fraction of a token (less than one) carried across a change of
// Rate.Per is re-read in the new units. A State kept under another algorithm
// is converted through a Snapshot.
//
// Eviction: State.EvictableAt reports whether a bucket would be full at now,
// from a full-at instant recorded at every transition, so forgetting it
// grants nothing and the store needs no Limit to decide.
//
// Snapshots carry a bucket between owners in relative terms only (spans from
// the exporter's now), so a receiver with another clock re-anchors them at
// its own now. MergeAt keeps the fewer tokens.
//
// # Time
//
// now is a time.Time from the owner's one clock. Instants are kept as Unix
// nanoseconds; pass a monotonic-derived time such as
// start.Add(time.Since(start)) so that wall-clock steps do not reach the
// algorithms. fixed_window reads now as UTC to find calendar periods.
//
// # Store
//
// Store holds the buckets of one node, striped over power-of-two shards,
// each with its own mutex; it is safe for concurrent use. A multi-check
// request locks its shards in ascending order and spends in every bucket or
// in none. The store is bounded by Config.MaxBuckets: at the cap a new key
// first evicts a full bucket found among a few sampled in its shard, and
// when none is full it gets ErrFull and creates nothing; a bucket that holds
// debt is never dropped. Store.SweepAt evicts full buckets in the
// background of the caller's choosing.
package bucket
