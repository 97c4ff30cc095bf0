package placement

import (
	"time"

	"github.com/weir-rl/weir/ring"
)

// Kind says where a (limit, key) is decided.
type Kind uint8

const (
	// Ceiling decides the key from this node's local ceiling (a share of
	// the limit). It is the zero Kind: the answer that can never admit
	// more than a share, given whenever no rule allows more.
	Ceiling Kind = iota
	// Here decides the key at this node from its own bucket or lease table.
	Here
	// Forward sends the key to the member Placement.Peer.
	Forward
	// Replica decides the key here, as its new owner after the owner
	// failed, starting from the replica this node kept of the failed
	// owner's state rather than from a full bucket. The caller that holds
	// no replica for the key treats it as Here after the same takeover
	// delay.
	Replica
)

// String returns "ceiling", "here", "forward" or "replica".
func (k Kind) String() string {
	switch k {
	case Here:
		return "here"
	case Forward:
		return "forward"
	case Replica:
		return "replica"
	}
	return "ceiling"
}

// Reason says which rule gave a Placement.
type Reason uint8

const (
	// ByOwner means the ring names the owner and nothing overrides it.
	ByOwner Reason = iota
	// NotJoined means a node started with seeds has not reached one yet (or
	// its view holds nobody else), so its ring of one would own every key.
	NotJoined
	// NoRing means the view has no ring (no member is in it).
	NoRing
	// Unreachable means the member that decides the key is suspect, dead, or
	// has no peer address.
	Unreachable
	// Minority means this node reaches half or fewer of the known members, so
	// the majority side takes its keys over.
	Minority
	// TakeoverDelay means the key changed owner in a recent run of failures.
	TakeoverDelay
	// Moved means this node handed the key over; its mark routes it.
	Moved
	// SenderMoved means the sender of a forward owns the key in this node's
	// view, so the sender's view moved it here (Serve only).
	SenderMoved
	// Proxied means a forward that was already passed on once (Serve only).
	Proxied
	// TakenOver means the key's owner failed and this node, its successor,
	// decides it now, from its replica of the owner's state (Kind Replica).
	TakenOver
)

var reasonNames = [...]string{
	"owner", "not-joined", "no-ring", "unreachable", "minority", "takeover-delay", "moved", "sender-moved", "proxied", "taken-over",
}

// String returns the reason's short name, as in logs and metrics.
func (r Reason) String() string {
	if int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return "unknown"
}

// Placement is the one answer for where a key is decided.
type Placement struct {
	// Kind is where.
	Kind Kind
	// Peer is the member that decides the key (Forward), or the member to
	// pull the key's state from before deciding it (Here from Serve,
	// when the sender's view moved the key here).
	Peer string
	// Addr is Peer's peer-service address.
	Addr string
	// Reason is the rule that gave this answer.
	Reason Reason
}

// DecidesHere reports whether p decides the key at this node: Here, or
// Replica (here, starting from the replica of a failed owner's state). It
// is the one answer to "is this key decided here?".
func (p Placement) DecidesHere() bool { return p.Kind == Here || p.Kind == Replica }

// Mark is a key this node handed over: it is decided by member To until
// the mark expires. The zero Mark means no mark. Marks change with every
// handover, so they are looked up by the caller and passed in rather than
// held by the Snapshot.
type Mark struct {
	To string
}

// Failure records a member that failed (not left), when this node noticed
// it, and the view in which it still owned its keys.
type Failure struct {
	Name string
	At   time.Time
	Prev *ring.View
}

// Config is the fixed part of the rules.
type Config struct {
	// Self is this member's name.
	Self string
	// TakeoverDelay is how long after a run of failures the keys that
	// changed owner in it are decided from local ceilings. The delay in
	// force is never below Timing.DetectionSpread of the known members.
	TakeoverDelay time.Duration
	// Timing is the ring's failure detection, whose DetectionSpread
	// floors TakeoverDelay.
	Timing ring.Timing
	// Seeds is the number of --join addresses; more than zero means the
	// node must reach one before it decides from its ring.
	Seeds int
	// HandoffWindow is how long after a view change a new owner pulls a
	// key's state from its previous owner before deciding it.
	HandoffWindow time.Duration
	// FailureMemory is how long a failure is remembered: the longest a
	// lease can live (limits.MaxLeaseTTLLimit).
	FailureMemory time.Duration
}

// State is what this node knows when the snapshot is built.
type State struct {
	// View is the view keys are routed by: the ring's, or the view
	// without this node while it hands off before leaving.
	View *ring.View
	// Known is the ring's own view, whose members local ceilings divide
	// by (the routing view lacks this node while it leaves); nil means
	// View.
	Known *ring.View
	// Joined reports that a seed answered (gossip.Membership.Joined).
	Joined bool
	// Failures are recent failures in detection order (see Observe).
	Failures []Failure
	// Changed is when this node's view last changed.
	Changed time.Time
}

