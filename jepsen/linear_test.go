package jepsen

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weir-rl/weir/bucket"
)

// linBucket and linJepsen are the same limit, as the server and the
// harness see it.
var (
	linBucket = bucket.Limit{Algorithm: bucket.TokenBucket, Capacity: 12, Rate: bucket.Rate{N: 6, Per: time.Second}}
	linJepsen = Limit{Name: "api", Capacity: 12, RatePerSec: 6}
)

func linLimits(name string) (Limit, bool) {
	if name == linJepsen.Name {
		return linJepsen, true
	}
	return Limit{}, false
}

// linEpoch is where the decider's Unix clock starts in generated histories.
const linEpoch = int64(1_700_000_000) * sec

// takeGen drives a real bucket and records its decisions as ops that a
// client would have seen: the decider's clock at now, the client's
// [Call, Return] a random latency either side on the runner's base, so that
// the intervals of nearby takes overlap.
type takeGen struct {
	rng   *rand.Rand
	state bucket.State
	now   int64 // decider clock, Unix ns
	next  int64 // next op id
	inst  string
	dec   []bucket.Decision // the decision of each op, in order
}

func newTakeGen(seed uint64, inst string) *takeGen {
	return &takeGen{rng: rand.New(rand.NewPCG(seed, 7)), now: linEpoch, inst: inst}
}

// take advances the clock by gap and takes cost.
func (g *takeGen) take(t *testing.T, gap time.Duration, cost int64) Op {
	t.Helper()
	g.now += int64(gap)
	d, err := bucket.TakeAt(linBucket, &g.state, time.Unix(0, g.now), cost)
	if err != nil {
		t.Fatal(err)
	}
	g.dec = append(g.dec, d)
	run := g.now - linEpoch
	lat := func() int64 { return g.rng.Int64N(int64(80 * time.Millisecond)) }
	o := Op{
		ID: g.next, Client: int(g.next % 4), Node: "n1", Limit: "api", Key: "k", Cost: cost,
		Call: run - lat(), Return: run + lat(), Result: Denied, Source: "owner", Status: 200,
		Decider: "n1", DecidedAt: g.now, Instance: g.inst,
		Remaining: d.Remaining, ResetAfterMs: (int64(d.ResetAfter) + int64(time.Millisecond) - 1) / int64(time.Millisecond),
	}
	if d.Allowed {
		o.Result = Allowed
	}
	g.next++
	return o
}

// random records n takes of cost 1..3 at gaps of 1..300 ms.
func (g *takeGen) random(t *testing.T, n int) []Op {
	t.Helper()
	ops := make([]Op, 0, n)
	for range n {
		gap := time.Duration(1+g.rng.Int64N(300)) * time.Millisecond
		ops = append(ops, g.take(t, gap, 1+g.rng.Int64N(3)))
	}
	return ops
}

// checkOne runs CheckLinear and wants exactly one instance.
func checkOne(t *testing.T, ops []Op, dir string) LinearCheck {
	t.Helper()
	cs := CheckLinear(ops, linLimits, dir, 10*time.Second)
	if len(cs) != 1 {
		t.Fatalf("got %d checks, want 1: %+v", len(cs), cs)
	}
	return cs[0]
}

func TestLinearRealBucketPasses(t *testing.T) {
	g := newTakeGen(1, "i1")
	ops := g.random(t, 200)
	var allowed, denied, overlaps int
	for i, o := range ops {
		if o.Result == Allowed {
			allowed++
		} else {
			denied++
		}
		if i > 0 && o.Call < ops[i-1].Return {
			overlaps++
		}
	}
	if allowed < 20 || denied < 20 || overlaps < 20 {
		t.Fatalf("weak history: %d allowed, %d denied, %d overlaps", allowed, denied, overlaps)
	}
	c := checkOne(t, ops, t.TempDir())
	want := LinearCheck{ID: BucketID{"api", "k"}, Instance: "i1", Decider: "n1", Ops: 200, Result: LinearOK, Pass: true}
	if c != want {
		t.Fatalf("got %+v, want %+v", c, want)
	}
}

