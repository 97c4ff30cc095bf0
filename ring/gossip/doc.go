// Package gossip is the cluster membership behind package ring: it runs
// hashicorp/memberlist (SWIM gossip with Lifeguard), keeps its own table of
// the members it knows, and publishes the *ring.View built from them. A
// Membership is one member's side of it; Config holds the gossip address,
// the seeds, the key and the ring.Timing handed to memberlist.
//
// # Views
//
// A Membership publishes an immutable *ring.View through an atomic pointer:
// View never locks, and the view's Owner neither locks nor allocates. A new
// view is built (ring.NewView) after membership events settle
// (Config.RebuildDebounce) and is also sent on Changes (one slot, latest
// wins). Each view carries an Epoch that grows with every published change
// on this member; epochs of different members are unrelated.
//
// # Known members (docs/architecture.md §6.2)
//
// A member knows the members it has seen, alive or failed; they are what
// the ring's majority rule counts (ring.View.Majority). One that leaves
// gracefully (Leave) is forgotten at once and its address is no longer
// dialed; a failed (dead) one is forgotten after Config.ForgetAfter, or by
// Forget.
//
// memberlist reports a graceful leave and a failure with the same event, so
// Leave first gossips a "leaving" flag in this member's metadata and, over
// memberlist's reliable stream, sends each other member a leaving note; it
// waits for both, bounded by its timeout, then leaves. Peers treat the
// departure of a flagged or noted member as a leave, and a note that comes
// after the departure turns the failure it read as into a leave. Only a
// peer that got neither (unreachable for the whole announcement) sees a
// failure (and forgets the member after ForgetAfter). memberlist raises no
// event for suspicion either, so members are reported Alive until declared
// Dead.
//
// # Healing partitions
//
// memberlist declares the other side of a partition dead and, after
// ring.Timing.GossipToTheDeadTime, forgets it and never contacts it again,
// so a long partition would never heal by itself (memberlist issue 222,
// metallb issue 589). Membership therefore keeps failed members in its own
// table and runs a jittered rejoin loop that joins the seeds that are not
// live members (DNS names re-resolved each round) and the known failed
// members, every Config.RejoinInterval (a quarter of it while alone). Any
// one successful push/pull merges the two sides: memberlist's refutation
// turns stale "dead" verdicts back into "alive". DeadNodeReclaimTime lets a
// member restarted on a new address come back under its name.
//
// # Concurrency
//
// memberlist calls its delegates while holding its node lock, so the
// delegates only append to a queue and poke a channel; the Membership's
// event loop applies the events. New starts nothing. Start starts
// memberlist's goroutines and two of its own (the event loop and the rejoin
// loop, which runs a round's joins in parallel); Close stops all of them.
//
// # Metadata on the wire
//
// A member's ring.Meta travels in memberlist's node metadata (at most 512
// bytes), encoded here: a version byte, a flags byte (the leaving flag),
// two varints and the addresses. The encoding is shared with older members
// (they decode version 1), so it changes only by adding a version.
package gossip
