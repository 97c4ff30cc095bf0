package lease

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

// params is the limit most scenarios use: 2 permits, 10s leases up to 30s,
// a queue of 2 waiting up to 5s.
var params = Params{Permits: 2, DefaultTTL: 10 * time.Second, MaxTTL: 30 * time.Second, QueueLength: 2, MaxWait: 5 * time.Second}

// step is one line of a scenario: at time `at` (since t0), do op for holder
// who, and expect the step's rendering (see runner.do) to equal want.
type step struct {
	at   time.Duration
	op   string // acquire | renew | release | expire | cancel
	who  string
	ttl  time.Duration
	wait time.Duration
	p    *Params // nil means params
	want string
}

// runner plays steps against a Table and renders each result as a string,
// naming leases "holder#fencing" and waiters by holder.
type runner struct {
	t       *testing.T
	tbl     *Table
	ids     map[string]string // holder -> latest lease id
	tickets map[uint64]string // waiter ticket -> holder
	lastTok uint64            // the highest fencing token seen in any grant
}

func newRunner(t *testing.T, c Config) *runner {
	t.Helper()
	tbl, err := NewTable(c)
	if err != nil {
		t.Fatal(err)
	}
	return &runner{t: t, tbl: tbl, ids: map[string]string{}, tickets: map[uint64]string{}}
}

func (r *runner) grant(g Grant) string {
	if g.Fencing <= r.lastTok {
		r.t.Errorf("fencing token %d not above %d", g.Fencing, r.lastTok)
	}
	r.lastTok = g.Fencing
	r.ids[g.Holder] = g.ID
	return fmt.Sprintf("%s#%d until %v", g.Holder, g.Fencing, g.Expires.Sub(t0))
}

func (r *runner) events(ev Events) string {
	var s strings.Builder
	for _, g := range ev.Expired {
		fmt.Fprintf(&s, " | expired %s#%d", g.Holder, g.Fencing)
	}
	for _, g := range ev.Granted {
		if r.tickets[g.Waiter] != g.Holder {
			r.t.Errorf("grant to ticket %d has holder %q, want %q", g.Waiter, g.Holder, r.tickets[g.Waiter])
		}
		s.WriteString(" | granted " + r.grant(g))
	}
	for _, w := range ev.Dropped {
		s.WriteString(" | dropped " + r.tickets[w])
	}
	return s.String()
}

func (r *runner) do(st step) string {
	p := params
	if st.p != nil {
		p = *st.p
	}
	now := at(st.at)
	switch st.op {
	case "acquire":
		out, ev, err := r.tbl.Acquire(now, Request{Limit: "db", Key: "acme", Holder: st.who, TTL: st.ttl, Wait: st.wait}, p)
		if err != nil {
			return "error " + err.Error() + r.events(ev)
		}
		switch out.Status {
		case Granted:
			return "granted " + r.grant(out.Grant) + r.events(ev)
		case Queued:
			r.tickets[out.Waiter] = st.who
			return fmt.Sprintf("queued %s until %v", st.who, out.Deadline.Sub(t0)) + r.events(ev)
		default:
			return fmt.Sprintf("refused %v retry=%v", out.Reason, out.RetryAfter) + r.events(ev)
		}
	case "renew":
		g, ev, err := r.tbl.Renew(now, r.ids[st.who], st.ttl, p)
		if errors.Is(err, ErrNotFound) {
			return "not found" + r.events(ev)
		}
		if err != nil {
			return "error " + err.Error()
		}
		return fmt.Sprintf("renewed %s#%d until %v", g.Holder, g.Fencing, g.Expires.Sub(t0)) + r.events(ev)
	case "release":
		ok, ev := r.tbl.Release(now, r.ids[st.who])
		if !ok {
			return "not held" + r.events(ev)
		}
		return "released" + r.events(ev)
	case "expire":
		return "expire" + r.events(r.tbl.Expire(now))
	case "cancel":
		for tk, who := range r.tickets {
			if who == st.who {
				if r.tbl.Cancel(tk) {
					return "cancelled"
				}
			}
		}
		return "gone"
	}
	r.t.Fatalf("unknown op %q", st.op)
	return ""
}