func TestLinearForgottenDebitFails(t *testing.T) {
	g := newTakeGen(2, "i1")
	ops := g.random(t, 200)
	// A denial that was far from fitting: its balance was at least 0.3
	// tokens short, so no rounding can excuse an admission.
	flip := slices.IndexFunc(ops, func(o Op) bool {
		i := int(o.ID)
		return i > 10 && o.Result == Denied && g.dec[i].RetryAfter > 50*time.Millisecond
	})
	// An allowed take whose balance after it was well inside a whole
	// token: its fraction lies in [0.1, 0.9].
	bump := slices.IndexFunc(ops, func(o Op) bool {
		i := int(o.ID)
		deficit := int64(g.dec[i].ResetAfter) * linBucket.Rate.N // units of 1e-9 token
		frac := ((int64(linBucket.Capacity)*sec-deficit)%sec + sec) % sec
		return i > 10 && o.Result == Allowed && deficit > 0 && frac > sec/10 && frac < sec*9/10
	})
	if flip < 0 || bump < 0 {
		t.Fatalf("no op to break: flip %d bump %d", flip, bump)
	}
	for _, tc := range []struct {
		name   string
		mutate func(o *Op)
		at     int
	}{
		{"denied-to-allowed", func(o *Op) { o.Result = Allowed }, flip},
		{"remaining+1", func(o *Op) { o.Remaining++ }, bump},
		{"reset+1ms", func(o *Op) { o.ResetAfterMs++ }, bump},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := slices.Clone(ops)
			tc.mutate(&bad[tc.at])
			dir := t.TempDir()
			c := checkOne(t, bad, dir)
			if c.Result != LinearIllegal || c.Pass {
				t.Fatalf("got %+v, want illegal", c)
			}
			if c.Visualization == "" || filepath.Base(c.Visualization) != c.Visualization ||
				!strings.HasPrefix(c.Visualization, "linear-api-k-i1-") {
				t.Fatalf("visualization %q", c.Visualization)
			}
			b, err := os.ReadFile(filepath.Join(dir, c.Visualization))
			if err != nil || !strings.Contains(string(b), "take ") {
				t.Fatalf("visualization file: %v, %d bytes", err, len(b))
			}
			if c := checkOne(t, bad, ""); c.Result != LinearIllegal || c.Visualization != "" {
				t.Fatalf("without a dir: %+v", c)
			}
		})
	}
}

func TestLinearUnknownStartPasses(t *testing.T) {
	g := newTakeGen(3, "handed-over")
	for range 5 { // unrecorded takes before the instance's history
		g.take(t, 37*time.Millisecond, 2)
	}
	ops := g.random(t, 60)
	if ops[0].Remaining >= linBucket.Capacity-ops[0].Cost {
		t.Fatalf("instance starts full: %+v", ops[0])
	}
	if c := checkOne(t, ops, ""); c.Result != LinearOK || !c.Pass || c.Ops != 60 {
		t.Fatalf("got %+v, want ok", c)
	}
}

