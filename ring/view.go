package ring

import (
	"slices"
	"strings"

	"github.com/weir-rl/weir/ring/ownership"
)

// Ring shape: see package ownership, the one definition of it.
const partitionCount = ownership.DefaultPartitions

// State is a member's liveness as this member sees it.
type State uint8

// Member states. Alive and Suspect members are live: they count towards the
// majority and own keys. Suspect would mean a probe failed and the member
// has not yet refuted it, but memberlist v0.7.0 raises no event for
// suspicion (and its Members list cannot be read without racing its
// writers), so package ring/gossip currently reports a suspected member as
// Alive until it is declared Dead; the forwarding layer detects an
// unreachable owner by its own deadline.
const (
	Alive State = iota
	Suspect
	Dead
	Left
)

// String returns "alive", "suspect", "dead" or "left".
func (s State) String() string {
	switch s {
	case Alive:
		return "alive"
	case Suspect:
		return "suspect"
	case Dead:
		return "dead"
	case Left:
		return "left"
	}
	return "unknown"
}

// Live reports whether s is Alive or Suspect.
func (s State) Live() bool { return s == Alive || s == Suspect }

// Member is one known member of the cluster.
type Member struct {
	// Name is the member's unique name.
	Name string
	// Addr is the member's gossip address (host:port).
	Addr string
	// Meta is the metadata the member last gossiped.
	Meta Meta
	// State is the member's liveness.
	State State
	// Leaving reports that the member announced a graceful leave
	// (gossip.Membership.AnnounceLeave): it is alive and still owns its
	// keys while it hands them to their next owners.
	Leaving bool
}

// View is an immutable snapshot of membership and ownership. It is safe for
// concurrent use; do not modify its fields or the Members slice.
//
// The ring is built from the live members when Majority is true, and from
// all known members (live and failed) when it is false, so that on a
// minority side keys of unreachable members still map to them (and the
// caller falls back to local ceilings) instead of being taken over.
type View struct {
	// Epoch counts the views this member has published: it increases on
	// every change of members, states, addresses, metadata or ownership.
	// Epochs of different members are unrelated.
	Epoch uint64
	// Self is this member's name; it is always in Members.
	Self string
	// Members holds the known members (alive or failed, never left or
	// forgotten), sorted by name.
	Members []Member
	// Live counts the live (alive or suspect) members, including self.
	Live int
	// Majority reports whether Live is more than half of len(Members).
	Majority bool

	table  ownership.Table // partitions → ring members
	ringAt []int32         // ring member index → index into Members
}

// Owner returns the member that owns hashKey (see HashKey). It takes no lock
// and does not allocate. ok is false only for a View with no ring (the zero
// View).
func (v *View) Owner(hashKey string) (Member, bool) { return v.OwnerSum(ownership.Sum(hashKey)) }

// OwnerSum is Owner of a key's hash (KeySum), which costs no allocation
// to compute.
func (v *View) OwnerSum(sum uint64) (Member, bool) {
	i, ok := v.table.OwnerIndexSum(sum)
	if !ok {
		return Member{}, false
	}
	return v.Members[v.ringAt[i]], true
}

// Table returns the partition table the view routes by (the zero Table for
// a View with no ring), for publishing to clients.
func (v *View) Table() ownership.Table { return v.table }

// Member returns the known member with this name.
func (v *View) Member(name string) (Member, bool) {
	i, ok := slices.BinarySearchFunc(v.Members, name, func(m Member, n string) int {
		return strings.Compare(m.Name, n)
	})
	if !ok {
		return Member{}, false
	}
	return v.Members[i], true
}

// InRing reports whether the named member owns part of the ring.
func (v *View) InRing(name string) bool {
	m, ok := v.Member(name)
	return ok && (!v.Majority || m.State.Live())
}

// HashKey returns the string that places the bucket (limit, key) on the
// ring: ownership.HashKey, Redis Cluster's hash-tag rule.
func HashKey(limit, key string) string { return ownership.HashKey(limit, key) }

// KeySum returns the hash that places (limit, key) on the ring
// (ownership.KeySum), for OwnerSum.
func KeySum(limit, key string) uint64 { return ownership.KeySum(limit, key) }

// buildView computes the view of members (sorted by name, self among them).
// It is a pure function: equal inputs give equal ownership on every member.
func buildView(epoch uint64, self string, members []Member) *View {
	return buildViewN(epoch, self, members, partitionCount)
}

// buildViewN is buildView with a partition count (at least one per ring
// member is used).
func buildViewN(epoch uint64, self string, members []Member, partitions int) *View {
	live := 0
	for _, m := range members {
		if m.State.Live() {
			live++
		}
	}
	return buildViewMajority(epoch, self, members, partitions, 2*live > len(members))
}

// buildViewMajority is buildViewN with the majority decided by the caller.
func buildViewMajority(epoch uint64, self string, members []Member, partitions int, majority bool) *View {
	v := &View{Epoch: epoch, Self: self, Members: members, Majority: majority}
	for _, m := range members {
		if m.State.Live() {
			v.Live++
		}
	}
	var names []string
	for i, m := range members {
		if !v.Majority || m.State.Live() {
			names = append(names, m.Name)
			v.ringAt = append(v.ringAt, int32(i))
		}
	}
	if len(names) == 0 {
		return v
	}
	p := ownership.DefaultParams()
	p.Partitions = partitions
	v.table = ownership.Build(names, p)
	return v
}
