package allot

import (
	"errors"
	"reflect"
	"testing"
	"time"
)

var kA = Key{Limit: "hot", Key: "a"}

func TestLedgerPutDropOutstanding(t *testing.T) {
	l := NewLedger(3)
	if l.Holds(kA) || l.Outstanding(kA) != 0 {
		t.Fatal("an empty ledger holds something")
	}
	must(t, l.Put(kA, Holding{Holder: "n2", Tokens: 10, Expires: t0.Add(time.Second)}))
	must(t, l.Put(kA, Holding{Holder: "n1", Tokens: 5, Expires: t0.Add(2 * time.Second)}))
	if got := l.Outstanding(kA); got != 15 {
		t.Fatalf("outstanding %d, want 15", got)
	}
	// A refresh replaces the holder's holding.
	must(t, l.Put(kA, Holding{Holder: "n2", Tokens: 4, Expires: t0.Add(3 * time.Second)}))
	if got := l.Outstanding(kA); got != 9 || l.Len() != 2 || l.Total() != 9 {
		t.Fatalf("after a refresh: outstanding %d, len %d, total %d; want 9, 2, 9", got, l.Len(), l.Total())
	}
	if hs := l.Holdings(kA); len(hs) != 2 || hs[0].Holder != "n1" || hs[1].Holder != "n2" {
		t.Fatalf("holdings %+v, want n1 then n2", hs)
	}
	// A holding of no tokens is a return.
	must(t, l.Put(kA, Holding{Holder: "n1", Tokens: 0}))
	if got := l.Outstanding(kA); got != 4 || l.Len() != 1 {
		t.Fatalf("after a zero holding: outstanding %d, len %d", got, l.Len())
	}
	h, ok := l.Drop(kA, "n2")
	if !ok || h.Tokens != 4 || l.Holds(kA) || l.Len() != 0 || l.Total() != 0 {
		t.Fatalf("Drop = %+v, %v; holds %v", h, ok, l.Holds(kA))
	}
	if _, ok := l.Drop(kA, "n2"); ok {
		t.Fatal("dropped twice")
	}
}

func TestLedgerBounded(t *testing.T) {
	l := NewLedger(2)
	must(t, l.Put(kA, Holding{Holder: "a", Tokens: 1}))
	must(t, l.Put(Key{"hot", "b"}, Holding{Holder: "a", Tokens: 1}))
	if err := l.Put(kA, Holding{Holder: "b", Tokens: 1}); !errors.Is(err, ErrFull) {
		t.Fatalf("a third holding: %v, want ErrFull", err)
	}
	if err := l.Put(Key{"hot", "c"}, Holding{Holder: "a", Tokens: 1}); !errors.Is(err, ErrFull) || l.Holds(Key{"hot", "c"}) {
		t.Fatalf("a third key: %v, want ErrFull and nothing kept", err)
	}
	// Replacing a holding needs no room.
	must(t, l.Put(kA, Holding{Holder: "a", Tokens: 7}))
	if l.Outstanding(kA) != 7 {
		t.Fatal("a replacement at the bound was refused")
	}
}

func TestLedgerExpiredInOrder(t *testing.T) {
	l := NewLedger(10)
	must(t, l.Put(kA, Holding{Holder: "late", Tokens: 1, Expires: t0.Add(3 * time.Second)}))
	must(t, l.Put(kA, Holding{Holder: "early", Tokens: 1, Expires: t0.Add(time.Second)}))
	must(t, l.Put(kA, Holding{Holder: "mid", Tokens: 1, Expires: t0.Add(2 * time.Second)}))
	for _, st := range []struct {
		at   time.Duration
		want []string
	}{
		{999 * time.Millisecond, nil},
		{time.Second, []string{"early"}}, // expired at its Expires
		{2500 * time.Millisecond, []string{"early", "mid"}},
		{time.Hour, []string{"early", "mid", "late"}},
	} {
		var got []string
		for _, h := range l.Expired(t0.Add(st.at), kA) {
			got = append(got, h.Holder)
		}
		if !reflect.DeepEqual(got, st.want) {
			t.Errorf("at +%v: expired %v, want %v", st.at, got, st.want)
		}
	}
}