func TestLinearTimeoutMaySpend(t *testing.T) {
	g := newTakeGen(4, "i1")
	ops := g.random(t, 80)
	// An allowed take followed by one that leaves the bucket at least one
	// second (six tokens) from full: forgetting the first shows.
	i := slices.IndexFunc(ops, func(o Op) bool {
		j := int(o.ID)
		return j > 5 && j+1 < len(ops) && o.Result == Allowed && g.dec[j+1].ResetAfter > time.Second
	})
	if i < 0 {
		t.Fatal("no allowed take to time out")
	}
	dropped := slices.Delete(slices.Clone(ops), i, i+1)
	if c := checkOne(t, dropped, ""); c.Result != LinearIllegal {
		t.Fatalf("spent take left out: got %+v, want illegal", c)
	}
	timedOut := slices.Clone(ops)
	o := &timedOut[i]
	o.Result, o.Status, o.Source, o.Err = Timeout, 0, "", "context deadline exceeded"
	o.Decider, o.DecidedAt, o.Instance, o.Remaining, o.ResetAfterMs = "", 0, "", 0, 0
	c := checkOne(t, timedOut, "")
	if c.Result != LinearOK || !c.Pass || c.Ops != 79 || c.Unknown != 1 {
		t.Fatalf("spent take timed out: got %+v, want ok with 79 ops, 1 unknown", c)
	}
	// A take another node answered from its local ceiling after its
	// forward failed may still have been decided by the owner: the answer
	// was lost, not the debit (seen in a jepsen isolate run).
	fellBack := slices.Clone(ops)
	o = &fellBack[i]
	o.Source, o.Decider, o.Instance = "fallback", "n9", "n9/x/f1"
	if c := checkOne(t, fellBack, ""); c.Result != LinearOK || c.Ops != 79 || c.Unknown != 1 {
		t.Fatalf("spent take answered from fallback: got %+v, want ok with 79 ops, 1 unknown", c)
	}
	// A timeout long before the instance's span is not its concern.
	far := append(slices.Clone(dropped), Op{Limit: "api", Key: "k", Cost: 3, Call: -10 * sec, Return: -9 * sec, Result: Timeout})
	if c := checkOne(t, far, ""); c.Unknown != 0 || c.Result != LinearIllegal {
		t.Fatalf("far timeout: got %+v", c)
	}
}

// TestLinearHeldByPause: a take sent to a node that was stopped right
// after timed out long before the instance's span, but the node decided
// it when it resumed. Unattributed it fails the instance; HeldUntil, over
// the pause of that node, lets it spend.
func TestLinearHeldByPause(t *testing.T) {
	g := newTakeGen(4, "i1")
	ops := g.random(t, 80)
	i := slices.IndexFunc(ops, func(o Op) bool {
		j := int(o.ID)
		return j > 5 && j+1 < len(ops) && o.Result == Allowed && g.dec[j+1].ResetAfter > time.Second
	})
	if i < 0 {
		t.Fatal("no allowed take to hold")
	}
	held := slices.Clone(ops)
	o := &held[i]
	pauseFrom, pauseTo := ops[0].Call-5*sec, ops[i].Return
	o.Node, o.Call, o.Return = "n2", pauseFrom, pauseFrom+sec // sent as the pause began, gave up a second later
	o.Result, o.Status, o.Source, o.Err = Timeout, 0, "", "context deadline exceeded"
	o.Decider, o.DecidedAt, o.Instance, o.Remaining, o.ResetAfterMs = "", 0, "", 0, 0
	if c := checkOne(t, held, ""); c.Result != LinearIllegal || c.Unknown != 0 {
		t.Fatalf("held take without the pause: got %+v, want illegal with no unknown", c)
	}
	if c := checkOne(t, HeldUntil(held, map[string]bool{"n1": true}, nil, pauseFrom, pauseTo), ""); c.Result != LinearIllegal {
		t.Fatalf("held take, another node paused: got %+v, want illegal", c)
	}
	c := checkOne(t, HeldUntil(held, map[string]bool{"n2": true}, nil, pauseFrom, pauseTo), "")
	if c.Result != LinearOK || c.Unknown != 1 {
		t.Fatalf("held take over n2's pause: got %+v, want ok with 1 unknown", c)
	}
	// The same take sent to n1, which forwarded it to the bucket's owner
	// n2 and gave up on it, by a timeout or by its local ceiling: the
	// forward waits in the stopped owner's socket (the likely cause of a
	// jepsen pause failure: an instance of n2 showed a token spent unseen
	// just after n2 resumed).
	owner := map[BucketID]string{{"api", "k"}: "n2"}
	viaN1 := slices.Clone(held)
	viaN1[i].Node = "n1"
	if c := checkOne(t, HeldUntil(viaN1, map[string]bool{"n2": true}, nil, pauseFrom, pauseTo), ""); c.Result != LinearIllegal {
		t.Fatalf("forward into the stopped owner, owner unknown: got %+v, want illegal", c)
	}
	if c := checkOne(t, HeldUntil(viaN1, map[string]bool{"n2": true}, map[BucketID]string{{"api", "k"}: "n3"}, pauseFrom, pauseTo), ""); c.Result != LinearIllegal {
		t.Fatalf("forward to an owner that was not stopped: got %+v, want illegal", c)
	}
	if c := checkOne(t, HeldUntil(viaN1, map[string]bool{"n2": true}, owner, pauseFrom, pauseTo), ""); c.Result != LinearOK || c.Unknown != 1 {
		t.Fatalf("forward into the stopped owner: got %+v, want ok with 1 unknown", c)
	}
	fellBack := slices.Clone(viaN1)
	fellBack[i].Result, fellBack[i].Source, fellBack[i].Err = Allowed, "fallback", ""
	if c := checkOne(t, HeldUntil(fellBack, map[string]bool{"n2": true}, owner, pauseFrom, pauseTo), ""); c.Result != LinearOK || c.Unknown != 1 {
		t.Fatalf("forward into the stopped owner answered from fallback: got %+v, want ok with 1 unknown", c)
	}
	if held[i].Return != pauseFrom+sec {
		t.Fatal("HeldUntil modified its input")
	}
}

