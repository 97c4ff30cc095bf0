package jepsen

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// The linearizability checker replays, with porcupine, the decisions of
// each bucket instance against an exact model of Weir's token bucket
// (bucket/tokens.go). Where the over-admission checker (Excess) bounds what
// a whole key admitted, this one asks a sharper question of every instance:
// is there one order of its takes, consistent with real time and with the
// decider's clock, in which a single token bucket gives exactly the answers
// the clients saw (allowed or denied, remaining, reset)?
//
// # The model
//
// Balances are integers in units of 1/Per token, with Per = 1s = 1e9 ns:
// a bucket of capacity B holds at most B*1e9 units, and refilling e ns at N
// tokens per second adds exactly e*N units, as the server computes. The
// state is an interval [Lo, Hi] of the balances the bucket may have held at
// its last decision (Last, on the decider's clock), because an instance may
// start from a state handed over, merged or refunded that the history does
// not show. The first decision of an instance starts from [0, B*1e9]; each
// decision then refills both ends, applies the take (an allowed take needs
// Hi >= cost and removes the cost; a denial needs Lo < cost) and intersects
// the interval with what the answer reveals: Remaining R pins the balance to
// [R, R+1) tokens, and ResetAfterMs m (the server's ceil(reset_ns/1e6), with
// reset_ns = ceil((B*1e9 - balance)/N)) pins the deficit to
// ((m-1)*1e6*N, m*1e6*N], or to 0 when m is 0. A decision is legal when the
// interval stays non-empty. So an instance narrows to within a few
// millitokens after its first decision, and every later decision must
// replay exactly, up to the millisecond rounding of the reset.
//
// A denial changes nothing in the store (bucket.Store.TakeAt writes a
// bucket back only when the whole request is allowed), so the state stays
// at the last allowed take: a denial only narrows what the bucket held
// then. Modelling it as a step that moves the bucket to the denial's time
// is wrong by the refill of the gap when the next take read an earlier
// clock (seen: 0.46 ms, three millitokens, enough to fail an instance
// 60 decisions later).
//
// Time is clamped as the server clamps it: a decision whose DecidedAt is
// before the state's Last (the last allowed take) is taken at Last
// (t = max(now, last)). The
// decider reads its clock before it locks the bucket, so of two concurrent
// takes the one that read the later clock may decide first, and the other
// then decides at that later time while reporting its own reading (the
// harness saw this: a denial and an allowance 0.1 ms apart, replayable
// only in the order opposite to their clocks).
//
// # Takes that may have been decided unseen
//
// A take that timed out may have been decided by the instance and spent
// tokens no one saw. So may a take that another node answered from its
// local ceiling, or with an error: the node gave up on its forward, but
// the forward may have reached the owner and been decided there, its
// answer lost on the way back (the harness saw exactly this when a cut
// fell between a forward and its reply). Each such take of the same (limit, key) whose [Call,
// Return] overlaps the instance's span joins its history as an op that may
// be placed anywhere after its Call (its Return is open-ended, since the
// server may decide after the client gave up), whose step may have spent
// its cost: the cost is held as Pending and taken off Lo after the refill at
// the next decision. Deferring the debit to the next decision's time is what
// makes it sound whenever the take was really decided: spent from a full
// bucket later loses more than spent early, and the lower bound
// min(B, Lo+refill) - cost covers both. Hi never moves, so a timeout can
// only widen the interval, never make a history fail.

// HeldUntil returns ops with every take whose answer is unknown (a
// timeout, an error, or another node's local ceiling) and whose [Call,
// Return] overlaps [from, until] treated as possibly decided up to until:
// its Return moved there. It applies to takes sent to one of the stopped
// nodes and to takes of a bucket that one of them owns (owner). A stopped
// process (SIGSTOP) keeps the requests it had read, or that wait in its
// sockets, and decides or forwards them when it resumes, seconds after
// their senders gave up: a take sent to it just as the pause began, and a
// forward another node sent it for a bucket it owns, can be decided
// seconds later, a token spent that no answer showed, possibly in an
// instance that begins only after the pause (a handoff on its return
// starts one). ops is not modified.
func HeldUntil(ops []Op, nodes map[string]bool, owner map[BucketID]string, from, until int64) []Op {
	out := slices.Clone(ops)
	for i := range out {
		o := &out[i]
		unknown := o.Result == Timeout || o.Result == Failed || o.Source == "fallback"
		stopped := nodes[o.Node] || nodes[owner[BucketID{o.Limit, o.Key}]]
		if unknown && stopped && o.Call <= until && o.Return >= from {
			o.Return = max(o.Return, until)
		}
	}
	return out
}

