// Package ring is the hash ring as data: it gives every bucket key one owner
// member. A View is an immutable snapshot of the known members (their
// states and gossiped Meta) and of the ownership ring built from them with
// the owner rule of package ring/ownership (buraksezer/consistent,
// consistent hashing with bounded loads, over xxhash; clients import that
// package too). It maps keys to member names; it holds no connections,
// starts no goroutines and does not import memberlist.
//
// Package ring/gossip runs the membership (hashicorp/memberlist) and
// publishes Views built here. Timing, the failure-detection timings it
// hands to memberlist, lives in this package so that code reasoning about
// detection (Timing.DetectionSpread, used by node/placement) needs only the
// ring.
//
// # Views
//
// A View is safe for concurrent use and is never modified: View.Owner
// neither locks nor allocates. NewView is a pure function of the member
// list, so two members that know the same members in the same states
// compute the same owners. Each view carries an Epoch that counts the views
// one member has published; epochs of different members are unrelated.
// Without and Share derive answers from a view without publishing one.
//
// # The majority rule (docs/architecture.md §6.2)
//
// A member knows the members it has seen, alive or failed (package
// ring/gossip decides when a failed member is forgotten). If it reaches
// more than half of the known members (counting itself), View.Majority is
// true and the ring is built from the live members, so the majority side
// takes over the keys of members it lost. Otherwise the ring is built from
// all known members: keys of unreachable members still map to them, and the
// caller answers for them from local ceilings instead of granting fresh
// buckets. An even split has no majority side.
//
// # Hash tags
//
// HashKey(limit, key) is the string placed on the ring. A key carrying a
// Redis-Cluster style hash tag, "tenant:{acme}:route", hashes only "acme",
// so every bucket of tenant acme, whatever the limit, has one owner and a
// multi-check over them is one atomic step there.
package ring
