package gossip

import (
	"fmt"
	"testing"
	"time"

	"github.com/weir-rl/weir/ring"
)

func TestTable(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	meta := ring.Meta{GRPCAddr: "10.0.0.2:8081", LimitsVersion: 2}
	tb := newTable("a", ring.Meta{}, t0)
	steps := []struct {
		name    string
		do      func() bool
		changed bool
		want    string // name:state,... sorted
	}{
		{"b joins", func() bool {
			return tb.apply(event{kind: evJoin, name: "b", addr: "10.0.0.2:7946", meta: appendMeta(nil, meta, 0)}, at(0))
		}, true, "a:alive b:alive"},
		{"c joins", func() bool { return tb.apply(event{kind: evJoin, name: "c", addr: "10.0.0.3:7946"}, at(0)) }, true, "a:alive b:alive c:alive"},
		{"same join again", func() bool { return tb.apply(event{kind: evJoin, name: "c", addr: "10.0.0.3:7946"}, at(time.Second)) }, false, "a:alive b:alive c:alive"},
		{"c fails", func() bool {
			return tb.apply(event{kind: evLeave, name: "c", addr: "10.0.0.3:7946"}, at(2*time.Second))
		}, true, "a:alive b:alive c:dead"},
		{"not yet forgotten", func() bool { return tb.expire(at(2*time.Second+time.Minute-1), time.Minute) }, false, "a:alive b:alive c:dead"},
		{"forgotten after ForgetAfter", func() bool { return tb.expire(at(2*time.Second+time.Minute), time.Minute) }, true, "a:alive b:alive"},
		{"late leave of forgotten c ignored", func() bool { return tb.apply(event{kind: evLeave, name: "c"}, at(3*time.Minute)) }, false, "a:alive b:alive"},
		{"self dead is refuted, ignored", func() bool { return tb.apply(event{kind: evLeave, name: "a"}, at(3*time.Minute)) }, false, "a:alive b:alive"},
		{"b announces its leave", func() bool {
			return tb.apply(event{kind: evUpdate, name: "b", addr: "10.0.0.2:7946", meta: appendMeta(nil, meta, metaLeaving)}, at(4*time.Minute))
		}, true, "a:alive b:alive"}, // a new view: b is Leaving, peers settle
		{"b announces again", func() bool {
			return tb.apply(event{kind: evUpdate, name: "b", addr: "10.0.0.2:7946", meta: appendMeta(nil, meta, metaLeaving)}, at(4*time.Minute))
		}, false, "a:alive b:alive"},
		{"b leaves gracefully", func() bool {
			return tb.apply(event{kind: evLeave, name: "b", addr: "10.0.0.2:7946"}, at(4*time.Minute))
		}, true, "a:alive"},
	}
	for _, s := range steps {
		if got := s.do(); got != s.changed {
			t.Fatalf("%s: changed %v, want %v", s.name, got, s.changed)
		}
		got := ""
		for i, m := range tb.list() {
			if i > 0 {
				got += " "
			}
			got += m.Name + ":" + m.State.String()
		}
		if got != s.want {
			t.Fatalf("%s: members %q, want %q", s.name, got, s.want)
		}
	}
	if _, ok := tb.left["10.0.0.2:7946"]; !ok {
		t.Fatal("left address not recorded")
	}
	if got := tb.rejoinTargets([]string{"10.0.0.2:7946", "10.0.0.9:7946"}); len(got) != 1 || got[0] != "10.0.0.9:7946" {
		t.Fatalf("rejoin targets %v: a seed that left must be skipped", got)
	}
	tb.expire(at(4*time.Minute+time.Minute), time.Minute)
	if len(tb.left) != 0 {
		t.Fatal("left address kept past ForgetAfter")
	}
	// b comes back (restarted): known again, its address is dialable again.
	tb.apply(event{kind: evJoin, name: "b", addr: "10.0.0.2:7946"}, at(6*time.Minute))
	tb.apply(event{kind: evJoin, name: "d", addr: "10.0.0.4:7946"}, at(6*time.Minute))
	tb.apply(event{kind: evLeave, name: "d", addr: "10.0.0.4:7946"}, at(6*time.Minute))
	tb.members["a"].m.Addr = "10.0.0.1:7946"
	got := tb.rejoinTargets([]string{"10.0.0.1:7946", "10.0.0.2:7946", "10.0.0.4:7946", "10.0.0.5:7946"})
	if fmt.Sprint(got) != "[10.0.0.4:7946 10.0.0.5:7946]" {
		t.Fatalf("rejoin targets %v: want the failed member then the unknown seed", got)
	}
	if tb.forget("b") || tb.forget("a") || tb.forget("zz") {
		t.Fatal("forgot a live member, self or an unknown one")
	}
	if !tb.forget("d") || tb.members["d"] != nil {
		t.Fatal("Forget of a dead member failed")
	}
	// Address and metadata changes are changes; an update revives.
	if !tb.apply(event{kind: evUpdate, name: "b", addr: "10.0.0.7:7946"}, at(7*time.Minute)) {
		t.Fatal("address change not reported")
	}
	if tb.apply(event{kind: evJoin, name: "e", meta: []byte{9}}, at(7*time.Minute)); tb.badMeta != 1 {
		t.Fatal("bad meta not counted")
	}
	if !tb.setSelfMeta(meta) || tb.setSelfMeta(meta) {
		t.Fatal("setSelfMeta change detection")
	}
}

