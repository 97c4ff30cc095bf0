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
