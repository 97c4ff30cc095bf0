package placement

import (
	"fmt"
	"testing"
	"time"

	"github.com/weir-rl/weir/ring"
)

// These are step tables with explicit times: every rule has rows that fail
// when the rule is taken out (each was checked by deleting the rule).

var t0 = time.Unix(1_000_000, 0)

const limit = "hot"

// view builds member self's view of n1..nN in the given states.
func view(self string, states ...ring.State) *ring.View {
	ms := make([]ring.Member, len(states))
	for i, s := range states {
		name := fmt.Sprintf("n%d", i+1)
		ms[i] = ring.Member{Name: name, Addr: name + ":7946", State: s, Meta: ring.Meta{GRPCAddr: name + ":7947"}}
	}
	return ring.NewView(1, self, ms)
}

func alive(n int) []ring.State {
	s := make([]ring.State, n)
	for i := range s {
		s[i] = ring.Alive
	}
	return s
}

// keyWhere returns a key for which pred holds.
func keyWhere(t *testing.T, pred func(hk string) bool) string {
	t.Helper()
	k, ok := findKey(pred)
	if !ok {
		t.Fatal("no key found")
	}
	return k
}

func findKey(pred func(hk string) bool) (string, bool) {
	for i := range 20_000 {
		k := fmt.Sprintf("k%d", i)
		if pred(ring.HashKey(limit, k)) {
			return k, true
		}
	}
	return "", false
}

func owner(v *ring.View, hk string) string {
	m, _ := v.Owner(hk)
	return m.Name
}

func cfg(self string) Config {
	return Config{
		Self: self, TakeoverDelay: 4 * time.Second, Timing: ring.LocalTiming(),
		HandoffWindow: 2 * time.Second, FailureMemory: time.Hour,
	}
}

type row struct {
	name string
	at   time.Time
	key  string
	mark Mark
	want Placement
}

func run(t *testing.T, s *Snapshot, lease bool, rows []row) {
	t.Helper()
	for _, r := range rows {
		var got Placement
		if lease {
			got = s.Lease(r.at, limit, r.key, r.mark)
		} else {
			got = s.Take(r.at, limit, r.key, r.mark)
		}
		if got != r.want {
			t.Errorf("%s: got %+v, want %+v", r.name, got, r.want)
		}
	}
}

func fwd(peer string, why Reason) Placement {
	return Placement{Kind: Forward, Peer: peer, Addr: peer + ":7947", Reason: why}
}

// The join rule: a restarted node started with --join whose view is itself
// alone would own every key with fresh buckets (the kill-and-restart
// scenario's +B).
func TestJoinRule(t *testing.T) {
	alone := view("n1", ring.Alive)
	c := cfg("n1")
	c.Seeds = 2
	k := "k1"
	for _, tc := range []struct {
		name   string
		v      *ring.View
		joined bool
		want   Placement
		known  int
	}{
		{"not joined, alone", alone, false, Placement{Reason: NotJoined}, 3},
		{"joined, still alone", alone, true, Placement{Reason: NotJoined}, 3},
		{"not joined, sees others", view("n1", alive(3)...), false, Placement{Reason: NotJoined}, 3},
	} {
		s := New(c, State{View: tc.v, Joined: tc.joined, Changed: t0.Add(-time.Hour)})
		if got := s.Take(t0, limit, k, Mark{}); got != tc.want {
			t.Errorf("%s: Take = %+v, want %+v", tc.name, got, tc.want)
		}
		if got := s.Lease(t0, limit, k, Mark{}); got != tc.want {
			t.Errorf("%s: Lease = %+v, want %+v", tc.name, got, tc.want)
		}
		if got := s.Known(); got != tc.known {
			t.Errorf("%s: Known = %d, want %d (a share must divide by the seeds too)", tc.name, got, tc.known)
		}
	}
	v := view("n1", alive(3)...)
	s := New(c, State{View: v, Joined: true, Changed: t0.Add(-time.Hour)})
	own := keyWhere(t, func(hk string) bool { return owner(v, hk) == "n1" })
	if got := s.Take(t0, limit, own, Mark{}); got.Kind != Here {
		t.Errorf("joined with peers: own key placed %+v, want here", got)
	}
	// Serve too: a restarted node that its peers already see alive, whose
	// own view is still itself alone, must not decide what they forward
	// (a peer forwards to the restarted node at once, and a take decided
	// from its fresh bucket is one token over the limit).
	s = New(c, State{View: alone, Joined: true, Changed: t0})
	if got := s.Serve(t0, limit, k, "n2", false, Mark{}); got != (Placement{Reason: NotJoined}) {
		t.Errorf("Serve before the view holds a peer: %+v, want not-joined", got)
	}
	if s.ServesLease(limit, k, "n2") {
		t.Error("ServesLease before the view holds a peer")
	}
	// Without seeds the rule does not apply: a first node decides alone.
	c.Seeds = 0
	if got := New(c, State{View: alone, Changed: t0.Add(-time.Hour)}).Take(t0, limit, k, Mark{}); got.Kind != Here {
		t.Errorf("no seeds: got %+v, want here", got)
	}
}

