package allot

import (
	"slices"
	"testing"
	"time"
)

var pol = Policy{Threshold: 50, Horizon: 100 * time.Millisecond, TTL: time.Second, MaxTokens: 40}

// hot meters demand of n per 10ms on k from t0 for d and returns the end.
func hot(p *Purse, k Key, d time.Duration, n int64) time.Time {
	at := t0
	for ; at.Before(t0.Add(d)); at = at.Add(10 * time.Millisecond) {
		for range n {
			p.TakeAt(at, k, 1)
		}
	}
	return at
}

func TestPurseAsksOnlyAboveThreshold(t *testing.T) {
	p := NewPurse(PurseConfig{})
	// 2 per 10ms is 200/s: over the threshold after a window.
	now := hot(p, kA, 300*time.Millisecond, 2)
	a, ok := p.AskAt(now, kA, pol)
	// The meter reads 175/s (halfway toward 200/s, three windows in): it
	// asks for 175/s over 100ms.
	if !ok || a.Want != 18 || a.Unspent != 0 || a.Demand != 175 {
		t.Fatalf("ask %+v, %v; want 18 tokens for 175/s", a, ok)
	}
	if _, ok := p.AskAt(now, kA, pol); ok {
		t.Fatal("a second ask while one is in flight")
	}
	cold := Key{Limit: "hot", Key: "cold"}
	p.TakeAt(now, cold, 1)
	if _, ok := p.AskAt(now.Add(time.Second), cold, pol); ok {
		t.Fatal("a cold key asked")
	}
}

func TestPurseSpendsAndRefreshes(t *testing.T) {
	p := NewPurse(PurseConfig{})
	now := hot(p, kA, 300*time.Millisecond, 2)
	sent := now
	a, _ := p.AskAt(now, kA, pol)
	now = now.Add(time.Millisecond)
	p.GrantedAt(now, sent, kA, 20, pol.TTL, 7)
	for i := range 20 {
		if o := p.TakeAt(now, kA, 1); o.Kind != Allowed || o.Remaining != int64(19-i) {
			t.Fatalf("take %d: %+v", i, o)
		}
		if i == 9 {
			// 10 left of a want of 18 or so: not yet low.
			if _, ok := p.AskAt(now, kA, pol); ok {
				t.Fatal("asked with more than half a want left")
			}
		}
	}
	if o := p.TakeAt(now, kA, 1); o.Kind != Miss {
		t.Fatalf("take beyond the allotment: %+v, want a miss", o)
	}
	a, ok := p.AskAt(now, kA, pol)
	if !ok || a.Unspent != 0 || a.Seq != 7 {
		t.Fatalf("refresh ask %+v, %v; want nothing unspent under the first answer's seq 7", a, ok)
	}
	p.GrantedAt(now, now, kA, 5, pol.TTL, 9)
	if o := p.TakeAt(now, kA, 3); o.Kind != Allowed || o.Remaining != 2 {
		t.Fatalf("after the refresh: %+v", o)
	}
	// The refund of an undone take.
	p.Refund(kA, 3)
	if o := p.TakeAt(now, kA, 5); o.Kind != Allowed || o.Remaining != 0 {
		t.Fatalf("after a refund: %+v", o)
	}
}

func TestPurseExpiryRunsFromTheAsk(t *testing.T) {
	p := NewPurse(PurseConfig{})
	now := hot(p, kA, 300*time.Millisecond, 2)
	sent := now
	p.AskAt(now, kA, pol)
	// The answer takes 400ms; the allotment still ends TTL after the ask.
	p.GrantedAt(sent.Add(400*time.Millisecond), sent, kA, 10, pol.TTL, 7)
	if o := p.TakeAt(sent.Add(pol.TTL-time.Nanosecond), kA, 1); o.Kind != Allowed {
		t.Fatalf("just before the holder's deadline: %+v", o)
	}
	if o := p.TakeAt(sent.Add(pol.TTL), kA, 1); o.Kind != Miss {
		t.Fatalf("at the holder's deadline: %+v, want a miss", o)
	}
	if got, seq := p.Return(sent.Add(pol.TTL), kA); got != 0 || seq != 7 {
		t.Fatalf("an expired allotment returned %d tokens under seq %d, want 0 under 7", got, seq)
	}
}