// The results of a LinearCheck.
const (
	// LinearOK means porcupine found an order that replays exactly.
	LinearOK = "ok"
	// LinearIllegal means no order replays: the instance's answers are not
	// those of one token bucket.
	LinearIllegal = "illegal"
	// LinearUnknown means porcupine ran out of time; it is not a failure.
	LinearUnknown = "unknown"
	// LinearNoLimit means the limit is unknown to the run or cannot be
	// modelled (capacity or rate below 1, or capacity above 9e9); it fails.
	LinearNoLimit = "no-limit"
)

// LinearCheck is the verdict on one bucket instance.
type LinearCheck struct {
	ID       BucketID
	Instance string
	Decider  string
	// Ops is the number of determinate owner decisions checked.
	Ops int
	// Unknown is the number of timeouts of the same (limit, key) that may
	// have been decided by this instance and were checked with it.
	Unknown int
	// Result is LinearOK, LinearIllegal, LinearUnknown or LinearNoLimit.
	Result string
	// Visualization is the file name, relative to the output directory, of
	// porcupine's HTML visualization of an illegal instance; empty otherwise.
	Visualization string
	// Pass is false for LinearIllegal and LinearNoLimit.
	Pass bool
}

// linearPer is Per, the units of one token: the model's balances are in
// 1/linearPer tokens, and jepsen limits refill RatePerSec tokens per second.
const linearPer = int64(time.Second)

// linearOpen is the Return of a timed-out op in porcupine's history: later
// than any op, yet far enough from MaxInt64 that no arithmetic overflows.
const linearOpen = math.MaxInt64 / 2

// instanceKey names one bucket instance. Decider is part of it so that two
// nodes that happened to pick the same opaque id are not mixed up.
type instanceKey struct {
	ID                BucketID
	Decider, Instance string
}

// CheckLinear checks every bucket instance of ops for linearizability
// against an exact token bucket, with porcupine (see the model above).
// It considers takes (Kind empty) answered by the owner (Source "owner")
// with Result Allowed or Denied and a non-empty Instance, grouped by
// (limit, key, decider, instance), and the timeouts of the same (limit,
// key) that overlap each group. limit maps a limit's name to its
// parameters. Each group's check stops after timeout (0 means no limit).
// For an illegal instance it writes porcupine's visualization to
// dir/linear-<limit>-<key>-<instance>-<hash>.html, unless dir is empty.
// The result is sorted by limit, key, instance and decider.
func CheckLinear(ops []Op, limit func(name string) (Limit, bool), dir string, timeout time.Duration) []LinearCheck {
	groups, timeouts := linearGroups(ops)
	keys := make([]instanceKey, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b instanceKey) int {
		return cmp.Or(cmp.Compare(a.ID.Limit, b.ID.Limit), cmp.Compare(a.ID.Key, b.ID.Key),
			cmp.Compare(a.Instance, b.Instance), cmp.Compare(a.Decider, b.Decider))
	})
	out := make([]LinearCheck, 0, len(keys))
	for _, k := range keys {
		l, ok := limit(k.ID.Limit)
		out = append(out, checkInstance(k, groups[k], timeouts[k.ID], l, ok, dir, timeout))
	}
	return out
}

