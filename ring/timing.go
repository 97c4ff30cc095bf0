package ring

import (
	"errors"
	"math"
	"time"
)

// Timing holds the failure-detection and gossip timings that package
// ring/gossip hands to memberlist. It lives in ring so that code reasoning
// about detection (DetectionSpread) needs no gossip. Durations are
// wall-clock; multipliers are plain counts. Use LANTiming or LocalTiming and
// adjust; Validate reports bad values.
//
// Failure detection (SWIM with Lifeguard, as memberlist implements it): each
// member probes one other member every ProbeInterval; a probe unanswered
// within ProbeTimeout, and by IndirectChecks helpers until the end of the
// interval, marks the target suspect; a suspect not refuted within
// SuspicionMult × max(1, log10(n)) × ProbeInterval (n = cluster size; up to
// SuspicionMaxTimeoutMult times that while confirmations are missing, which
// memberlist skips in clusters of fewer than SuspicionMult members) is
// declared dead. Lifeguard stretches probe intervals and timeouts up to 8×
// on a member that sees itself missing acks (an overloaded prober), so a slow
// node detects later rather than falsely.
type Timing struct {
	// ProbeInterval is the time between failure probes. LAN 1s, local 200ms.
	ProbeInterval time.Duration
	// ProbeTimeout is how long a direct probe waits for its ack; it should
	// exceed the p99 round trip including scheduling delay. LAN 500ms,
	// local 150ms. Must be in (0, ProbeInterval].
	ProbeTimeout time.Duration
	// SuspicionMult scales the suspicion timeout (see the type comment).
	// LAN 4, local 3. At least 1.
	SuspicionMult int
	// SuspicionMaxTimeoutMult caps the suspicion timeout as a multiple of
	// its minimum. LAN 6, local 4. At least 1.
	SuspicionMaxTimeoutMult int
	// IndirectChecks is how many members are asked to probe a target that
	// missed a direct probe. LAN 3, local 2.
	IndirectChecks int
	// RetransmitMult scales how many times a gossip message is retransmitted
	// (RetransmitMult × log(n+1)). LAN 4, local 3. At least 1.
	RetransmitMult int
	// GossipInterval is the time between gossip rounds (UDP, to GossipNodes
	// random members). LAN 200ms, local 50ms.
	GossipInterval time.Duration
	// GossipNodes is how many members each gossip round reaches. LAN 3,
	// local 3. At least 1.
	GossipNodes int
	// GossipToTheDeadTime is how long memberlist keeps gossiping to (and
	// remembering) a dead member; after it, memberlist forgets the member and
	// never contacts it again, which is why gossip.Membership keeps its own
	// list and rejoins. LAN 30s, local 2s.
	GossipToTheDeadTime time.Duration
	// PushPullInterval is the time between full state syncs over TCP with
	// one random live member; 0 disables them. LAN 30s, local 1s.
	PushPullInterval time.Duration
	// TCPTimeout bounds a stream dial and exchange (push/pull, join, TCP
	// fallback probe). LAN 10s, local 500ms.
	TCPTimeout time.Duration
	// DeadNodeReclaimTime lets a member come back under the same name from a
	// new address once its old entry has been dead this long (a container
	// restarted with a new IP); 0 never allows it. LAN 10s, local 1s.
	DeadNodeReclaimTime time.Duration
}

// LANTiming returns memberlist's LAN profile (DefaultLANConfig) plus
// DeadNodeReclaimTime 10s.
//
// Failure detection (computed from memberlist's rules, clusters of 3–9): on
// the side that still holds a majority, a silent member is suspected within
// about one ProbeInterval plus ProbeTimeout (≤ 1.5 s) and, with the other
// members confirming, declared dead after the minimum suspicion timeout of
// 4 s: ≈ 5–6.5 s, plus gossip.Config.RebuildDebounce before the ring moves.
// A member cut off alone gets no confirmations, so in clusters of 4 or more
// its suspicion timer starts at SuspicionMaxTimeoutMult × 4 s = 24 s (and
// Lifeguard slows its probes): it may show its peers alive for up to ≈ 25 s,
// which changes no ownership, since a minority keeps the known ring anyway.
//
// Healing (with gossip.DefaultConfig's RejoinInterval 10s): once a partition
// ends, the next rejoin round (at most 1.25 × RejoinInterval away, or a
// quarter of that on a member that is alone) does a push/pull with a failed
// member or seed and the two sides merge, refuting dead verdicts within a
// few gossip rounds: ≤ about 15 s to one view, whether or not memberlist has
// already forgotten the other side (GossipToTheDeadTime 30 s).
func LANTiming() Timing {
	return Timing{
		ProbeInterval:           time.Second,
		ProbeTimeout:            500 * time.Millisecond,
		SuspicionMult:           4,
		SuspicionMaxTimeoutMult: 6,
		IndirectChecks:          3,
		RetransmitMult:          4,
		GossipInterval:          200 * time.Millisecond,
		GossipNodes:             3,
		GossipToTheDeadTime:     30 * time.Second,
		PushPullInterval:        30 * time.Second,
		TCPTimeout:              10 * time.Second,
		DeadNodeReclaimTime:     10 * time.Second,
	}
}