// Moved marks: a node that handed a key over must not decide it from the
// fresh bucket its ring still points at (the handoff's debt would be
// minted again).
func TestMovedMarkRule(t *testing.T) {
	v := view("n1", ring.Alive, ring.Alive, ring.Alive, ring.Alive, ring.Dead)
	s := New(cfg("n1"), State{View: v, Joined: true, Changed: t0.Add(-time.Hour)})
	own := keyWhere(t, func(hk string) bool { return owner(v, hk) == "n1" })
	other := keyWhere(t, func(hk string) bool { return owner(v, hk) == "n2" })
	rows := []row{
		{"own key, no mark", t0, own, Mark{}, Placement{Kind: Here}},
		{"own key moved to n2", t0, own, Mark{To: "n2"}, fwd("n2", Moved)},
		{"own key moved to a dead member", t0, own, Mark{To: "n5"}, Placement{Reason: Unreachable, Peer: "n5"}},
		{"own key moved to an unknown member", t0, own, Mark{To: "x"}, Placement{Reason: Unreachable, Peer: "x"}},
		{"n2's key handed back here", t0, other, Mark{To: "n1"}, Placement{Kind: Here, Reason: Moved}},
	}
	run(t, s, false, rows)
	run(t, s, true, rows)
}

// Unreachable owner and the majority rule: a node on a minority side
// decides even its own keys from its ceiling, because the majority side
// takes them over (two owners otherwise: +B per minority node).
func TestUnreachableAndMajorityRules(t *testing.T) {
	minority := view("n1", ring.Alive, ring.Dead, ring.Dead)
	s := New(cfg("n1"), State{View: minority, Joined: true, Changed: t0.Add(-time.Hour)})
	own := keyWhere(t, func(hk string) bool { return owner(minority, hk) == "n1" })
	theirs := keyWhere(t, func(hk string) bool { return owner(minority, hk) == "n2" })
	rows := []row{
		{"minority, own key", t0, own, Mark{}, Placement{Reason: Minority}},
		{"minority, dead owner's key", t0, theirs, Mark{}, Placement{Reason: Unreachable, Peer: "n2"}},
	}
	run(t, s, false, rows)
	run(t, s, true, rows)

	suspect := view("n1", ring.Alive, ring.Suspect, ring.Alive)
	s = New(cfg("n1"), State{View: suspect, Joined: true, Changed: t0.Add(-time.Hour)})
	k := keyWhere(t, func(hk string) bool { return owner(suspect, hk) == "n2" })
	run(t, s, false, []row{{"suspect owner", t0, k, Mark{}, Placement{Reason: Unreachable, Peer: "n2"}}})
	k3 := keyWhere(t, func(hk string) bool { return owner(suspect, hk) == "n3" })
	run(t, s, false, []row{{"alive owner", t0, k3, Mark{}, fwd("n3", ByOwner)}})

	if got := New(cfg("n1"), State{}).Take(t0, limit, own, Mark{}); got != (Placement{Reason: NotJoined}) {
		t.Errorf("no view: %+v", got)
	}
	empty := &ring.View{Self: "n1"}
	if got := New(cfg("n1"), State{View: empty}).Take(t0, limit, own, Mark{}); got != (Placement{Reason: NoRing}) {
		t.Errorf("empty view: %+v", got)
	}
}

// failed returns the views before and after n3 of 5 fails, as seen by n1.
func failed(self string) (prev, next *ring.View) {
	return view(self, alive(5)...), view(self, ring.Alive, ring.Alive, ring.Dead, ring.Alive, ring.Alive)
}