func TestLinearInstancesCheckedSeparately(t *testing.T) {
	a, b := newTakeGen(5, "a"), newTakeGen(6, "b")
	b.next = 1000
	var ops []Op
	for range 40 { // two full buckets, interleaved in time on one key
		ops = append(ops, a.random(t, 1)...)
		ops = append(ops, b.random(t, 1)...)
	}
	cs := CheckLinear(ops, linLimits, "", 10*time.Second)
	if len(cs) != 2 || cs[0].Instance != "a" || cs[1].Instance != "b" {
		t.Fatalf("got %+v, want instances a and b", cs)
	}
	for _, c := range cs {
		if c.Result != LinearOK || !c.Pass || c.Ops != 40 {
			t.Fatalf("instance %s: got %+v, want ok", c.Instance, c)
		}
	}
	merged := slices.Clone(ops)
	for i := range merged {
		merged[i].Instance = "a"
	}
	if c := checkOne(t, merged, ""); c.Result != LinearIllegal || c.Ops != 80 {
		t.Fatalf("merged: got %+v, want illegal", c)
	}
}

func TestLinearIgnoresOtherOps(t *testing.T) {
	g := newTakeGen(7, "i1")
	ops := g.random(t, 50)
	junk := Op{
		Limit: "api", Key: "k", Cost: 1, Call: 0, Return: 1, Decider: "n1", DecidedAt: linEpoch + sec,
		Instance: "i1", Remaining: 11, ResetAfterMs: 1,
	}
	fallback := junk
	fallback.Result, fallback.Source = Allowed, "fallback"
	failed := junk
	failed.Result, failed.Source, failed.Status = Failed, "owner", 503
	noInstance := junk
	noInstance.Result, noInstance.Source, noInstance.Instance = Allowed, "owner", ""
	lease := junk
	lease.Result, lease.Source, lease.Kind = Allowed, "owner", KindAcquire
	ops = append(ops, fallback, failed, noInstance, lease)
	if c := checkOne(t, ops, ""); c.Result != LinearOK || c.Ops != 50 || c.Unknown != 0 {
		t.Fatalf("got %+v, want ok over 50 ops", c)
	}

	other := junk
	other.Limit, other.Result, other.Source = "unconfigured", Allowed, "owner"
	cs := CheckLinear([]Op{other}, linLimits, "", time.Second)
	if len(cs) != 1 || cs[0].Result != LinearNoLimit || cs[0].Pass {
		t.Fatalf("unknown limit: got %+v", cs)
	}
}