func play(t *testing.T, steps []step) *runner {
	t.Helper()
	r := newRunner(t, LocalConfig())
	for i, st := range steps {
		if got := r.do(st); got != st.want {
			t.Errorf("step %d (%s %s at %v):\n got  %s\n want %s", i, st.op, st.who, st.at, got, st.want)
		}
	}
	return r
}

const s = time.Second

func TestPermitsExpiryRenewRelease(t *testing.T) {
	play(t, []step{
		{at: 0, op: "acquire", who: "a", want: "granted a#1 until 10s"},
		{at: 1 * s, op: "acquire", who: "b", want: "granted b#2 until 11s"},
		{at: 2 * s, op: "acquire", who: "c", want: "refused busy retry=8s"},
		{at: 3 * s, op: "release", who: "a", want: "released"},
		{at: 3 * s, op: "release", who: "a", want: "not held"}, // double release is harmless
		{at: 3 * s, op: "acquire", who: "c", want: "granted c#3 until 13s"},
		{at: 4 * s, op: "acquire", who: "d", want: "refused busy retry=7s"},
		{at: 5 * s, op: "renew", who: "b", want: "renewed b#2 until 15s"}, // renew extends, keeps the token
		{at: 10*s + 999*time.Millisecond, op: "acquire", who: "d", want: "refused busy retry=2.001s"},
		{at: 13 * s, op: "acquire", who: "d", want: "granted d#4 until 23s | expired c#3"}, // expiry at 13s frees c's permit
		{at: 13 * s, op: "renew", who: "c", want: "not found"},                             // renew after expiry fails
		{at: 13 * s, op: "release", who: "c", want: "not held"},
		{at: 14 * s, op: "acquire", who: "e", want: "refused busy retry=1s"},
		{at: 15 * s, op: "expire", want: "expire | expired b#2"},
		{at: 15 * s, op: "renew", who: "b", want: "not found"},
		{at: 15 * s, op: "acquire", who: "a", want: "granted a#5 until 25s"}, // a new token for an old holder
		{at: 16 * s, op: "release", who: "d", want: "released"},
		{at: 16 * s, op: "acquire", who: "f", want: "granted f#6 until 26s"},
	})
}

func TestTTLClamp(t *testing.T) {
	noMax := params
	noMax.MaxTTL = 0
	play(t, []step{
		{at: 0, op: "acquire", who: "a", ttl: time.Hour, want: "granted a#1 until 30s"},                // clamped to MaxTTL
		{at: 0, op: "acquire", who: "b", ttl: 2 * s, want: "granted b#2 until 2s"},                     // below max: as asked
		{at: 1 * s, op: "renew", who: "b", ttl: time.Hour, want: "renewed b#2 until 31s"},              // renew clamps too
		{at: 2 * s, op: "renew", who: "b", want: "renewed b#2 until 12s"},                              // zero: DefaultTTL
		{at: 3 * s, op: "renew", who: "b", ttl: time.Minute, p: &noMax, want: "renewed b#2 until 13s"}, // MaxTTL 0 = DefaultTTL
		{at: 3 * s, op: "renew", who: "b", ttl: -s, want: "error lease: invalid argument: negative ttl -1s"},
	})
}

func TestQueueFIFOAndMaxWait(t *testing.T) {
	play(t, []step{
		{at: 0, op: "acquire", who: "a", want: "granted a#1 until 10s"},
		{at: 0, op: "acquire", who: "b", ttl: 20 * s, want: "granted b#2 until 20s"},
		{at: 1 * s, op: "acquire", who: "c", wait: 3 * s, want: "queued c until 4s"},
		{at: 2 * s, op: "acquire", who: "d", wait: time.Hour, want: "queued d until 7s"}, // clamped to MaxWait
		{at: 2 * s, op: "acquire", who: "e", wait: s, want: "refused queue_full retry=8s"},
		{at: 2 * s, op: "acquire", who: "e", want: "refused busy retry=8s"},
		{at: 3 * s, op: "release", who: "a", want: "released | granted c#3 until 13s"}, // FIFO: c before d
		{at: 4 * s, op: "acquire", who: "f", wait: 2 * s, want: "queued f until 6s"},
		{at: 5 * s, op: "release", who: "b", want: "released | granted d#4 until 15s"},
		{at: 6 * s, op: "expire", want: "expire | dropped f"}, // f's wait ran out
		{at: 6 * s, op: "acquire", who: "g", wait: 10 * s, want: "queued g until 11s"},
		{at: 11 * s, op: "expire", want: "expire | dropped g"}, // max_wait, not the 10s asked
	})
}