func TestLedgerShareIsProportional(t *testing.T) {
	const w = 100 * time.Millisecond
	l := NewLedger(10)
	// Alone, with an owner that decides nothing itself: all of it.
	if got := l.Share(t0, kA, "n2", 100, 50, w); got != 50 {
		t.Fatalf("a lone holder's share %d, want 50", got)
	}
	must(t, l.Put(kA, Holding{Holder: "n2", Tokens: 10, Expires: t0.Add(time.Second), Demand: 300}))
	// n3 asks with demand 100 against n2's 300: a quarter.
	if got := l.Share(t0, kA, "n3", 100, 80, w); got != 20 {
		t.Fatalf("n3's share %d, want 20", got)
	}
	// n2's own ask counts its new demand, not its recorded one.
	if got := l.Share(t0, kA, "n2", 100, 80, w); got != 80 {
		t.Fatalf("n2's share %d, want 80 (it is alone)", got)
	}
	// The owner's own demand weighs too: 20 per window is 200/s after two windows.
	for i := range 3 {
		l.AddOwner(t0.Add(time.Duration(i)*w), kA, 20, w)
	}
	ownerRate := 175.0 // (0+200)/2, (100+200)/2, (150+200)/2
	if got, want := l.Share(t0.Add(3*w), kA, "n3", 100, 90, w), int64(90*100/(100+300+ownerRate)); got != want {
		t.Fatalf("with the owner's demand: %d, want %d", got, want)
	}
	// An expired holding no longer weighs.
	if got := l.Share(t0.Add(time.Hour), kA, "n3", 100, 90, w); got != 90 {
		t.Fatalf("after n2 expired (and the owner went idle): %d, want 90", got)
	}
	if l.Share(t0, kA, "n3", 0, 90, w) != 0 || l.Share(t0, kA, "n3", 100, 0, w) != 0 {
		t.Fatal("a share of nothing, or for no demand, is not zero")
	}
}