// TestTableLeavingNote: a leaving note marks its member Leaving whatever
// metadata gossip brings later, so its leave is a leave; a note that comes
// after a leave which read as a failure turns that failure into a leave.
func TestTableLeavingNote(t *testing.T) {
	t0 := time.Unix(1000, 0)
	meta := appendMeta(nil, ring.Meta{GRPCAddr: "10.0.0.2:8081"}, 0)
	state := func(tb *table) string {
		got := ""
		for _, m := range tb.list() {
			got += fmt.Sprintf("%s:%s:%v ", m.Name, m.State, m.Leaving)
		}
		return got
	}
	// The note before the leave, with metadata without the flag between.
	tb := newTable("a", ring.Meta{}, t0)
	tb.apply(event{kind: evJoin, name: "b", addr: "10.0.0.2:7946", meta: meta}, t0)
	if !tb.apply(event{kind: evLeaving, name: "b"}, t0) || tb.apply(event{kind: evLeaving, name: "b"}, t0) {
		t.Fatal("a first note must change the table, a second must not")
	}
	tb.apply(event{kind: evUpdate, name: "b", addr: "10.0.0.2:7946", meta: meta}, t0)
	if got := state(tb); got != "a:alive:false b:alive:true " {
		t.Fatalf("after the note and an update without the flag: %s", got)
	}
	tb.apply(event{kind: evLeave, name: "b", addr: "10.0.0.2:7946"}, t0)
	if got := state(tb); got != "a:alive:false " {
		t.Fatalf("after the leave: %s", got)
	}
	if _, ok := tb.left["10.0.0.2:7946"]; !ok {
		t.Fatal("the leave was not recorded as a leave")
	}

	// The leave before the note: a failure until the note comes.
	tb = newTable("a", ring.Meta{}, t0)
	tb.apply(event{kind: evJoin, name: "b", addr: "10.0.0.2:7946", meta: meta}, t0)
	tb.apply(event{kind: evLeave, name: "b", addr: "10.0.0.2:7946"}, t0)
	if got := state(tb); got != "a:alive:false b:dead:false " {
		t.Fatalf("a leave without the flag: %s", got)
	}
	if !tb.apply(event{kind: evLeaving, name: "b"}, t0) {
		t.Fatal("the late note changed nothing")
	}
	if _, ok := tb.left["10.0.0.2:7946"]; !ok || state(tb) != "a:alive:false " {
		t.Fatalf("after the late note: %s, left %v", state(tb), tb.left)
	}

	// Notes about self or an unknown member change nothing.
	if tb.apply(event{kind: evLeaving, name: "a"}, t0) || tb.apply(event{kind: evLeaving, name: "zz"}, t0) {
		t.Fatal("a note about self or an unknown member changed the table")
	}
}

func TestParseLeavingNote(t *testing.T) {
	if name, ok := parseLeavingNote(leavingNote("n2")); !ok || name != "n2" {
		t.Fatalf("round trip: %q %v", name, ok)
	}
	long := string(make([]byte, maxNoteName+1))
	for _, b := range [][]byte{nil, {}, {msgLeaving}, []byte("Xn2"), leavingNote(long)} {
		if name, ok := parseLeavingNote(b); ok {
			t.Fatalf("%q parsed as a note from %q", b, name)
		}
	}
}
