// Package placement decides where one (limit, key) is decided: here, at a
// peer, or from a local ceiling. It is the pure core of a node's cluster
// rules: it imports only the standard library and ring, takes time as an
// argument, starts no goroutines and takes no locks. A Snapshot is
// immutable; the node builds a new one when its view, its failure log or
// its join state changes and publishes it through an atomic pointer, like
// ring.View, so every decision reads one consistent set of rules.
//
// # The rules
//
// Each rule closes an over-admission that the README's fault table rules
// out (docs/placement-and-replication.md has the table of rules and the
// faults behind them):
//
//   - join: a node started with seeds decides nothing from its ring until
//     a seed answered and its view holds another member, or a restarted
//     node would own every key with fresh buckets;
//   - moved marks: a node that handed a key over passes its requests to
//     the key's new holder, so a key is decided in one place while views
//     disagree;
//   - unreachable owner: a key whose owner is suspect or dead is decided
//     from a local ceiling, one share per node;
//   - majority: a node that reaches half or fewer of the known members
//     decides even its own keys from local ceilings, because the majority
//     side takes them over;
//   - takeover delay: a key that changed owner in a run of failures is
//     decided from local ceilings until the run is TakeoverDelay old
//     (never less than the ring's DetectionSpread), so a node that loses
//     its peers one at a time never acts as a majority in between;
//   - lease ceiling: for max_lease_ttl after its owner failed, a key's new
//     owner grants only a share of permits (none for strict limits);
//   - pull: within HandoffWindow of a view change a new owner pulls a
//     key's state from its previous owner before deciding it.
//
// Takes and leases route through the same Snapshot: Take applies every
// rule, Lease all but the takeover delay (the lease ceiling guards a lease
// table instead), Serve the rules for a forward received from a peer.
//
// A Snapshot is safe for concurrent use. Its answers are one typed value,
// Placement, whose zero value is the safe answer: a local ceiling.
package placement