func TestLedgerExportImportConservative(t *testing.T) {
	a := NewLedger(10)
	must(t, a.Put(kA, Holding{Holder: "n2", Tokens: 10, Expires: t0.Add(2 * time.Second), Demand: 5}))
	must(t, a.Put(Key{"hot", "b"}, Holding{Holder: "n3", Tokens: 1, Expires: t0.Add(time.Second)}))
	es := a.Export(t0, func(k Key) bool { return k == kA }, true)
	if len(es) != 1 || es[0].Remaining != 2*time.Second || a.Holds(kA) || !a.Holds(Key{"hot", "b"}) || a.Len() != 1 {
		t.Fatalf("export %+v; a holds kA %v", es, a.Holds(kA))
	}
	// The receiver's clock differs; expiry is relative. It already holds
	// a smaller, later copy: the larger tokens and the later expiry win.
	b := NewLedger(10)
	t1 := t0.Add(time.Hour)
	must(t, b.Put(kA, Holding{Holder: "n2", Tokens: 3, Expires: t1.Add(5 * time.Second)}))
	must(t, b.Import(t1, append(es, Entry{Key: kA, Holder: "gone", Tokens: 9, Remaining: 0})))
	h, ok := b.Get(kA, "n2")
	if !ok || h.Tokens != 10 || !h.Expires.Equal(t1.Add(5*time.Second)) {
		t.Fatalf("imported %+v, want 10 tokens until +5s", h)
	}
	if _, ok := b.Get(kA, "gone"); ok {
		t.Fatal("an expired entry was imported")
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestLedgerExportKey(t *testing.T) {
	l := NewLedger(10)
	kB := Key{Limit: "hot", Key: "b"}
	must(t, l.Put(kA, Holding{Holder: "n1", Tokens: 3, Expires: t0.Add(time.Second), Seq: 7}))
	must(t, l.Put(kA, Holding{Holder: "n2", Tokens: 4, Expires: t0.Add(2 * time.Second), Seq: 8}))
	must(t, l.Put(kB, Holding{Holder: "n1", Tokens: 5, Expires: t0.Add(time.Second)}))
	want := []Entry{
		{Key: kA, Holder: "n1", Tokens: 3, Remaining: time.Second, Seq: 7},
		{Key: kA, Holder: "n2", Tokens: 4, Remaining: 2 * time.Second, Seq: 8},
	}
	if got := l.ExportKey(t0, kA, false); !reflect.DeepEqual(got, want) || l.Len() != 3 {
		t.Fatalf("ExportKey = %+v (len %d), want %+v", got, l.Len(), want)
	}
	if got := l.ExportKey(t0, kA, true); !reflect.DeepEqual(got, want) || l.Len() != 1 || l.Total() != 5 || l.Holds(kA) {
		t.Fatalf("ExportKey removing = %+v; len %d, total %d", got, l.Len(), l.Total())
	}
	if got := l.ExportKey(t0, kA, true); got != nil {
		t.Fatalf("ExportKey of nothing = %+v", got)
	}
}

func TestLedgerClaims(t *testing.T) {
	l := NewLedger(3)
	if err := l.Claim(kA, "a", 2, t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := l.Claim(kA, "a", 3, t0.Add(time.Second)); err != nil { // replaces
		t.Fatal(err)
	}
	if err := l.Claim(kA, "b", 4, t0.Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := l.Put(kA, Holding{Holder: "c", Tokens: 1, Expires: t0.Add(time.Second)}); err != nil {
		t.Fatal(err)
	}
	if l.Len() != 3 || !l.Holds(kA) {
		t.Fatalf("len %d, holds %v: want 2 claims and a holding", l.Len(), l.Holds(kA))
	}
	if err := l.Claim(kA, "d", 1, t0.Add(time.Second)); !errors.Is(err, ErrFull) {
		t.Fatalf("a claim beyond the limit: %v, want ErrFull", err)
	}
	if got := l.Claimed(t0, kA, ""); got != 7 {
		t.Fatalf("claimed %d, want 7", got)
	}
	if got := l.Claimed(t0, kA, "b"); got != 3 {
		t.Fatalf("claimed except b %d, want 3", got)
	}
	// The holding goes; the claims keep the book.
	l.Drop(kA, "c")
	if !l.Holds(kA) {
		t.Fatal("the book went with its last holding while claims remain")
	}
	// a's claim expires at 1s and is forgotten; b's is taken.
	if got := l.Claimed(t0.Add(time.Second), kA, ""); got != 4 || l.Len() != 1 {
		t.Fatalf("claimed after a's expiry %d (len %d), want 4 (1)", got, l.Len())
	}
	if got := l.TakeClaim(t0.Add(time.Second), kA, "b"); got != 4 {
		t.Fatalf("TakeClaim %d, want 4", got)
	}
	if l.Len() != 0 || l.Holds(kA) || l.TakeClaim(t0, kA, "b") != 0 {
		t.Fatalf("len %d, holds %v after the last claim was taken", l.Len(), l.Holds(kA))
	}
	// An expired claim gives nothing.
	_ = l.Claim(kA, "a", 5, t0.Add(time.Second))
	if got := l.TakeClaim(t0.Add(time.Second), kA, "a"); got != 0 || l.Len() != 0 {
		t.Fatalf("expired claim gave %d (len %d)", got, l.Len())
	}
	// A handover forgets claims with their book.
	_ = l.Claim(kA, "a", 5, t0.Add(time.Second))
	_ = l.Put(kA, Holding{Holder: "c", Tokens: 1, Expires: t0.Add(time.Second)})
	l.ExportKey(t0, kA, true)
	if l.Len() != 0 {
		t.Fatalf("len %d after exporting the key", l.Len())
	}
}