// linearGroups returns the ops CheckLinear replays, by instance, and the
// timed-out takes, by bucket.
func linearGroups(ops []Op) (map[instanceKey][]Op, map[BucketID][]Op) {
	groups := make(map[instanceKey][]Op)
	timeouts := make(map[BucketID][]Op)
	for _, o := range ops {
		if o.Kind != "" {
			continue
		}
		id := BucketID{o.Limit, o.Key}
		switch {
		case o.Result == Timeout, o.Result == Failed, o.Source == "fallback":
			// The take may have reached an owner all the same: see
			// "Takes that may have been decided unseen".
			timeouts[id] = append(timeouts[id], o)
		case (o.Result == Allowed || o.Result == Denied) && o.Source == "owner" && o.Instance != "":
			k := instanceKey{id, o.Decider, o.Instance}
			groups[k] = append(groups[k], o)
		}
	}
	return groups, timeouts
}

// overlapping returns the ops of tos whose [Call, Return] meets the span of
// ops, from the first Call to the last Return.
func overlapping(ops, tos []Op) []Op {
	if len(ops) == 0 {
		return nil
	}
	from, to := ops[0].Call, ops[0].Return
	for _, o := range ops[1:] {
		from, to = min(from, o.Call), max(to, o.Return)
	}
	var out []Op
	for _, o := range tos {
		if o.Call <= to && o.Return >= from {
			out = append(out, o)
		}
	}
	return out
}

// checkInstance runs porcupine on one instance and writes the
// visualization of a failure.
func checkInstance(k instanceKey, ops, tos []Op, l Limit, ok bool, dir string, timeout time.Duration) LinearCheck {
	unknown := overlapping(ops, tos)
	c := LinearCheck{ID: k.ID, Instance: k.Instance, Decider: k.Decider, Ops: len(ops), Unknown: len(unknown)}
	m, valid := newTBModel(l)
	if !ok || !valid {
		c.Result = LinearNoLimit
		return c
	}
	base := ops[0].DecidedAt
	for _, o := range ops {
		base = min(base, o.DecidedAt)
	}
	model := m.porcupine(base)
	res, info := porcupine.CheckOperationsVerbose(model, linearHistory(ops, unknown), timeout)
	switch res {
	case porcupine.Ok:
		c.Result, c.Pass = LinearOK, true
	case porcupine.Illegal:
		c.Result = LinearIllegal
		if dir != "" {
			name := linearFileName(k)
			if porcupine.VisualizePath(model, info, filepath.Join(dir, name)) == nil {
				c.Visualization = name
			}
		}
	default:
		c.Result, c.Pass = LinearUnknown, true
	}
	return c
}

// linearHistory converts determinate ops and possibly-decided timeouts to
// porcupine operations.
func linearHistory(ops, unknown []Op) []porcupine.Operation {
	h := make([]porcupine.Operation, 0, len(ops)+len(unknown))
	for _, o := range ops {
		h = append(h, porcupine.Operation{
			ClientId: max(o.Client, 0),
			Input:    linInput{Cost: o.Cost, At: o.DecidedAt},
			Call:     o.Call,
			Output:   linOutput{Allowed: o.Result == Allowed, Remaining: o.Remaining, ResetMs: o.ResetAfterMs},
			Return:   o.Return,
			Metadata: fmt.Sprintf("op %d via %s", o.ID, o.Node),
		})
	}
	for _, o := range unknown {
		h = append(h, porcupine.Operation{
			ClientId: max(o.Client, 0),
			Input:    linInput{Cost: o.Cost},
			Call:     o.Call,
			Output:   linOutput{Unknown: true},
			Return:   linearOpen,
			Metadata: fmt.Sprintf("op %d via %s, timed out at %d", o.ID, o.Node, o.Return),
		})
	}
	return h
}

// linearFileName is the visualization's file name for k: the readable
// parts with anything but [A-Za-z0-9._] replaced by '_', truncated, and a
// hash of the exact key so that names never collide.
func linearFileName(k instanceKey) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(strings.Join([]string{k.ID.Limit, k.ID.Key, k.Decider, k.Instance}, "\x00"))) // never fails
	parts := []string{sanitizeName(k.ID.Limit), sanitizeName(k.ID.Key), sanitizeName(k.Instance)}
	return fmt.Sprintf("linear-%s-%08x.html", strings.Join(parts, "-"), h.Sum32())
}

