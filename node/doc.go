// Package node wires one Weir member together: the limits file in force,
// the bucket stores, the lease table, the ring and the peer transport, and
// the public HTTP and gRPC listeners. It is the only package that knows all
// the others (docs/architecture.md §2); cmd/weir, jepsen and bench build on it.
//
// # The decision engine
//
// engine.take is the one place that decides "local, forward or fallback".
// A request's checks are validated against the limits file before any
// state is touched, then grouped by placement: the pure core
// node/placement answers, for takes and leases alike, one typed
// Placement per key (here, forward to a peer, a local ceiling, or here
// from a replica). Each group is one atomic step:
// at this node when it owns the keys, forwarded to the owner (batched per
// peer, 50 ms deadline) otherwise, and decided from a local ceiling when
// the owner cannot be reached. If any group is denied, the groups already
// spent are refunded, so a multi-check spends everywhere or nowhere.
//
// A local ceiling is the limit with its capacity and rate divided by the
// number of known members (alive or failed, at least one token), never the
// live count, so a node cut off from everyone grants itself one share, not
// the whole budget. on_owner_unreachable picks local (the default), open
// (allow, counted) or closed (503 limiter_unavailable).
//
// # Ownership changes
//
// See cluster: buckets are pushed to their new owner when a view changes,
// pulled by the new owner on its first miss within HandoffWindow, and a
// node that handed a key over passes its requests on; a forward is passed
// on at most once while views disagree. State crosses nodes as relative
// quantities (bucket.Snapshot, lease remaining time), so skewed clocks mint
// nothing. Each owner also streams its keys' changes to their successors
// (replication.go), so after a crash the new owner starts each key from
// its replica and knows which leases run: a crash costs the debits of the
// last replication interval. Without a current replica the new owner
// grants only a local share of permits for one max_lease_ttl (none for
// strict limits). A node on a minority side serves even its own keys from
// local ceilings, and survivors wait TakeoverDelay before deciding keys
// that changed owner after a failure. The rules are described in
// docs/placement-and-replication.md.
//
// # Concurrency
//
// Node's methods are safe for concurrent use. The bucket stores lock their
// own shards; the lease shell serialises its table with one mutex and owns
// the one timer that drives expiry. Every goroutine the node starts ends in
// Shutdown.
package node