// TestLinearModelSteps checks the model's arithmetic on explicit numbers:
// capacity 12, 6 tokens a second, so 1 ms refills 0.006 tokens.
func TestLinearModelSteps(t *testing.T) {
	m, ok := newTBModel(linJepsen)
	if !ok {
		t.Fatal("limit not modelled")
	}
	const ms = int64(time.Millisecond)
	type step struct {
		at                 int64
		cost               int64
		allowed            bool
		remaining, resetMs int64
		unknown            bool
		legal              bool
		lo, hi             int64 // state after a legal step, in 1e-9 tokens
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"full start pins exactly", []step{
			{at: 0, cost: 3, allowed: true, remaining: 9, resetMs: 500, legal: true, lo: 9 * sec, hi: 9 * sec},
			{at: 0, cost: 1, allowed: false, remaining: 9, resetMs: 500}, // 9 tokens cannot deny 1
		}},
		{"refill over time", []step{
			{at: 0, cost: 3, allowed: true, remaining: 9, resetMs: 500, legal: true, lo: 9 * sec, hi: 9 * sec},
			{at: 100 * ms, cost: 1, allowed: true, remaining: 8, resetMs: 567, legal: true, lo: 8*sec + 600*ms, hi: 8*sec + 600*ms},
			{at: 150 * ms, cost: 1, allowed: true, remaining: 7, resetMs: 684, legal: true, lo: 7*sec + 900*ms, hi: 7*sec + 900*ms},
		}},
		// A decision that read its clock before Last is taken at Last, as
		// the server's clamp does: legal only when answered as if at Last.
		{"clock went back, clamped answer", []step{
			{at: 100 * ms, cost: 3, allowed: true, remaining: 9, resetMs: 500, legal: true, lo: 9 * sec, hi: 9 * sec},
			{at: 50 * ms, cost: 1, allowed: true, remaining: 8, resetMs: 667, legal: true, lo: 8 * sec, hi: 8 * sec},
		}},
		{"clock went back, full answer", []step{
			{at: 100 * ms, cost: 3, allowed: true, remaining: 9, resetMs: 500, legal: true, lo: 9 * sec, hi: 9 * sec},
			{at: 50 * ms, cost: 1, allowed: true, remaining: 11, resetMs: 167},
		}},
		{"unknown start narrows", []step{
			// A balance of exactly 1 token: deficit 11, reset 1833.33 ms.
			{at: 0, cost: 2, allowed: false, remaining: 1, resetMs: 1834, legal: true, lo: 1_000_000_000, hi: 1_001_999_999},
			{at: 0, cost: 1, allowed: true, remaining: 0, resetMs: 2000, legal: true, lo: 0, hi: 1_999_999},
			{at: 0, cost: 1, allowed: true, remaining: 0, resetMs: 2000}, // nothing left
		}},
		{"timeout may spend", []step{
			{at: 0, cost: 3, allowed: true, remaining: 9, resetMs: 500, legal: true, lo: 9 * sec, hi: 9 * sec},
			{cost: 2, unknown: true, legal: true, lo: 9 * sec, hi: 9 * sec},
			// Full by 500 ms; 2 spent at about 833 ms leave 11 at 1 s.
			{at: 1000 * ms, cost: 1, allowed: true, remaining: 10, resetMs: 167, legal: true, lo: 10_998_000_000, hi: 10_999_999_999},
		}},
		{"without the timeout", []step{
			{at: 0, cost: 3, allowed: true, remaining: 9, resetMs: 500, legal: true, lo: 9 * sec, hi: 9 * sec},
			{at: 1000 * ms, cost: 1, allowed: true, remaining: 10, resetMs: 167},
		}},
		{"empty then full", []step{
			{at: 0, cost: 12, allowed: true, remaining: 0, resetMs: 2000, legal: true, lo: 0, hi: 0},
			{at: 5 * sec, cost: 1, allowed: true, remaining: 11, resetMs: 167, legal: true, lo: 11 * sec, hi: 11 * sec},
			{at: 5 * sec, cost: 1, allowed: true, remaining: 10, resetMs: 0}, // only a full bucket resets in 0 ms
		}},
		{"denied although enough", []step{
			{at: 0, cost: 12, allowed: true, remaining: 0, resetMs: 2000, legal: true, lo: 0, hi: 0},
			{at: 5 * sec, cost: 1, allowed: false, remaining: 12, resetMs: 0},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s linState
			for i, st := range tc.steps {
				next, legal := m.step(s, linInput{Cost: st.cost, At: linEpoch + st.at},
					linOutput{Allowed: st.allowed, Remaining: st.remaining, ResetMs: st.resetMs, Unknown: st.unknown})
				if legal != st.legal {
					t.Fatalf("step %d %+v: legal %v from %s", i, st, legal, describeState(s, linEpoch))
				}
				if !legal {
					return
				}
				if next.Lo != st.lo || next.Hi != st.hi {
					t.Fatalf("step %d: got %s, want [%s, %s]", i, describeState(next, linEpoch), formatUnits(st.lo), formatUnits(st.hi))
				}
				s = next
			}
		})
	}
}