// Snapshot is an immutable set of placement rules over one State. It is
// safe for concurrent use; its methods never lock, allocate only on the
// pull path, and read no clock: time is an argument.
type Snapshot struct {
	cfg     Config
	st      State
	delay   time.Duration // TakeoverDelay floored by DetectionSpread
	without *ring.View    // View without Self: the owners before this node, for pulls
}

// New builds the snapshot of st under cfg. It copies nothing: st.View and
// st.Failures must not be modified afterwards.
func New(cfg Config, st State) *Snapshot {
	s := &Snapshot{cfg: cfg, st: st, delay: cfg.TakeoverDelay}
	if st.View != nil {
		s.delay = max(cfg.TakeoverDelay, cfg.Timing.DetectionSpread(len(st.View.Members)))
		s.without = st.View.Without(cfg.Self)
	}
	return s
}

// View returns the view the snapshot routes by.
func (s *Snapshot) View() *ring.View { return s.st.View }

// Failures returns the failure log the snapshot holds (do not modify it).
func (s *Snapshot) Failures() []Failure { return s.st.Failures }

// Joined reports whether this node may route by its ring at all: a node
// started with seeds may not until one answered and its view holds
// another member. Between the two its view is itself alone, in which it
// would own every key.
func (s *Snapshot) Joined() bool {
	v := s.st.View
	return v != nil && (s.cfg.Seeds == 0 || (s.st.Joined && len(v.Members) > 1))
}

// Known is the number of members a local ceiling divides a limit by: the
// known members (alive or failed), at least one, and, before a node
// started with seeds has joined, at least its seeds plus itself.
func (s *Snapshot) Known() int {
	n := 0
	if v := s.st.Known; v != nil {
		n = len(v.Members)
	} else if s.st.View != nil {
		n = len(s.st.View.Members)
	}
	if !s.Joined() {
		n = max(n, s.cfg.Seeds+1)
	}
	return max(n, 1)
}

// Take places a take on (limit, key) at now, mark being this node's
// moved mark for the key. The rules, in order:
//
//  1. not joined: Ceiling;
//  2. a mark routes the key to its holder (Here for self, Forward, or
//     Ceiling when the holder is unreachable);
//  3. another member owns it: Forward while it is alive, else Ceiling;
//  4. this node owns it on a minority side: Ceiling;
//  5. it changed owner in a run of failures less than the takeover delay
//     old: Ceiling;
//  6. its owner before a remembered failure was the failed member:
//     Replica (this node took it over and starts it from its replica);
//  7. otherwise Here.
func (s *Snapshot) Take(now time.Time, limit, key string, mark Mark) Placement {
	return s.place(now, ring.KeySum(limit, key), mark, true)
}

// Lease places a lease operation like Take but without rule 5: a lease
// table after a failure has its own guard, the takeover ceiling
// (LeaseCeiling), and the delay would only add each survivor's local
// share on top of it.
func (s *Snapshot) Lease(now time.Time, limit, key string, mark Mark) Placement {
	return s.place(now, ring.KeySum(limit, key), mark, false)
}

func (s *Snapshot) place(now time.Time, hk uint64, mark Mark, delay bool) Placement {
	if !s.Joined() {
		return Placement{Reason: NotJoined}
	}
	v := s.st.View
	if mark.To != "" {
		if mark.To == s.cfg.Self {
			return Placement{Kind: Here, Reason: Moved}
		}
		return s.forward(v, mark.To, Moved)
	}
	m, ok := v.OwnerSum(hk)
	switch {
	case !ok:
		return Placement{Reason: NoRing}
	case m.Name != s.cfg.Self:
		return s.forward(v, m.Name, ByOwner)
	case !v.Majority:
		return Placement{Reason: Minority}
	case delay && s.heldBack(now, hk):
		return Placement{Reason: TakeoverDelay}
	case s.takenOver(hk):
		return Placement{Kind: Replica, Reason: TakenOver}
	}
	return Placement{Kind: Here}
}

// Successor names the member that keeps the replica of (limit, key), a
// key this node owns: the key's owner in the view without this node, that
// is the member that takes the key over when this node fails. ok is false
// when this node does not own the key in its view, or the successor is
// not alive (nothing to replicate to).
func (s *Snapshot) Successor(limit, key string) (Placement, bool) {
	v := s.st.View
	if v == nil || s.without == nil {
		return Placement{}, false
	}
	hk := ring.KeySum(limit, key)
	if m, ok := v.OwnerSum(hk); !ok || m.Name != s.cfg.Self {
		return Placement{}, false
	}
	m, ok := s.without.OwnerSum(hk)
	if !ok || m.Name == s.cfg.Self {
		return Placement{}, false
	}
	p := s.forward(v, m.Name, ByOwner)
	return p, p.Kind == Forward
}