// LocalTiming returns a fast profile for tests in one process or on one
// host (simnet or loopback); it is too eager for a real network. It starts
// from LANTiming and shortens what a local network allows (GossipNodes is
// kept), as memberlist builds DefaultLocalConfig from DefaultLANConfig.
//
// Failure detection, measured by the gossip tests over simnet with -race on
// a loaded 2-core machine (gossip.LocalConfig, so RebuildDebounce 50ms
// included): the majority side of a partition shows the lost members dead
// and takes over their keys in ≈ 0.9–1.6 s; the minority side, which gets no
// suspicion confirmations and is slowed by Lifeguard, shows it in ≈ 2–4 s
// (its ownership does not change). The tests allow 10 s.
//
// Healing (gossip.LocalConfig's RejoinInterval 500ms): one view again
// ≈ 0.06–0.6 s after the end of a partition that outlived
// GossipToTheDeadTime (2 s), i.e. after memberlist had forgotten the other
// side; the bound is one rejoin interval (≤ 0.625 s) plus a push/pull and
// the debounce, ≈ 1 s. The tests allow 10 s.
func LocalTiming() Timing {
	t := LANTiming()
	t.ProbeInterval = 200 * time.Millisecond
	t.ProbeTimeout = 150 * time.Millisecond
	t.SuspicionMult = 3
	t.SuspicionMaxTimeoutMult = 4
	t.IndirectChecks = 2
	t.RetransmitMult = 3
	t.GossipInterval = 50 * time.Millisecond
	t.GossipToTheDeadTime = 2 * time.Second
	t.PushPullInterval = time.Second
	t.TCPTimeout = 500 * time.Millisecond
	t.DeadNodeReclaimTime = time.Second
	return t
}

// DetectionSpread bounds how far apart one member may declare dead several
// members that failed at the same instant, in a cluster of n: it probes
// one member per ProbeInterval in rounds of n-1, so it suspects them up to
// (n-1)·ProbeInterval + ProbeTimeout apart, and a suspicion lasts from
// memberlist's minimum timeout, SuspicionMult·max(1, log10 n)·ProbeInterval,
// up to SuspicionMaxTimeoutMult times that, depending on confirmations. A
// member cut off from a majority sees its peers die one at a time across
// this span, and counts itself in a majority in between: a takeover must
// wait at least this long after a failure (node.Config.TakeoverDelay).
// Local profile: 2.35 s for 3 members, 2.75 s for 5; LAN: 22.5 s and 24.5 s.
func (t Timing) DetectionSpread(n int) time.Duration {
	n = max(n, 1)
	scale := math.Max(1, math.Log10(float64(n)))
	minSuspicion := time.Duration(float64(t.SuspicionMult) * scale * float64(t.ProbeInterval))
	return time.Duration(n-1)*t.ProbeInterval + t.ProbeTimeout + time.Duration(t.SuspicionMaxTimeoutMult-1)*minSuspicion
}

// Validate reports the first bad field; it changes nothing.
func (t Timing) Validate() error {
	switch {
	case t.ProbeInterval <= 0:
		return errors.New("ring: Timing.ProbeInterval must be positive")
	case t.ProbeTimeout <= 0 || t.ProbeTimeout > t.ProbeInterval:
		return errors.New("ring: Timing.ProbeTimeout must be in (0, ProbeInterval]")
	case t.SuspicionMult < 1:
		return errors.New("ring: Timing.SuspicionMult must be at least 1")
	case t.SuspicionMaxTimeoutMult < 1:
		return errors.New("ring: Timing.SuspicionMaxTimeoutMult must be at least 1")
	case t.IndirectChecks < 0:
		return errors.New("ring: Timing.IndirectChecks must not be negative")
	case t.RetransmitMult < 1:
		return errors.New("ring: Timing.RetransmitMult must be at least 1")
	case t.GossipInterval <= 0:
		return errors.New("ring: Timing.GossipInterval must be positive")
	case t.GossipNodes < 1:
		return errors.New("ring: Timing.GossipNodes must be at least 1")
	case t.GossipToTheDeadTime < 0:
		return errors.New("ring: Timing.GossipToTheDeadTime must not be negative")
	case t.PushPullInterval < 0:
		return errors.New("ring: Timing.PushPullInterval must not be negative")
	case t.TCPTimeout <= 0:
		return errors.New("ring: Timing.TCPTimeout must be positive")
	case t.DeadNodeReclaimTime < 0:
		return errors.New("ring: Timing.DeadNodeReclaimTime must not be negative")
	}
	return nil
}
