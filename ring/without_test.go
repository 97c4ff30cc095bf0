package ring

import (
	"fmt"
	"testing"
)

func TestViewWithout(t *testing.T) {
	members := []Member{{Name: "a", State: Alive}, {Name: "b", State: Alive}, {Name: "c", State: Alive}}
	full := buildView(1, "a", members)
	w := full.Without("a")
	if _, ok := w.Member("a"); ok || len(w.Members) != 2 || !w.Majority {
		t.Fatalf("Without(a) = %+v", w)
	}
	moved, stayed := 0, 0
	for i := range 3000 {
		k := fmt.Sprint("key", i)
		before, _ := full.Owner(k)
		after, _ := w.Owner(k)
		if after.Name == "a" {
			t.Fatalf("key %s still owned by the removed member", k)
		}
		// Consistent hashing: only a's keys move.
		if before.Name != "a" && before.Name != after.Name {
			stayed++
		}
		if before.Name == "a" {
			moved++
		}
	}
	if moved == 0 {
		t.Fatal("a owned no keys")
	}
	if stayed > 3000/10 {
		t.Fatalf("%d keys of other members moved; consistent hashing should move few", stayed)
	}
	// Two members computing Without for the same leaver agree.
	other := buildView(9, "b", members).Without("a")
	for i := range 1000 {
		k := fmt.Sprint("key", i)
		x, _ := w.Owner(k)
		y, _ := other.Owner(k)
		if x.Name != y.Name {
			t.Fatalf("owners disagree on %s: %s vs %s", k, x.Name, y.Name)
		}
	}
}

// TestViewWithoutKeepsMajority: in a majority view with a dead member,
// the view without self must not hand keys to the dead member.
func TestViewWithoutKeepsMajority(t *testing.T) {
	members := []Member{{Name: "a", State: Alive}, {Name: "b", State: Alive}, {Name: "c", State: Dead}}
	v := buildView(1, "a", members)
	if !v.Majority {
		t.Fatal("2 of 3 live is a majority")
	}
	w := v.Without("a")
	for i := range 2000 {
		if m, _ := w.Owner(fmt.Sprint("k", i)); m.Name != "b" {
			t.Fatalf("key k%d owned by %s in the view without a; only b is live", i, m.Name)
		}
	}
}