func TestQueueTies(t *testing.T) {
	one := Params{Permits: 1, DefaultTTL: 10 * s, QueueLength: 4, MaxWait: 10 * s}
	play(t, []step{
		{at: 0, op: "acquire", who: "a", p: &one, want: "granted a#1 until 10s"},
		{at: 5 * s, op: "acquire", who: "b", wait: 5 * s, p: &one, want: "queued b until 10s"},
		{at: 6 * s, op: "acquire", who: "c", wait: 8 * s, p: &one, want: "queued c until 14s"},
		// At 10s b's wait and a's lease end together: b is no longer parked
		// when the permit frees, so c gets it.
		{at: 10 * s, op: "expire", p: &one, want: "expire | expired a#1 | granted c#2 until 20s | dropped b"},
	})
}

func TestLateExpireReplaysInOrder(t *testing.T) {
	one := Params{Permits: 1, DefaultTTL: 10 * s, QueueLength: 4, MaxWait: 10 * s}
	play(t, []step{
		{at: 0, op: "acquire", who: "a", ttl: 2 * s, p: &one, want: "granted a#1 until 2s"},
		{at: 0, op: "acquire", who: "b", wait: s, p: &one, want: "queued b until 1s"},
		{at: 0, op: "acquire", who: "c", wait: 4 * s, p: &one, want: "queued c until 4s"},
		// The timer fires late, at 5s: b ran out at 1s, a's permit freed at
		// 2s went to c (parked until 4s), and c's lease lives from 5s.
		{at: 5 * s, op: "expire", want: "expire | expired a#1 | granted c#2 until 15s | dropped b"},
	})
}

func TestCancel(t *testing.T) {
	play(t, []step{
		{at: 0, op: "acquire", who: "a", want: "granted a#1 until 10s"},
		{at: 0, op: "acquire", who: "b", want: "granted b#2 until 10s"},
		{at: 1 * s, op: "acquire", who: "c", wait: 5 * s, want: "queued c until 6s"},
		{at: 1 * s, op: "acquire", who: "d", wait: 5 * s, want: "queued d until 6s"},
		{at: 2 * s, op: "cancel", who: "c", want: "cancelled"},
		{at: 2 * s, op: "cancel", who: "c", want: "gone"},
		{at: 2 * s, op: "acquire", who: "e", wait: 5 * s, want: "queued e until 7s"}, // the slot c left
		{at: 3 * s, op: "release", who: "a", want: "released | granted d#3 until 13s"},
		{at: 3 * s, op: "cancel", who: "d", want: "gone"}, // already granted
	})
}

func TestParamsChange(t *testing.T) {
	three := params
	three.Permits = 3
	one := params
	one.Permits = 1
	play(t, []step{
		{at: 0, op: "acquire", who: "a", want: "granted a#1 until 10s"},
		{at: 0, op: "acquire", who: "b", want: "granted b#2 until 10s"},
		{at: 1 * s, op: "acquire", who: "c", wait: 5 * s, want: "queued c until 6s"},
		// Permits grow: the parked c is served before the newcomer d.
		{at: 2 * s, op: "acquire", who: "d", p: &three, want: "refused busy retry=8s | granted c#3 until 12s"},
		// Permits shrink: all three leases stay, nothing new until below 1.
		{at: 3 * s, op: "acquire", who: "d", p: &one, want: "refused busy retry=7s"},
		{at: 4 * s, op: "release", who: "a", want: "released"},
		{at: 4 * s, op: "release", who: "b", want: "released"},
		{at: 4 * s, op: "acquire", who: "d", p: &one, want: "refused busy retry=8s"},
		{at: 5 * s, op: "release", who: "c", want: "released"},
		{at: 5 * s, op: "acquire", who: "d", p: &one, want: "granted d#4 until 15s"},
	})
}