func TestPurseKeepsADenial(t *testing.T) {
	p := NewPurse(PurseConfig{})
	now := hot(p, kA, 300*time.Millisecond, 2)
	p.AskAt(now, kA, pol)
	p.DeniedAt(now, kA, 250*time.Millisecond, 8)
	// The takes go on, denied here, and still metered.
	for d := 10 * time.Millisecond; d < 250*time.Millisecond; d += 10 * time.Millisecond {
		for range 2 {
			if o := p.TakeAt(now.Add(d), kA, 1); o.Kind != Denied || o.RetryAfter != 250*time.Millisecond-d {
				t.Fatalf("at +%v, during the denial: %+v", d, o)
			}
		}
		if _, ok := p.AskAt(now.Add(d), kA, pol); ok {
			t.Fatal("asked while the denial holds")
		}
	}
	// Once it ended the key is still contended: takes are denied here for
	// the denial's length while the next ask goes out, not forwarded.
	end := now.Add(250 * time.Millisecond)
	if o := p.TakeAt(end, kA, 1); o.Kind != Denied || o.RetryAfter != 250*time.Millisecond {
		t.Fatalf("after the denial, contended: %+v, want a denial of 250ms", o)
	}
	a, ok := p.AskAt(end, kA, pol)
	if !ok || a.Seq != 8 {
		t.Fatalf("ask once the denial ended: %+v, %v; want one under the denial's seq 8", a, ok)
	}
	// A grant of less than asked leaves it contended; a grant of all it
	// asked ends that: a take it cannot cover then goes to the owner.
	p.GrantedAt(end, end, kA, a.Want-1, pol.TTL, 9)
	for range a.Want - 1 {
		if o := p.TakeAt(end, kA, 1); o.Kind != Allowed {
			t.Fatalf("within the grant: %+v", o)
		}
	}
	if o := p.TakeAt(end, kA, 1); o.Kind != Denied {
		t.Fatalf("past a partial grant: %+v, want a denial (contended)", o)
	}
	a, _ = p.AskAt(end, kA, pol)
	p.GrantedAt(end, end, kA, a.Want, pol.TTL, 10)
	for range a.Want {
		p.TakeAt(end, kA, 1)
	}
	if o := p.TakeAt(end, kA, 1); o.Kind != Miss {
		t.Fatalf("past a full grant: %+v, want a miss", o)
	}
}

func TestPurseTakeAllIsOneStep(t *testing.T) {
	p := NewPurse(PurseConfig{})
	kB := Key{Limit: "hot", Key: "b"}
	hot(p, kA, 300*time.Millisecond, 2)
	now := hot(p, kB, 300*time.Millisecond, 2)
	for _, k := range []Key{kA, kB} {
		p.AskAt(now, k, pol)
		p.GrantedAt(now, now, k, 3, pol.TTL, 7)
	}
	if o := p.TakeAllAt(now, []Key{kA, kB}, []int64{2, 4}); o.Kind != Miss {
		t.Fatalf("one key short: %+v, want a miss", o)
	}
	if o := p.TakeAllAt(now, []Key{kA, kB}, []int64{2, 3}); o.Kind != Allowed || o.Remaining != 0 {
		t.Fatalf("both covered: %+v", o)
	}
	if got, _ := p.Return(now, kA); got != 1 {
		t.Fatalf("returned %d of kA, want 1 (a miss spends nothing)", got)
	}
	p.AskAt(now.Add(time.Second), kB, pol)
	p.DeniedAt(now.Add(time.Second), kB, time.Second, 8)
	if o := p.TakeAllAt(now.Add(time.Second), []Key{kA, kB}, []int64{1, 1}); o.Kind != Denied {
		t.Fatalf("a denial held for one key: %+v", o)
	}
}

func TestPurseIdleAndBounds(t *testing.T) {
	p := NewPurse(PurseConfig{MaxHeld: 1})
	now := hot(p, kA, 300*time.Millisecond, 2)
	p.AskAt(now, kA, pol)
	p.GrantedAt(now, now, kA, 10, pol.TTL, 7)
	kB := Key{Limit: "hot", Key: "b"}
	hot(p, kB, 300*time.Millisecond, 2)
	if _, ok := p.AskAt(now, kB, pol); ok {
		t.Fatal("a second key held past MaxHeld")
	}
	if got := p.IdleAt(now.Add(500 * time.Millisecond)); len(got) != 0 {
		t.Fatalf("idle after 500ms: %v", got)
	}
	if got := p.IdleAt(now.Add(time.Second)); !slices.Equal(got, []Key{kA}) {
		t.Fatalf("idle after 1s: %v, want kA", got)
	}
	if got, seq := p.Return(now.Add(time.Second-time.Millisecond), kA); got != 10 || seq != 7 || p.Len() != 0 {
		t.Fatalf("returned %d under seq %d, %d held", got, seq, p.Len())
	}
	// A key returned while its ask was in flight ignores the late answer.
	p.GrantedAt(now, now, kA, 10, pol.TTL, 7)
	if p.Len() != 0 {
		t.Fatal("a late grant revived a returned key")
	}
}
