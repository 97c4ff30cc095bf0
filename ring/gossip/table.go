package gossip

import (
	"slices"
	"strings"
	"time"

	"github.com/weir-rl/weir/ring"
)

// eventKind is what memberlist reported about a node.
type eventKind uint8

const (
	evJoin    eventKind = iota // the node is alive (new, or back from dead/left)
	evUpdate                   // the node's metadata or address changed
	evLeave                    // the node failed (dead) or left gracefully
	evLeaving                  // the node said it is leaving (a leaving note)
)

// event is a memberlist notification, copied out of memberlist's lock.
type event struct {
	kind eventKind
	name string
	addr string
	meta []byte
}

// entry is a known member and when its state last changed.
type entry struct {
	m     ring.Member
	since time.Time
	// told is set by the member's leaving note: it stays Leaving whatever
	// metadata gossip brings afterwards.
	told bool
}

// table is the membership core: the members this node knows, fed with
// memberlist events and polls, with time passed in. It remembers failed
// members after memberlist forgets them (GossipToTheDeadTime), so that the
// majority rule and the rejoin loop still see them. Not safe for concurrent
// use; Membership guards it with its mutex.
type table struct {
	self    string
	members map[string]*entry
	// left maps the gossip address of a member that left gracefully to
	// when it left, so the rejoin loop stops dialing it (even as a seed).
	left map[string]time.Time
	// badMeta counts metadata that failed to decode (kept as zero Meta).
	badMeta int
}

func newTable(self string, meta ring.Meta, now time.Time) *table {
	t := &table{self: self, members: make(map[string]*entry), left: make(map[string]time.Time)}
	t.members[self] = &entry{m: ring.Member{Name: self, Meta: meta, State: ring.Alive}, since: now}
	return t
}

func (t *table) decode(b []byte) (ring.Meta, bool) {
	m, flags, err := decodeMeta(b)
	if err != nil {
		t.badMeta++
	}
	return m, flags&metaLeaving != 0
}

// setState moves e to s, stamping the change; it reports whether anything
// changed.
func setState(e *entry, s ring.State, now time.Time) bool {
	if e.m.State == s {
		return false
	}
	e.m.State = s
	e.since = now
	return true
}

// apply records ev at now and reports whether the member list changed.
func (t *table) apply(ev event, now time.Time) bool {
	e := t.members[ev.name]
	switch ev.kind {
	case evJoin, evUpdate:
		meta, leaving := t.decode(ev.meta)
		delete(t.left, ev.addr)
		if e == nil {
			t.members[ev.name] = &entry{m: ring.Member{Name: ev.name, Addr: ev.addr, Meta: meta, State: ring.Alive, Leaving: leaving}, since: now}
			return true
		}
		if ev.name == t.self {
			changed := e.m.Addr != ev.addr
			e.m.Addr = ev.addr // self meta and state are set locally
			return changed
		}
		leaving = leaving || e.told
		changed := e.m.Addr != ev.addr || e.m.Meta != meta || e.m.Leaving != leaving
		e.m.Addr, e.m.Meta, e.m.Leaving = ev.addr, meta, leaving
		return setState(e, ring.Alive, now) || changed
	case evLeave:
		if e == nil {
			return false // forgotten already (or never seen alive)
		}
		if ev.name == t.self {
			return false // Membership.Leave marks self; otherwise memberlist refutes
		}
		if e.m.Leaving {
			t.forgetLeft(ev.name, now)
			return true
		}
		return setState(e, ring.Dead, now)
	case evLeaving:
		if e == nil || ev.name == t.self {
			return false
		}
		e.told = true
		switch {
		case e.m.State == ring.Dead:
			// The leave arrived first and read as a failure: it was a
			// leave.
			t.forgetLeft(ev.name, now)
			return true
		case !e.m.Leaving:
			e.m.Leaving = true
			return true
		}
	}
	return false
}

// forgetLeft removes a member that left gracefully and remembers its
// address as left.
func (t *table) forgetLeft(name string, now time.Time) {
	if a := t.members[name].m.Addr; a != "" {
		t.left[a] = now
	}
	delete(t.members, name)
}

// expire forgets members dead for at least forgetAfter, and left addresses
// older than that, at now. It reports whether the member list changed.
func (t *table) expire(now time.Time, forgetAfter time.Duration) bool {
	changed := false
	for name, e := range t.members {
		if e.m.State == ring.Dead && now.Sub(e.since) >= forgetAfter {
			delete(t.members, name)
			changed = true
		}
	}
	for a, at := range t.left {
		if now.Sub(at) >= forgetAfter {
			delete(t.left, a)
		}
	}
	return changed
}

// forget removes a member that is not live (an operator's `weir forget`).
// Self and live members cannot be forgotten: they would reappear at once.
func (t *table) forget(name string) bool {
	e := t.members[name]
	if e == nil || name == t.self || e.m.State.Live() {
		return false
	}
	delete(t.members, name)
	return true
}

// selfLeft marks this node as having left.
func (t *table) selfLeft(now time.Time) bool { return setState(t.members[t.self], ring.Left, now) }

// setSelfMeta records this node's new metadata.
func (t *table) setSelfMeta(m ring.Meta) bool {
	e := t.members[t.self]
	if e.m.Meta == m {
		return false
	}
	e.m.Meta = m
	return true
}

// list returns the known members sorted by name.
func (t *table) list() []ring.Member {
	ms := make([]ring.Member, 0, len(t.members))
	for _, e := range t.members {
		ms = append(ms, e.m)
	}
	slices.SortFunc(ms, func(a, b ring.Member) int { return strings.Compare(a.Name, b.Name) })
	return ms
}

// selfAddr returns this node's gossip address once memberlist reported it.
func (t *table) selfAddr() string { return t.members[t.self].m.Addr }

// liveCount returns the number of live members, self included.
func (t *table) liveCount() int {
	n := 0
	for _, e := range t.members {
		if e.m.State.Live() {
			n++
		}
	}
	return n
}

// rejoinTargets returns the addresses a rejoin round should contact: the
// failed members' addresses and the seeds (already resolved to host:port)
// that are neither this node, a live member, nor the address of a member
// that left gracefully. Order: failed members (sorted by name), then seeds.
func (t *table) rejoinTargets(seeds []string) []string {
	skip := map[string]bool{t.selfAddr(): true}
	for a := range t.left {
		skip[a] = true
	}
	var out []string
	for _, m := range t.list() {
		if m.State.Live() {
			skip[m.Addr] = true
		}
	}
	for _, m := range t.list() {
		if m.State == ring.Dead && m.Addr != "" && !skip[m.Addr] {
			out = append(out, m.Addr)
			skip[m.Addr] = true
		}
	}
	for _, s := range seeds {
		if !skip[s] {
			out = append(out, s)
			skip[s] = true
		}
	}
	return out
}

// sameMembers reports whether two sorted member lists are identical.
func sameMembers(a, b []ring.Member) bool { return slices.Equal(a, b) }
