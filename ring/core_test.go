package ring

import (
	"fmt"
	"testing"
)

func TestHashKey(t *testing.T) {
	for _, tc := range []struct{ limit, key, want string }{
		{"api", "tenant:acme", "api\x00tenant:acme"},
		{"api", "tenant:{acme}:route", "acme"},
		{"export", "{acme}", "acme"},
		{"api", "a{}b", "api\x00a{}b"},     // empty tag: whole key
		{"api", "a{b", "api\x00a{b"},       // no closing brace
		{"api", "a}b{c}d", "c"},            // first '{' then first '}' after it
		{"api", "x{{y}}", "{y"},            // as in Redis
		{"api", "x{}{y}", "api\x00x{}{y}"}, // the first tag is empty: no tag
		{"", "", "\x00"},
	} {
		if got := HashKey(tc.limit, tc.key); got != tc.want {
			t.Errorf("HashKey(%q, %q) = %q, want %q", tc.limit, tc.key, got, tc.want)
		}
	}
}

func members(states ...State) []Member {
	ms := make([]Member, len(states))
	for i, s := range states {
		ms[i] = Member{Name: fmt.Sprintf("n%d", i), Addr: fmt.Sprintf("10.0.0.%d:7946", i+1), State: s}
	}
	return ms
}

func owners(v *View, keys int) map[string]string {
	out := make(map[string]string, keys)
	for i := range keys {
		k := fmt.Sprintf("key-%d", i)
		m, ok := v.Owner(k)
		if !ok {
			panic("no owner")
		}
		out[k] = m.Name
	}
	return out
}

func TestBuildViewMajorityRule(t *testing.T) {
	for _, tc := range []struct {
		name     string
		states   []State
		live     int
		majority bool
		ring     []string // members that may own keys
	}{
		{"all alive", []State{Alive, Alive, Alive}, 3, true, []string{"n0", "n1", "n2"}},
		{"one of three lost", []State{Alive, Alive, Dead}, 2, true, []string{"n0", "n1"}},
		{"isolated", []State{Alive, Dead, Dead}, 1, false, []string{"n0", "n1", "n2"}},
		{"even split", []State{Alive, Alive, Dead, Dead}, 2, false, []string{"n0", "n1", "n2", "n3"}},
		{"3 of 5", []State{Dead, Dead, Alive, Alive, Alive}, 3, true, []string{"n2", "n3", "n4"}},
		{"2 of 5", []State{Alive, Alive, Dead, Dead, Dead}, 2, false, []string{"n0", "n1", "n2", "n3", "n4"}},
		{"alone", []State{Alive}, 1, true, []string{"n0"}},
		{"self left", []State{Left, Alive, Alive}, 2, true, []string{"n1", "n2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := buildView(1, "n0", members(tc.states...))
			if v.Live != tc.live || v.Majority != tc.majority {
				t.Fatalf("live %d majority %v, want %d %v", v.Live, v.Majority, tc.live, tc.majority)
			}
			allowed := map[string]bool{}
			for _, n := range tc.ring {
				allowed[n] = true
				if !v.InRing(n) {
					t.Errorf("InRing(%s) false", n)
				}
			}
			seen := map[string]int{}
			for _, o := range owners(v, 3000) {
				if !allowed[o] {
					t.Fatalf("key owned by %s, outside ring %v", o, tc.ring)
				}
				seen[o]++
			}
			for _, n := range tc.ring {
				if seen[n] < 3000/len(tc.ring)/3 {
					t.Errorf("%s owns %d of 3000 keys: unbalanced %v", n, seen[n], seen)
				}
			}
		})
	}
}

// TestBuildViewMinorityKeepsOwners checks that a minority node maps every
// key exactly as the full healthy ring does, and that the majority side
// moves only the lost member's keys (mostly).
func TestBuildViewMinorityKeepsOwners(t *testing.T) {
	full := owners(buildView(1, "n0", members(Alive, Alive, Alive)), 2000)
	minority := owners(buildView(2, "n2", members(Dead, Dead, Alive)), 2000)
	for k, o := range full {
		if minority[k] != o {
			t.Fatalf("minority maps %s to %s, full ring to %s", k, minority[k], o)
		}
	}
	major := owners(buildView(2, "n0", members(Alive, Alive, Dead)), 2000)
	moved := 0
	for k, o := range full {
		if o != "n2" && major[k] != o {
			moved++
		}
	}
	if moved > 2000/10 {
		t.Errorf("%d keys of surviving members moved", moved)
	}
}

func TestViewLookups(t *testing.T) {
	v := buildView(3, "n1", members(Alive, Dead, Alive))
	if m, ok := v.Member("n1"); !ok || m.State != Dead {
		t.Fatalf("Member(n1) = %+v %v", m, ok)
	}
	if _, ok := v.Member("zz"); ok {
		t.Fatal("unknown member found")
	}
	var zero View
	if _, ok := zero.Owner("k"); ok {
		t.Fatal("zero view has an owner")
	}
	// Hash tags route every limit of a tenant to one owner.
	v5 := buildView(1, "n0", members(Alive, Alive, Alive, Alive, Alive))
	want, _ := v5.Owner(HashKey("api", "tenant:{acme}:a"))
	for i := range 50 {
		got, _ := v5.Owner(HashKey(fmt.Sprintf("limit-%d", i), fmt.Sprintf("t:{acme}:route-%d", i)))
		if got.Name != want.Name {
			t.Fatalf("limit-%d: {acme} owned by %s, want %s", i, got.Name, want.Name)
		}
	}
	// Without the tag, the same keys spread over members.
	spread := map[string]bool{}
	for i := range 50 {
		o, _ := v5.Owner(HashKey(fmt.Sprintf("limit-%d", i), "tenant:acme"))
		spread[o.Name] = true
	}
	if len(spread) < 3 {
		t.Fatalf("untagged keys of 50 limits landed on %d members", len(spread))
	}
}

func TestBuildViewLargeCluster(t *testing.T) {
	// More ring members than partitions: one partition each, no panic in
	// the bounded-load placement.
	states := make([]State, 30)
	v := buildViewN(1, "n0", members(states...), 11)
	if v.table.Partitions() != 30 {
		t.Fatalf("partitions %d", v.table.Partitions())
	}
	v.Owner("k")
}

func BenchmarkOwner(b *testing.B) {
	v := buildView(1, "n0", members(Alive, Alive, Alive, Alive, Alive))
	hk := HashKey("api", "tenant:acme:route:export")
	b.ReportAllocs()
	for b.Loop() {
		v.Owner(hk)
	}
}

func BenchmarkOwnerParallel(b *testing.B) {
	v := buildView(1, "n0", members(Alive, Alive, Alive, Alive, Alive))
	hk := HashKey("api", "tenant:acme:route:export")
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			v.Owner(hk)
		}
	})
}

func BenchmarkBuildView(b *testing.B) {
	ms := members(Alive, Alive, Alive, Alive, Alive, Alive, Alive)
	b.ReportAllocs()
	for b.Loop() {
		buildView(1, "n0", ms)
	}
}