func TestTimeBackwards(t *testing.T) {
	play(t, []step{
		{at: 10 * s, op: "acquire", who: "a", want: "granted a#1 until 20s"},
		{at: 5 * s, op: "acquire", who: "b", want: "granted b#2 until 20s"}, // treated as 10s
		{at: 19 * s, op: "renew", who: "a", want: "renewed a#1 until 29s"},
		{at: 0, op: "expire", want: "expire"}, // going back expires nothing
		{at: 20 * s, op: "expire", want: "expire | expired b#2"},
		{at: 1 * s, op: "renew", who: "b", want: "not found"}, // and resurrects nothing
	})
}

func TestOverloaded(t *testing.T) {
	c := LocalConfig()
	c.MaxLeases, c.MaxWaiters = 2, 1
	tbl, err := NewTable(c)
	if err != nil {
		t.Fatal(err)
	}
	acq := func(key string, wait time.Duration) (Outcome, error) {
		out, _, err := tbl.Acquire(t0, Request{Limit: "db", Key: key, Wait: wait}, params)
		return out, err
	}
	for _, k := range []string{"k1", "k1"} {
		if out, err := acq(k, 0); err != nil || out.Status != Granted {
			t.Fatalf("acquire %s: %v %v", k, out.Status, err)
		}
	}
	if _, err := acq("k2", 0); !errors.Is(err, ErrOverloaded) {
		t.Fatalf("grant beyond MaxLeases: err %v, want ErrOverloaded", err)
	}
	if tbl.Keys() != 1 {
		t.Fatalf("a refused key left state: %d keys", tbl.Keys())
	}
	if out, err := acq("k1", s); err != nil || out.Status != Queued {
		t.Fatalf("park: %v %v", out.Status, err)
	}
	if _, err := acq("k1", s); !errors.Is(err, ErrOverloaded) {
		t.Fatalf("park beyond MaxWaiters: err %v, want ErrOverloaded", err)
	}
}

func TestInvalid(t *testing.T) {
	tbl, err := NewTable(LocalConfig())
	if err != nil {
		t.Fatal(err)
	}
	bad := []struct {
		r Request
		p Params
	}{
		{Request{Key: "k"}, params},
		{Request{Limit: "l"}, params},
		{Request{Limit: "l", Key: strings.Repeat("k", MaxNameBytes)}, params},
		{Request{Limit: "l", Key: "k", TTL: -1}, params},
		{Request{Limit: "l", Key: "k", Wait: -1}, params},
		{Request{Limit: "l", Key: "k"}, Params{}},
		{Request{Limit: "l", Key: "k"}, Params{Permits: 1, DefaultTTL: s, MaxTTL: s / 2}},
		{Request{Limit: "l", Key: "k"}, Params{Permits: 1, DefaultTTL: s, QueueLength: 1}},
		{Request{Limit: "l", Key: "k"}, Params{Permits: 1, DefaultTTL: s, QueueLength: -1}},
		{Request{Limit: "l", Key: "k"}, Params{Permits: 1, DefaultTTL: s, MaxWait: -1}},
	}
	for i, c := range bad {
		if _, _, err := tbl.Acquire(t0, c.r, c.p); !errors.Is(err, ErrInvalid) {
			t.Errorf("case %d: err %v, want ErrInvalid", i, err)
		}
	}
	if tbl.Keys() != 0 || tbl.Len() != 0 {
		t.Errorf("invalid requests changed state")
	}
	for i, c := range []Config{{}, {MaxLeases: 1, MaxWaiters: -1, FirstFencing: 1}, {MaxLeases: 1, FirstFencing: MaxFencing + 1}} {
		if _, err := NewTable(c); !errors.Is(err, ErrInvalid) {
			t.Errorf("config %d: err %v, want ErrInvalid", i, err)
		}
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Errorf("DefaultConfig: %v", err)
	}
}

