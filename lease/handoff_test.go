package lease

import (
	"errors"
	"testing"
	"time"
)

func mustTable(t *testing.T, c Config) *Table {
	t.Helper()
	tbl, err := NewTable(c)
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

func mustGrant(t *testing.T, tbl *Table, now time.Time, r Request, p Params) Grant {
	t.Helper()
	out, _, err := tbl.Acquire(now, r, p)
	if err != nil || out.Status != Granted {
		t.Fatalf("acquire %+v at %v: %v %v", r, now.Sub(t0), out.Status, err)
	}
	return out.Grant
}

func TestHandoffMovesLeasesAndFencingFloor(t *testing.T) {
	a := mustTable(t, LocalConfig())
	b := mustTable(t, LocalConfig())
	k := Request{Limit: "db", Key: "acme"}
	other := Request{Limit: "db", Key: "other"}

	// a issues tokens 1..4 on k, keeps two; 5 on another key.
	g1 := mustGrant(t, a, at(0), k, params)
	g2 := mustGrant(t, a, at(0), k, params)
	a.Release(at(1*s), g1.ID)
	g3 := mustGrant(t, a, at(1*s), k, params)
	a.Release(at(1*s), g2.ID)
	g4 := mustGrant(t, a, at(2*s), k, params)
	mustGrant(t, a, at(2*s), other, params)
	waiting := k
	waiting.Wait = 3 * s
	out, _, _ := a.Acquire(at(2*s), waiting, params)
	if out.Status != Queued {
		t.Fatalf("third acquire on a: %v, want queued", out.Status)
	}

	pick := func(limit, key string) bool { return key == "acme" }
	h, ev := a.Export(at(4*s), pick, true)
	if h.NextFencing != 6 || len(h.Leases) != 2 || h.Leases[0].ID != g3.ID || h.Leases[1].ID != g4.ID {
		t.Fatalf("handoff %+v", h)
	}
	if h.Leases[0].Remaining != 7*s || h.Leases[1].Remaining != 8*s {
		t.Fatalf("remaining %v %v, want 7s 8s", h.Leases[0].Remaining, h.Leases[1].Remaining)
	}
	if len(ev.Dropped) != 1 || ev.Dropped[0] != out.Waiter || len(ev.Expired) != 0 {
		t.Fatalf("export events %+v: want the waiter dropped and nothing expired", ev)
	}
	if a.Held("db", "acme") != 0 || a.Held("db", "other") != 1 {
		t.Fatalf("a after export: %d %d", a.Held("db", "acme"), a.Held("db", "other"))
	}
	if _, _, err := a.Renew(at(4*s), g3.ID, 0, params); !errors.Is(err, ErrNotFound) {
		t.Fatalf("renew on the old owner: %v, want ErrNotFound", err)
	}

	// b's clock is an hour away: lifetimes cross as remaining time.
	skew := time.Hour
	if _, err := b.Import(at(skew), h); err != nil {
		t.Fatal(err)
	}
	if b.Held("db", "acme") != 2 {
		t.Fatalf("b holds %d", b.Held("db", "acme"))
	}
	if next, _ := b.Next(); !next.Equal(at(skew + 7*s)) {
		t.Fatalf("b next %v, want skew+7s", next.Sub(t0))
	}
	// The imported leases fill both permits; the next grant's token is above a's.
	refused, _, _ := b.Acquire(at(skew), k, params)
	if refused.Status != Refused || refused.RetryAfter != 7*s {
		t.Fatalf("b over permits: %+v", refused)
	}
	if _, _, err := b.Renew(at(skew+s), g4.ID, 0, params); err != nil {
		t.Fatalf("renew an imported lease: %v", err)
	}
	ev = b.Expire(at(skew + 7*s))
	if len(ev.Expired) != 1 || ev.Expired[0].ID != g3.ID {
		t.Fatalf("b expiry %+v", ev)
	}
	if g := mustGrant(t, b, at(skew+7*s), k, params); g.Fencing != 6 {
		t.Fatalf("b token %d, want 6 (above a's 5)", g.Fencing)
	}
	if ok, _ := b.Release(at(skew+8*s), g4.ID); !ok {
		t.Fatal("release an imported lease")
	}
}

func TestHandoffFloorWithoutLeases(t *testing.T) {
	a := mustTable(t, LocalConfig())
	b := mustTable(t, LocalConfig())
	k := Request{Limit: "db", Key: "acme"}
	for range 5 {
		g := mustGrant(t, a, at(0), k, params)
		a.Release(at(0), g.ID)
	}
	h, _ := a.Export(at(s), nil, true)
	if len(h.Leases) != 0 || h.NextFencing != 6 {
		t.Fatalf("handoff %+v", h)
	}
	if _, err := b.Import(at(s), h); err != nil {
		t.Fatal(err)
	}
	if g := mustGrant(t, b, at(s), k, params); g.Fencing != 6 {
		t.Fatalf("token %d after handoff, want 6", g.Fencing)
	}
}

func TestImportIdempotentAndSnapshot(t *testing.T) {
	a := mustTable(t, LocalConfig())
	g := mustGrant(t, a, at(0), Request{Limit: "db", Key: "acme", Holder: "w1"}, params)
	h, _ := a.Export(at(2*s), nil, false) // a snapshot: a keeps its lease
	if a.Held("db", "acme") != 1 || len(h.Leases) != 1 || h.Leases[0].Holder != "w1" || h.Leases[0].TTL != 10*s {
		t.Fatalf("snapshot %+v, held %d", h, a.Held("db", "acme"))
	}
	b := mustTable(t, LocalConfig())
	for range 2 {
		if _, err := b.Import(at(0), h); err != nil {
			t.Fatal(err)
		}
	}
	if b.Len() != 1 {
		t.Fatalf("imported twice: %d leases", b.Len())
	}
	h.Leases[0].Remaining = 0 // ran out in transit: only the floor moves
	c := mustTable(t, LocalConfig())
	if _, err := c.Import(at(0), h); err != nil || c.Len() != 0 || c.NextFencing() != g.Fencing+1 {
		t.Fatalf("import of a run-out lease: err %v len %d next %d", err, c.Len(), c.NextFencing())
	}
}

func TestImportRejectsMalformed(t *testing.T) {
	a := mustTable(t, LocalConfig())
	mustGrant(t, a, at(0), Request{Limit: "db", Key: "acme"}, params)
	good, _ := a.Export(at(0), nil, false)
	for name, mutate := range map[string]func(*Handoff){
		"key":     func(h *Handoff) { h.Leases[0].Key = "other" },
		"limit":   func(h *Handoff) { h.Leases[0].Limit = "other" },
		"fencing": func(h *Handoff) { h.Leases[0].Fencing++ },
		"id":      func(h *Handoff) { h.Leases[0].ID = "x" },
		"ttl":     func(h *Handoff) { h.Leases[0].TTL = -1 },
		"floor":   func(h *Handoff) { h.NextFencing = MaxFencing + 1 },
		"token": func(h *Handoff) {
			h.Leases[0].Fencing = MaxFencing
			h.Leases[0].ID = makeID("db", "acme", MaxFencing, nonce16(0))
		},
	} {
		h := Handoff{NextFencing: good.NextFencing, Leases: []Snapshot{good.Leases[0]}}
		mutate(&h)
		b := mustTable(t, LocalConfig())
		if _, err := b.Import(at(0), h); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err %v, want ErrInvalid", name, err)
		}
		if b.Len() != 0 || b.NextFencing() != 1 {
			t.Errorf("%s: a rejected import changed the table", name)
		}
	}
}

func TestRaiseFencing(t *testing.T) {
	tbl := mustTable(t, LocalConfig())
	if err := tbl.RaiseFencing(100); err != nil {
		t.Fatal(err)
	}
	if err := tbl.RaiseFencing(50); err != nil || tbl.NextFencing() != 100 {
		t.Fatalf("lowered to %d (err %v)", tbl.NextFencing(), err)
	}
	if err := tbl.RaiseFencing(MaxFencing + 1); !errors.Is(err, ErrInvalid) || tbl.NextFencing() != 100 {
		t.Fatalf("raise beyond MaxFencing: %v, next %d", err, tbl.NextFencing())
	}
	if g := mustGrant(t, tbl, at(0), Request{Limit: "db", Key: "acme"}, params); g.Fencing != 100 {
		t.Fatalf("token %d, want 100", g.Fencing)
	}
}
