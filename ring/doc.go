// Package ring gives every bucket key one owner member: membership by
// hashicorp/memberlist (SWIM gossip with Lifeguard), ownership by
// buraksezer/consistent (consistent hashing with bounded loads) hashed with
// xxhash, as defined once in package ring/ownership (which clients import
// too). It maps keys to member names; it holds no connections.
//
// # Views
//
// A Ring publishes an immutable *View through an atomic pointer: View never
// locks, and View.Owner neither locks nor allocates. A new view is built
// after membership events settle (Config.RebuildDebounce) and is also sent
// on Changes (one slot, latest wins). Each view carries an Epoch that grows
// with every published change on this member; epochs of different members
// are unrelated. Two members that know the same members in the same states
// compute the same owners (buildView is a pure function of the member list).
//
// # Known members and the majority rule (docs/architecture.md §6.2)
//
// A member knows the members it has seen, alive or failed. One that leaves
// gracefully (Leave) is forgotten at once and its address is no longer
// dialed; a failed (dead) one is forgotten after Config.ForgetAfter, or by
// Forget. If this member reaches more than half of the known members
// (counting itself), View.Majority is true and the ring is built from the
// live members, so the majority side takes over the keys of members it
// lost. Otherwise the ring is built from all known members: keys of
// unreachable members still map to them, and the caller answers for them
// from local ceilings instead of granting fresh buckets. An even split has
// no majority side.
//
// memberlist reports a graceful leave and a failure with the same event, so
// Leave first gossips a "leaving" flag in this member's metadata and waits
// for that broadcast, then leaves; peers treat the departure of a flagged
// member as a leave. A peer that missed the flag sees a failure instead (and
// forgets the member after ForgetAfter). memberlist raises no event for
// suspicion either, so members are reported Alive until declared Dead.
//
// # Healing partitions
//
// memberlist declares the other side of a partition dead and, after
// Timing.GossipToTheDeadTime, forgets it and never contacts it again, so a
// long partition would never heal by itself (memberlist issue 222, metallb
// issue 589). Ring therefore keeps failed members in its own table and runs
// a jittered rejoin loop that joins the seeds that are not live members (DNS
// names re-resolved each round) and the known failed members, every
// Config.RejoinInterval (a quarter of it while alone). Any one successful
// push/pull merges the two sides: memberlist's refutation turns stale "dead"
// verdicts back into "alive". DeadNodeReclaimTime lets a member restarted on
// a new address come back under its name.
//
// # Concurrency
//
// memberlist calls its delegates while holding its node lock, so the
// delegates only append to a queue and poke a channel; the Ring's event
// loop applies the events. New starts nothing. Start starts memberlist's
// goroutines and two of its own (the event loop and the rejoin loop, which
// runs a round's joins in parallel); Close stops all of them.
//
// # Hash tags
//
// HashKey(limit, key) is the string placed on the ring. A key carrying a
// Redis-Cluster style hash tag, "tenant:{acme}:route", hashes only "acme",
// so every bucket of tenant acme, whatever the limit, has one owner and a
// multi-check over them is one atomic step there.
package ring