// The takeover delay: a key that changed owner in a run of failures is
// decided from a ceiling until the run is the delay old, so a node that
// loses its peers one at a time never takes keys over while it wrongly
// believes itself a majority (jepsen's 5-node split).
func TestTakeoverDelayRule(t *testing.T) {
	prev, next := failed("n1")
	c := cfg("n1")
	fs := Observe(nil, prev, next, t0, c.FailureMemory)
	if len(fs) != 1 || fs[0].Name != "n3" || !fs[0].At.Equal(t0) {
		t.Fatalf("Observe: %+v", fs)
	}
	s := New(c, State{View: next, Joined: true, Failures: fs, Changed: t0.Add(-time.Hour)})
	delay := s.delay
	if delay != c.TakeoverDelay {
		t.Fatalf("delay %v, want %v", delay, c.TakeoverDelay)
	}
	taken := keyWhere(t, func(hk string) bool { return owner(prev, hk) == "n3" && owner(next, hk) == "n1" })
	kept := keyWhere(t, func(hk string) bool { return owner(prev, hk) == "n1" && owner(next, hk) == "n1" })
	held := Placement{Reason: TakeoverDelay}
	if shifted, ok := findKey(func(hk string) bool { return owner(prev, hk) == "n2" && owner(next, hk) == "n1" }); ok {
		run(t, s, false, []row{{"moved between survivors", t0.Add(time.Second), shifted, Mark{}, held}})
	}
	run(t, s, false, []row{
		{"taken over, at the failure", t0, taken, Mark{}, held},
		{"taken over, 1ns before the delay", t0.Add(delay - 1), taken, Mark{}, held},
		{"taken over, at the delay: from the replica", t0.Add(delay), taken, Mark{}, Placement{Kind: Replica, Reason: TakenOver}},
		{"clock went backwards", t0.Add(-time.Minute), taken, Mark{}, held},
		{"kept its owner", t0, kept, Mark{}, Placement{Kind: Here}},
	})
	// Leases take no delay: the lease ceiling guards them instead.
	run(t, s, true, []row{{"lease, at the failure", t0, taken, Mark{}, Placement{Kind: Replica, Reason: TakenOver}}})

	// A run of failures: a second failure less than the delay after the
	// first restarts the delay for the keys the first one moved.
	prev2, next2 := next, view("n1", ring.Alive, ring.Alive, ring.Dead, ring.Dead, ring.Alive)
	t1 := t0.Add(delay - time.Millisecond)
	fs2 := Observe(fs, prev2, next2, t1, c.FailureMemory)
	s = New(c, State{View: next2, Joined: true, Failures: fs2, Changed: t0.Add(-time.Hour)})
	taken2 := keyWhere(t, func(hk string) bool { return owner(prev, hk) == "n3" && owner(next2, hk) == "n1" })
	run(t, s, false, []row{
		{"first failure's key, after its own delay but inside the run", t0.Add(delay + time.Second), taken2, Mark{}, held},
		{"first failure's key, 1ns before the run's delay", t1.Add(delay - 1), taken2, Mark{}, held},
		{"first failure's key, at the run's delay", t1.Add(delay), taken2, Mark{}, Placement{Kind: Replica, Reason: TakenOver}},
	})

	// The floor: a delay below the ring's detection spread is raised to it.
	c.TakeoverDelay = time.Millisecond
	s = New(c, State{View: next, Joined: true, Failures: fs, Changed: t0.Add(-time.Hour)})
	spread := c.Timing.DetectionSpread(5)
	run(t, s, false, []row{
		{"short delay, inside the detection spread", t0.Add(spread - 1), taken, Mark{}, held},
		{"short delay, at the detection spread", t0.Add(spread), taken, Mark{}, Placement{Kind: Replica, Reason: TakenOver}},
	})
}

