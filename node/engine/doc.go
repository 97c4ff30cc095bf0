// Package engine is Weir's decision engine: the one place that decides,
// for every take and every lease operation, "here, forward or fallback",
// and the owner of the state it decides from (the owner buckets, the owner
// lease table, the local ceilings' stores and lease table).
//
// # A decision
//
// A take's checks are validated against the limits in force (one read of
// Deps.Limits) before any state is touched: unknown limit, inline limit
// (parsed and cached), concurrency limit, key bounds, cost in [1,
// capacity]. Each check is then placed by the Router, and checks with one
// placement form one atomic step, in request order:
//
//   - decided here (placement.Placement.DecidesHere): after the Router
//     fetched any state this node should hold (a pull after a ring change,
//     or a failed owner's replica), the owner step holds the keys against
//     a handover (Router.Hold), reads the clock once and spends every
//     enforced check in the owner store or none; shadow checks are decided
//     on their own and answered allowed. A take with a request id runs
//     through the owner's memory of recent ids, so a retry is answered
//     with its first decision;
//   - forwarded to the owner elsewhere (Peers.Take), which runs the same
//     owner step (ServeTake);
//   - from a local ceiling when the owner cannot be reached: the limit's
//     on_owner_unreachable policy (local: a share of the limit, the known
//     members dividing it; open; closed);
//   - as overload when the owner, still placed alive, did not answer
//     within the caller's deadline (ErrOwnerLate): limiter_overloaded, or
//     allowed without spending for an open limit; never from a local
//     ceiling, so with every owner alive the owners' buckets alone bound
//     what is admitted.
//
// Each step that admitted returns a Spend: where it debited (this node's
// owner store, its fallback store, or the owner at a peer) and what (the
// checks as resolved, with the local share used). When a later step is
// denied or fails, every earlier spend is undone exactly as recorded, so a
// multi-check spends everywhere or nowhere — also when the member count,
// and so the share, changed in between.
//
// Leases follow the same shape: placed by Router.PlaceLease, granted by
// the owner table here (with the takeover ceiling of Router.LeaseCeiling),
// forwarded, or granted from the local ceilings' table.
//
// # What the engine needs
//
// The engine defines the small interfaces it needs and never imports the
// cluster: Router (where keys are decided, how many members share a
// ceiling, state to fetch before deciding, the handover guard), Peers
// (forwarding to owners) and Changes (the replication stream's record of
// changed keys). node/cluster implements all three; a cluster of one uses
// the null objects SingleNode, NoPeers and NoChanges. The cluster reaches
// back only through the engine's exported owner surface: the Serve*
// methods for what peers forward here, and the holdings methods
// (ExportBuckets, MergeBuckets, ExportLeases, ...) for state it hands over.
//
// # Concurrency
//
// An Engine is safe for concurrent use. The stores lock their own shards;
// each lease table is serialized by its shell's mutex, which also parks
// waiting acquires and drives expiry from one timer (Run). New starts no
// goroutine.
package engine