// sanitizeName keeps at most 40 bytes of s, with anything but ASCII
// letters, digits, '.' and '_' replaced by '_'.
func sanitizeName(s string) string {
	b := []byte(s)
	if len(b) > 40 {
		b = b[:40]
	}
	for i, c := range b {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '_':
		default:
			b[i] = '_'
		}
	}
	return string(b)
}

// linInput is a take: its cost and the decider's clock when it decided
// (0 for a timeout, whose decision time is unknown).
type linInput struct {
	Cost, At int64
}

// linOutput is what the client saw; Unknown for a timeout.
type linOutput struct {
	Allowed            bool
	Remaining, ResetMs int64
	Unknown            bool
}

// linState is the interval of balances an instance may hold, in units of
// 1/linearPer token, at its last decision Last (decider's Unix ns).
// Pending is the cost, in units, that timeouts since Last may have spent;
// it comes off Lo at the next decision. The zero value is the unknown
// state before the first decision.
type linState struct {
	Known   bool
	Lo, Hi  int64
	Last    int64
	Pending int64
}

// tbModel is a token bucket in units: capacity capU = Capacity*linearPer,
// refilled n = RatePerSec units per nanosecond.
type tbModel struct {
	capU, n int64
}

// newTBModel returns the model of l, false when l cannot be modelled.
func newTBModel(l Limit) (tbModel, bool) {
	if l.Capacity < 1 || l.RatePerSec < 1 || int64(l.Capacity) > math.MaxInt64/linearPer {
		return tbModel{}, false
	}
	return tbModel{capU: int64(l.Capacity) * linearPer, n: int64(l.RatePerSec)}, true
}

// step is the model's transition: the state after a take with input in
// answered out, and whether that answer was possible.
func (m tbModel) step(s linState, in linInput, out linOutput) (linState, bool) {
	if out.Unknown {
		if s.Known {
			s.Pending = satAdd(s.Pending, satMul(max(in.Cost, 0), linearPer))
		}
		return s, true
	}
	if !s.Known {
		s = linState{Known: true, Lo: 0, Hi: m.capU, Last: in.At}
	}
	at := max(in.At, s.Last)
	v := m.refill(s, at)
	cost := satMul(max(in.Cost, 0), linearPer)
	if out.Allowed {
		if v.Hi < cost {
			return s, false
		}
		v.Lo, v.Hi = max(v.Lo, cost)-cost, v.Hi-cost
	} else {
		if v.Lo >= cost {
			return s, false
		}
		v.Hi = min(v.Hi, cost-1)
	}
	lo, hi := remainingBounds(out.Remaining)
	v.Lo, v.Hi = max(v.Lo, lo), min(v.Hi, hi)
	lo, hi = m.resetBounds(out.ResetMs)
	v.Lo, v.Hi = max(v.Lo, lo), min(v.Hi, hi)
	if v.Lo > v.Hi {
		return s, false
	}
	if out.Allowed {
		return v, true
	}
	// The store keeps nothing of a denial: the bucket stays as it was at
	// Last, so the next take refills from there and is clamped to Last,
	// not to this denial's time. What the denial revealed narrows the
	// stored state when nothing unseen may have spent since Last: the
	// bucket held [v.Lo, v.Hi] at this time, so [v.Lo-add, v.Hi-add] at
	// Last (v.Hi < cost <= capacity, so no cap is involved). After a take
	// that may have been decided unseen, the bucket may have been written
	// at that take's unknown time, and the state is left as it was.
	if s.Pending == 0 {
		add := satMul(at-s.Last, m.n)
		s.Lo, s.Hi = max(s.Lo, v.Lo-add), min(s.Hi, v.Hi-add)
	}
	return s, s.Lo <= s.Hi
}

// refill advances s to at (at >= s.Last): both ends gain (at-Last)*n units,
// capped at capacity, then Lo loses what timeouts may have spent.
func (m tbModel) refill(s linState, at int64) linState {
	add := satMul(at-s.Last, m.n)
	s.Lo = min(m.capU, satAdd(s.Lo, add))
	s.Hi = min(m.capU, satAdd(s.Hi, add))
	s.Lo = max(0, s.Lo-s.Pending)
	s.Last, s.Pending = at, 0
	return s
}