// The lease ceiling: for max_lease_ttl after a key's owner failed, its new
// owner cannot know which leases still run, so it grants only a share
// (without it: permits granted twice over).
func TestLeaseCeilingRule(t *testing.T) {
	prev, next := failed("n1")
	c := cfg("n1")
	s := New(c, State{View: next, Joined: true, Failures: Observe(nil, prev, next, t0, c.FailureMemory), Changed: t0.Add(-time.Hour)})
	taken := keyWhere(t, func(hk string) bool { return owner(prev, hk) == "n3" && owner(next, hk) == "n1" })
	shifted := keyWhere(t, func(hk string) bool { return owner(prev, hk) == "n2" })
	ttl := 2 * time.Second
	for _, tc := range []struct {
		name string
		at   time.Time
		key  string
		left time.Duration
		ok   bool
	}{
		{"at the failure", t0, taken, ttl, true},
		{"1ns before max_lease_ttl", t0.Add(ttl - 1), taken, 1, true},
		{"at max_lease_ttl", t0.Add(ttl), taken, 0, false},
		{"key the failed member did not own", t0, shifted, 0, false},
	} {
		left, ok := s.LeaseCeiling(tc.at, limit, tc.key, ttl, nil)
		if left != tc.left || ok != tc.ok {
			t.Errorf("%s: got %v %v, want %v %v", tc.name, left, ok, tc.left, tc.ok)
		}
	}
	// A replica that was current when n3's failure was noticed names the
	// leases that still run: no window. A stale one opens it.
	current := func(failed string, at time.Time) bool { return failed == "n3" && at.Equal(t0) }
	if _, ok := s.LeaseCeiling(t0, limit, taken, ttl, current); ok {
		t.Error("a current replica still opened the window")
	}
	stale := func(string, time.Time) bool { return false }
	if left, ok := s.LeaseCeiling(t0, limit, taken, ttl, stale); !ok || left != ttl {
		t.Errorf("a stale replica: %v %v, want the whole window", left, ok)
	}
}

// The successor: the member that keeps a key's replica is the one that
// takes it over when this node fails (the owner in the view without it),
// so a crash finds the replica where the key goes.
func TestSuccessorRule(t *testing.T) {
	prev, next := failed("n1")
	_ = next
	s := New(cfg("n1"), State{View: prev, Joined: true})
	own := keyWhere(t, func(hk string) bool { return owner(prev, hk) == "n1" })
	p, ok := s.Successor(limit, own)
	if !ok {
		t.Fatal("no successor for an owned key")
	}
	// The successor is who owns the key once n1 is dead.
	dead := view("n2", ring.Dead, ring.Alive, ring.Alive, ring.Alive, ring.Alive)
	if want := owner(dead, ring.HashKey(limit, own)); p != fwd(want, ByOwner) {
		t.Errorf("successor %+v, want %s (the owner after n1 fails)", p, want)
	}
	notMine := keyWhere(t, func(hk string) bool { return owner(prev, hk) == "n2" })
	if _, ok := s.Successor(limit, notMine); ok {
		t.Error("a successor for a key this node does not own")
	}
	// A successor that is not alive gets nothing.
	sus := view("n1", ring.Alive, ring.Suspect, ring.Suspect, ring.Suspect, ring.Suspect)
	s = New(cfg("n1"), State{View: sus, Joined: true})
	k := keyWhere(t, func(hk string) bool { return owner(sus, hk) == "n1" })
	if _, ok := s.Successor(limit, k); ok {
		t.Error("replicating to a suspect member")
	}
}

// HandTo: state held here goes to the key's owner in the view when that
// is another live, reachable member, and stays here otherwise.
func TestHandToRule(t *testing.T) {
	v := view("n1", ring.Alive, ring.Alive, ring.Dead)
	s := New(cfg("n1"), State{View: v, Joined: true})
	mine := keyWhere(t, func(hk string) bool { return owner(v, hk) == "n1" })
	theirs := keyWhere(t, func(hk string) bool { return owner(v, hk) == "n2" })
	if _, ok := s.HandTo(limit, mine); ok {
		t.Error("a key this node owns is handed away")
	}
	if p, ok := s.HandTo(limit, theirs); !ok || p != fwd("n2", ByOwner) {
		t.Errorf("a key n2 owns: %+v, %v; want a forward to n2", p, ok)
	}
	// The minority view of n1, n2 and a dead n3 still maps some keys to
	// n3 (the known ring); those stay here.
	minority := view("n1", ring.Alive, ring.Dead, ring.Dead)
	s = New(cfg("n1"), State{View: minority, Joined: true})
	dead := keyWhere(t, func(hk string) bool { return owner(minority, hk) == "n3" })
	if _, ok := s.HandTo(limit, dead); ok {
		t.Error("state handed to a dead owner")
	}
	// An owner without a peer address cannot take anything.
	noAddr := ring.NewView(1, "n1", []ring.Member{{Name: "n1", State: ring.Alive}, {Name: "n2", State: ring.Alive}})
	s = New(cfg("n1"), State{View: noAddr, Joined: true})
	far := keyWhere(t, func(hk string) bool { return owner(noAddr, hk) == "n2" })
	if _, ok := s.HandTo(limit, far); ok {
		t.Error("state handed to an owner with no peer address")
	}
}

