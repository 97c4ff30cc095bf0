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
		stopped := nodes[o.Node] || nodes[owner[BucketID{o.Limit, o.Key}]]
		if decidedUnseen(*o) && stopped && o.Call <= until && o.Return >= from {
			o.Return = max(o.Return, until)
		}
	}
	return out
}

// decidedUnseen reports whether the take o may have been decided by an
// owner although no answer showed it: a timeout, an error, or another
// node's local ceiling after its forward failed (see "Takes that may have
// been decided unseen").
func decidedUnseen(o Op) bool {
	return o.Result == Timeout || o.Result == Failed || o.Source == "fallback"
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
		case decidedUnseen(o):
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