// remainingBounds is the interval of balances whose whole part is r.
func remainingBounds(r int64) (lo, hi int64) {
	if r < 0 {
		return 1, 0
	}
	lo = satMul(r, linearPer)
	return lo, satAdd(lo, linearPer-1)
}

// resetBounds is the interval of balances whose reset, ceil(deficit/n) ns
// with deficit = capU - balance, rounds up to ms milliseconds: deficit 0
// for ms 0, else deficit in ((ms-1)*1e6*n, ms*1e6*n]. Products saturate;
// a saturated bound lies beyond capU either way, so the answer is exact.
func (m tbModel) resetBounds(ms int64) (lo, hi int64) {
	switch {
	case ms < 0:
		return 1, 0
	case ms == 0:
		return m.capU, m.capU
	}
	const nsPerMs = int64(time.Millisecond)
	most := satMul(satMul(ms, nsPerMs), m.n)    // largest deficit
	least := satMul(satMul(ms-1, nsPerMs), m.n) // deficit is above this
	return m.capU - most, m.capU - least - 1
}

// satMul is a*b for a, b >= 0, saturating at MaxInt64.
func satMul(a, b int64) int64 {
	if a != 0 && b > math.MaxInt64/a {
		return math.MaxInt64
	}
	return a * b
}

// satAdd is a+b for b >= 0, saturating at MaxInt64.
func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// porcupine returns m as a porcupine model; base is the decider's clock
// that descriptions count from.
func (m tbModel) porcupine(base int64) porcupine.Model {
	return porcupine.Model{
		Init: func() any { return linState{} },
		Step: func(state, input, output any) (bool, any) {
			s, ok := m.step(state.(linState), input.(linInput), output.(linOutput))
			return ok, s
		},
		Equal: func(a, b any) bool { return a.(linState) == b.(linState) },
		Hash: func(state any) uint64 {
			s := state.(linState)
			h := uint64(14695981039346656037)
			for _, v := range []int64{s.Lo, s.Hi, s.Last, s.Pending} {
				h = (h ^ uint64(v)) * 1099511628211
			}
			return h
		},
		DescribeOperation: func(input, output any) string {
			return describeTake(input.(linInput), output.(linOutput), base)
		},
		DescribeState: func(state any) string { return describeState(state.(linState), base) },
	}
}

// describeTake renders a take, e.g. "take 2 @+1.234s -> allowed rem 3
// reset 500ms".
func describeTake(in linInput, out linOutput, base int64) string {
	if out.Unknown {
		return fmt.Sprintf("take %d -> timeout (may have spent)", in.Cost)
	}
	verdict := "denied"
	if out.Allowed {
		verdict = "allowed"
	}
	return fmt.Sprintf("take %d @+%s -> %s rem %d reset %dms",
		in.Cost, time.Duration(in.At-base), verdict, out.Remaining, out.ResetMs)
}

// describeState renders a state, e.g. "[3.000, 3.006] tokens @+1.234s".
func describeState(s linState, base int64) string {
	if !s.Known {
		return "unknown"
	}
	d := fmt.Sprintf("[%s, %s] tokens @+%s", formatUnits(s.Lo), formatUnits(s.Hi), time.Duration(s.Last-base))
	if s.Pending > 0 {
		d += fmt.Sprintf(", up to %s more maybe spent", formatUnits(s.Pending))
	}
	return d
}

// formatUnits renders u units as tokens with at least 3 decimals and as
// many as needed, up to 9, to be exact.
func formatUnits(u int64) string {
	if u < 0 {
		return "-" + formatUnits(-u)
	}
	frac := strings.TrimRight(fmt.Sprintf("%09d", u%linearPer), "0")
	for len(frac) < 3 {
		frac += "0"
	}
	return fmt.Sprintf("%d.%s", u/linearPer, frac)
}
