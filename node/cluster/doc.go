// Package cluster is one member's part of a Weir cluster: it routes each
// key over the ring for the decision engine, forwards steps to owners,
// serves what peers forward, moves state between owners when the ring
// changes, and streams each owned key's changes to its successor.
//
// It implements the engine's three interfaces — engine.Router (placement,
// known members, the state to fetch before deciding a key, the handover
// guard), engine.Peers (forwarding over the peer transport) and
// engine.Changes (the replication stream's record) — and serves the
// engine it is handed at Start through two of its own: Owner (the owner's
// steps for forwarded requests) and Holdings (the owner state it hands
// over and takes in). node/engine never imports this package.
//
// # Where a key is decided
//
// The pure core node/placement answers. A Cluster builds a
// placement.Snapshot from its ring view, join state, failure log and
// leave, publishes it through an atomic pointer, and passes each key's
// moved mark in (docs/placement-and-replication.md has the rules).
//
// # Moving state
//
// See Cluster: push on a view change, pull on the first miss within the
// handoff window, proxy once while views disagree; receivers merge
// conservatively, and striped key locks keep a step from interleaving
// with a handover of its key. State crosses nodes as transport.State,
// relative to the sender's now.
//
// # Replication
//
// Each owner records the keys a step changed (changeLog) and sends those
// still in debt to each key's successor every interval; the successor
// keeps them (replicas) and adopts a replica only when it decides a key as
// its owner after the owner failed. With replication off, noReplication
// and noReplicas stand in.
//
// # Lifecycle and concurrency
//
// New builds the member without starting anything; Start opens the peer
// service, joins the gossip and starts the watch and replication loops;
// Stop hands state off, leaves and waits for them. Methods are safe for
// concurrent use.
package cluster