// HandTo names the member that state for (limit, key) held at this node
// must be handed to in the snapshot's view: the key's owner, when that is
// another member that is alive and reachable (Forward). ok is false when
// this node owns the key, the view has no ring, or the owner cannot be
// reached; then the state stays here, where a pull finds it. A node pushes
// what it holds by this rule when its view changes and when it leaves.
func (s *Snapshot) HandTo(limit, key string) (Placement, bool) {
	v := s.st.View
	if v == nil {
		return Placement{}, false
	}
	m, ok := v.OwnerSum(ring.KeySum(limit, key))
	if !ok || m.Name == s.cfg.Self {
		return Placement{}, false
	}
	p := s.forward(v, m.Name, ByOwner)
	return p, p.Kind == Forward
}

// forward answers Forward to name, or Ceiling when it cannot be reached.
func (s *Snapshot) forward(v *ring.View, name string, why Reason) Placement {
	m, ok := v.Member(name)
	if !ok || m.State != ring.Alive || m.Meta.GRPCAddr == "" {
		return Placement{Reason: Unreachable, Peer: name}
	}
	return Placement{Kind: Forward, Peer: name, Addr: m.Meta.GRPCAddr, Reason: why}
}

// Serve places a take that member from forwarded to this node; mark is
// this node's mark for the key. Here means decide it (first pulling the
// key's state from Peer when Peer is set), Forward means pass it on once
// (never when proxied: the request was passed on already), and Ceiling
// means answer NotOwner, so the sender decides from its own ceiling.
//
// It applies the join rule like Take: a restarted node that peers already
// see alive, but whose own view is still itself alone, would otherwise
// decide every forwarded key from a fresh bucket. And it differs from Take
// in one rule: when the sender owns the key in this node's view, the
// sender's newer view has moved the key here, so this node takes it over
// and pulls the sender's state (Reason SenderMoved).
func (s *Snapshot) Serve(now time.Time, limit, key, from string, proxied bool, mark Mark) Placement {
	v := s.st.View
	if !s.Joined() {
		return Placement{Reason: NotJoined}
	}
	hk := ring.KeySum(limit, key)
	name := s.cfg.Self
	if mark.To != "" {
		name = mark.To
	} else if m, ok := v.OwnerSum(hk); ok {
		name = m.Name
	}
	if name == s.cfg.Self {
		if !v.Majority {
			return Placement{Reason: Minority}
		}
		if s.heldBack(now, hk) {
			return Placement{Reason: TakeoverDelay}
		}
		if mark.To == "" && s.takenOver(hk) {
			return Placement{Kind: Replica, Reason: TakenOver}
		}
		return Placement{Kind: Here}
	}
	if name == from {
		return Placement{Kind: Here, Peer: from, Reason: SenderMoved}
	}
	if proxied {
		return Placement{Reason: Proxied, Peer: name}
	}
	why := ByOwner
	if mark.To != "" {
		why = Moved
	}
	return s.forward(v, name, why)
}

// ServesLease reports whether this node answers a lease operation on
// (limit, key) forwarded by member from: it has joined (as for Serve),
// and it owns the key or the sender does in this node's view (the
// sender's view moved the key here). A leaving node serves none of the
// sender's keys: its routing view lacks itself, so the sender owns them
// there only because it is going, and its lease table was handed to that
// very sender; unlike a take, which pulls the sender's bucket back (Serve's
// SenderMoved), an acquire would grant from the empty table: a peer that
// has not yet seen the owner leave forwards an acquire to it, and the
// leaving owner, whose leases the peer already holds, would grant one
// permit more than the limit has. The sender answers from its ceiling
// instead.
func (s *Snapshot) ServesLease(limit, key, from string) bool {
	v := s.st.View
	if !s.Joined() {
		return false
	}
	m, ok := v.OwnerSum(ring.KeySum(limit, key))
	return !ok || m.Name == s.cfg.Self || (m.Name == from && !s.leaving())
}

// leaving reports whether this node routes by a view without itself: it
// is handing off before it leaves.
func (s *Snapshot) leaving() bool {
	if s.st.View == nil {
		return false
	}
	_, in := s.st.View.Member(s.cfg.Self)
	return !in
}

// PullFrom names the member whose state for (limit, key) this node must
// pull before deciding it from a bucket it does not hold: within
// HandoffWindow of a view change, the key's owner in the view without
// this node (its owner before this node joined or took it). ok is false
// when there is nobody to pull from: outside the window, this node owned
// the key anyway, or that member is unreachable.
func (s *Snapshot) PullFrom(now time.Time, limit, key string) (Placement, bool) {
	if s.st.View == nil || now.Sub(s.st.Changed) >= s.cfg.HandoffWindow {
		return Placement{}, false
	}
	m, ok := s.without.OwnerSum(ring.KeySum(limit, key))
	if !ok || m.Name == s.cfg.Self {
		return Placement{}, false
	}
	p := s.forward(s.st.View, m.Name, Moved)
	return p, p.Kind == Forward
}

// Recent reports whether now is within HandoffWindow of the last view
// change, when a bucket this node does not hold may still be elsewhere.
func (s *Snapshot) Recent(now time.Time) bool {
	return now.Sub(s.st.Changed) < s.cfg.HandoffWindow
}