// Serve: the rules for a take a peer forwarded here.
func TestServeRules(t *testing.T) {
	prev, next := failed("n1")
	c := cfg("n1")
	s := New(c, State{View: next, Joined: true, Failures: Observe(nil, prev, next, t0, c.FailureMemory), Changed: t0.Add(-time.Hour)})
	own := keyWhere(t, func(hk string) bool { return owner(prev, hk) == "n1" && owner(next, hk) == "n1" })
	taken := keyWhere(t, func(hk string) bool { return owner(prev, hk) == "n3" && owner(next, hk) == "n1" })
	n2s := keyWhere(t, func(hk string) bool { return owner(next, hk) == "n2" })
	n4s := keyWhere(t, func(hk string) bool { return owner(next, hk) == "n4" })
	for _, tc := range []struct {
		name, key, from string
		proxied         bool
		mark            Mark
		at              time.Time
		want            Placement
	}{
		{"own key", own, "n2", false, Mark{}, t0, Placement{Kind: Here}},
		{"taken over, inside the delay", taken, "n2", false, Mark{}, t0, Placement{Reason: TakeoverDelay}},
		{"taken over, after the delay", taken, "n2", false, Mark{}, t0.Add(time.Minute), Placement{Kind: Replica, Reason: TakenOver}},
		{"the sender's key: its view moved it here", n2s, "n2", false, Mark{}, t0, Placement{Kind: Here, Peer: "n2", Reason: SenderMoved}},
		{"a third member's key: pass it on", n4s, "n2", false, Mark{}, t0, fwd("n4", ByOwner)},
		{"a third member's key, already passed on", n4s, "n2", true, Mark{}, t0, Placement{Reason: Proxied, Peer: "n4"}},
		{"own key handed to n4", own, "n2", false, Mark{To: "n4"}, t0, fwd("n4", Moved)},
		{"own key handed to n4, proxied", own, "n2", true, Mark{To: "n4"}, t0, Placement{Reason: Proxied, Peer: "n4"}},
	} {
		if got := s.Serve(tc.at, limit, tc.key, tc.from, tc.proxied, tc.mark); got != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
	// Leaving: n1 routes by the view without itself, where the sender owns
	// the key only because n1 is going. A take pulls the bucket back from
	// the sender and is decided here (handed over again by the leave's
	// second push); a lease operation is refused (the table went to the
	// sender); other keys are passed on.
	out := next.Without("n1")
	ls := New(c, State{View: out, Known: next, Joined: true, Changed: t0.Add(-time.Hour)})
	n2out := keyWhere(t, func(hk string) bool { return owner(out, hk) == "n2" })
	n4out := keyWhere(t, func(hk string) bool { return owner(out, hk) == "n4" })
	if got := ls.Serve(t0, limit, n2out, "n2", false, Mark{}); got != (Placement{Kind: Here, Peer: "n2", Reason: SenderMoved}) {
		t.Errorf("leaving, a take of the sender's key: got %+v, want here, pulled back from the sender", got)
	}
	if got := ls.Serve(t0, limit, n4out, "n2", false, Mark{}); got != fwd("n4", ByOwner) {
		t.Errorf("leaving, a third member's key: got %+v, want a forward to n4", got)
	}
	if ls.ServesLease(limit, n2out, "n2") {
		t.Error("ServesLease: a leaving node serves the sender's lease key from its handed-off table")
	}
	if !s.ServesLease(limit, n2s, "n2") {
		t.Error("ServesLease: a member that is not leaving refuses the sender's moved key")
	}
	minority := view("n1", ring.Alive, ring.Dead, ring.Dead)
	s = New(c, State{View: minority, Joined: true})
	k := keyWhere(t, func(hk string) bool { return owner(minority, hk) == "n1" })
	if got := s.Serve(t0, limit, k, "n2", false, Mark{}); got != (Placement{Reason: Minority}) {
		t.Errorf("minority: got %+v", got)
	}
	if !s.ServesLease(limit, k, "n3") {
		t.Error("ServesLease: own key refused")
	}
	k2 := keyWhere(t, func(hk string) bool { return owner(minority, hk) == "n2" })
	if s.ServesLease(limit, k2, "n3") || !s.ServesLease(limit, k2, "n2") {
		t.Error("ServesLease: a third member's key must be refused, the sender's accepted")
	}
}

// Pull: within HandoffWindow of a view change, a new owner pulls a key's
// state from its owner before it, so a join does not start a moved key
// full (+B).
func TestPullRule(t *testing.T) {
	after := view("n4", alive(4)...)
	c := cfg("n4")
	s := New(c, State{View: after, Joined: true, Changed: t0})
	without := after.Without("n4")
	k := keyWhere(t, func(hk string) bool { return owner(after, hk) == "n4" && owner(without, hk) == "n2" })
	if p, ok := s.PullFrom(t0.Add(c.HandoffWindow-1), limit, k); !ok || p != fwd("n2", Moved) {
		t.Errorf("inside the window: %+v %v, want a pull from n2", p, ok)
	}
	if _, ok := s.PullFrom(t0.Add(c.HandoffWindow), limit, k); ok {
		t.Error("at the window's end: still pulling")
	}
	if !s.Recent(t0.Add(c.HandoffWindow-1)) || s.Recent(t0.Add(c.HandoffWindow)) {
		t.Error("Recent disagrees with the window")
	}
	// The previous owner unreachable (suspect): nothing to pull from.
	sus := view("n4", ring.Alive, ring.Suspect, ring.Alive, ring.Alive)
	s = New(c, State{View: sus, Joined: true, Changed: t0})
	susWithout := sus.Without("n4")
	k = keyWhere(t, func(hk string) bool { return owner(sus, hk) == "n4" && owner(susWithout, hk) == "n2" })
	if _, ok := s.PullFrom(t0, limit, k); ok {
		t.Error("pulling from a dead member")
	}
}

func TestObserveForgets(t *testing.T) {
	prev, next := failed("n1")
	fs := Observe(nil, prev, next, t0, time.Minute)
	if got := Observe(fs, next, next, t0.Add(time.Minute-1), time.Minute); len(got) != 1 {
		t.Errorf("forgot too early: %+v", got)
	}
	if got := Observe(fs, next, next, t0.Add(time.Minute), time.Minute); len(got) != 0 {
		t.Errorf("kept past memory: %+v", got)
	}
	if got := Observe(nil, nil, next, t0, time.Minute); len(got) != 0 {
		t.Errorf("first view recorded failures: %+v", got)
	}
	left := view("n1", ring.Alive, ring.Alive, ring.Left, ring.Alive, ring.Alive)
	if got := Observe(nil, prev, left, t0, time.Minute); len(got) != 0 {
		t.Errorf("a leave recorded as a failure: %+v", got)
	}
}

func BenchmarkTake(b *testing.B) {
	prev, next := failed("n1")
	c := cfg("n1")
	s := New(c, State{View: next, Joined: true, Failures: Observe(nil, prev, next, t0, c.FailureMemory)})
	b.ReportAllocs()
	for b.Loop() {
		_ = s.Take(t0, limit, "tenant:acme", Mark{})
	}
}

// TestQuietSince: failures detected less than the delay apart form one run
// that holds takeovers back until the delay after its latest failure.
func TestQuietSince(t *testing.T) {
	at := func(ms int) Failure { return Failure{At: t0.Add(time.Duration(ms) * time.Millisecond)} }
	d := 1200 * time.Millisecond
	fs := []Failure{at(0), at(400), at(1600)} // the 5-node split: gaps 0.4 s and 1.2 s
	for _, c := range []struct {
		now  int
		want time.Time
	}{
		{500, t0},                               // the run 0, 400: both count
		{1500, t0},                              // 1.1 s after the latest: the first still counts
		{1700, t0.Add(1600 * time.Millisecond)}, // 1600 is 1.2 s after 400: a new run
		{2900, t0.Add(2900*time.Millisecond + 1)}, // 1.3 s after the latest: nothing counts
	} {
		now := t0.Add(time.Duration(c.now) * time.Millisecond)
		var seen []Failure // the failures detected by now
		for _, f := range fs {
			if !f.At.After(now) {
				seen = append(seen, f)
			}
		}
		if got := quietSince(seen, now, d); !got.Equal(c.want) {
			t.Errorf("at %d ms: %v, want %v", c.now, got.Sub(t0), c.want.Sub(t0))
		}
	}
	// Before the fix, the failure at 0 stopped counting at 1200 ms although
	// the node was still detecting failures (400): that is the window the
	// 5-node split found.
	if got := quietSince(fs[:2], t0.Add(1300*time.Millisecond), d); !got.Equal(t0) {
		t.Errorf("at 1300 ms after failures at 0 and 400: %v, want the run from 0", got.Sub(t0))
	}
}