func TestLinearDescriptions(t *testing.T) {
	in, out := linInput{Cost: 2, At: linEpoch + 1234*int64(time.Millisecond)}, linOutput{Allowed: true, Remaining: 3, ResetMs: 500}
	if got, want := describeTake(in, out, linEpoch), "take 2 @+1.234s -> allowed rem 3 reset 500ms"; got != want {
		t.Errorf("describeTake = %q, want %q", got, want)
	}
	s := linState{Known: true, Lo: 3 * sec, Hi: 3*sec + 6*int64(time.Millisecond) - 1, Last: linEpoch}
	if got, want := describeState(s, linEpoch), "[3.000, 3.005999999] tokens @+0s"; got != want {
		t.Errorf("describeState = %q, want %q", got, want)
	}
	if got := linearFileName(instanceKey{BucketID{"api", "user/1"}, "n1", "i 7"}); !strings.HasPrefix(got, "linear-api-user_1-i_7-") || !strings.HasSuffix(got, ".html") {
		t.Errorf("linearFileName = %q", got)
	}
}

// TestLinearStoreSemantics replays histories made by bucket.Store, as the
// server decides: a denial is not written back, and of two concurrent
// takes the one that read the later clock is sometimes decided first. A
// model that moves the bucket to a denial's time misreads the next reset
// by the refill of the gap and fails such histories.
func TestLinearStoreSemantics(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 11))
		st := bucket.NewStore(bucket.LocalConfig())
		now := linEpoch
		var ops []Op
		decide := func(at, cost int64) {
			ds, _, err := st.TakeAt(time.Unix(0, at), []bucket.Check{{Name: "api", Limit: linBucket, Key: "k", Cost: cost}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			d := ds[0]
			run := at - linEpoch
			o := Op{
				ID: int64(len(ops)), Client: len(ops) % 4, Node: "n1", Limit: "api", Key: "k", Cost: cost,
				Call: run - int64(time.Millisecond), Return: run + int64(2*time.Millisecond), Result: Denied, Source: "owner",
				Decider: "n1", DecidedAt: at, Instance: "i1", Remaining: d.Remaining,
				ResetAfterMs: (int64(d.ResetAfter) + int64(time.Millisecond) - 1) / int64(time.Millisecond),
			}
			if d.Allowed {
				o.Result = Allowed
			}
			ops = append(ops, o)
		}
		for range 150 {
			now += int64(time.Duration(1+rng.Int64N(120)) * time.Millisecond)
			if rng.IntN(3) == 0 {
				// Two takes read the clock 0.1-0.9 ms apart; the later
				// reading locks the bucket first.
				skew := int64(time.Duration(100+rng.Int64N(800)) * time.Microsecond)
				decide(now+skew, 1+rng.Int64N(3))
				decide(now, 1+rng.Int64N(3))
				now += skew
				continue
			}
			decide(now, 1+rng.Int64N(3))
		}
		if c := checkOne(t, ops, ""); !c.Pass {
			t.Fatalf("seed %d: a history the store made does not replay: %+v", seed, c)
		}
	}
}