func TestNextAndCounts(t *testing.T) {
	tbl, _ := NewTable(LocalConfig())
	if _, ok := tbl.Next(); ok {
		t.Fatal("empty table has a next instant")
	}
	req := Request{Limit: "db", Key: "acme", Wait: 3 * s}
	mustGrant(t, tbl, at(0), req, params)
	mustGrant(t, tbl, at(1*s), req, params)
	if next, ok := tbl.Next(); !ok || !next.Equal(at(10*s)) {
		t.Fatalf("Next = %v %v, want 10s", next.Sub(t0), ok)
	}
	if out, _, err := tbl.Acquire(at(2*s), req, params); err != nil || out.Status != Queued {
		t.Fatalf("third acquire: %v %v, want queued until 5s", out.Status, err)
	}
	if next, _ := tbl.Next(); !next.Equal(at(5 * s)) {
		t.Fatalf("Next = %v, want the waiter's deadline 5s", next.Sub(t0))
	}
	if tbl.Held("db", "acme") != 2 || tbl.Queued("db", "acme") != 1 || tbl.Len() != 2 || tbl.Waiting() != 1 || tbl.Keys() != 1 {
		t.Fatalf("counts: held %d queued %d len %d waiting %d keys %d",
			tbl.Held("db", "acme"), tbl.Queued("db", "acme"), tbl.Len(), tbl.Waiting(), tbl.Keys())
	}
	if ev := tbl.Expire(at(4 * s)); !ev.Empty() {
		t.Fatalf("nothing is due at 4s: %+v", ev)
	}
	ev := tbl.Expire(at(100 * s))
	if ev.Empty() || len(ev.Dropped) != 1 || len(ev.Expired) != 2 || len(ev.Granted) != 0 {
		t.Fatalf("events %+v", ev)
	}
	if tbl.Keys() != 0 || tbl.Len() != 0 || tbl.Waiting() != 0 {
		t.Fatal("an empty key kept state")
	}
	if _, ok := tbl.Next(); ok {
		t.Fatal("drained table has a next instant")
	}
}

func TestStrings(t *testing.T) {
	for v, want := range map[fmt.Stringer]string{
		Granted: "granted", Queued: "queued", Refused: "refused",
		ReasonNone: "", ReasonBusy: "busy", ReasonQueueFull: "queue_full",
	} {
		if v.String() != want {
			t.Errorf("%#v.String() = %q, want %q", v, v.String(), want)
		}
	}
}

func TestFencingAcrossKeysAndForgottenKeys(t *testing.T) {
	tbl, _ := NewTable(Config{MaxLeases: 10, FirstFencing: 1000})
	last := uint64(0)
	for i := range 20 {
		key := []string{"a", "b"}[i%2]
		out, _, err := tbl.Acquire(at(time.Duration(i)*s), Request{Limit: "db", Key: key, TTL: s / 2}, params)
		if err != nil || out.Status != Granted {
			t.Fatalf("acquire %d: %v %v", i, out.Status, err)
		}
		if out.Grant.Fencing <= last || out.Grant.Fencing < 1000 {
			t.Fatalf("token %d after %d", out.Grant.Fencing, last)
		}
		last = out.Grant.Fencing
		if i%3 == 0 {
			tbl.Release(at(time.Duration(i)*s), out.Grant.ID)
		}
	}
}

func TestHolds(t *testing.T) {
	tb, err := NewTable(LocalConfig())
	if err != nil {
		t.Fatal(err)
	}
	p := Params{Permits: 1, DefaultTTL: time.Second}
	now := time.Unix(100, 0)
	out, _, err := tb.Acquire(now, Request{Limit: "l", Key: "k"}, p)
	if err != nil || out.Status != Granted {
		t.Fatalf("Acquire = %+v, %v", out, err)
	}
	if !tb.Holds(out.Grant.ID) || tb.Holds("other") {
		t.Fatal("Holds disagrees with the table")
	}
	tb.Release(now, out.Grant.ID)
	if tb.Holds(out.Grant.ID) {
		t.Fatal("a released lease is still held")
	}
}
