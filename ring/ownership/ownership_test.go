package ownership

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestBuildDeterministicAndBalanced(t *testing.T) {
	members := []string{"a", "b", "c"}
	t1 := Build(members, DefaultParams())
	t2 := Build(append([]string(nil), members...), DefaultParams())
	if t1.Partitions() != DefaultPartitions {
		t.Fatalf("partitions %d", t1.Partitions())
	}
	count := map[string]int{}
	for i := range 3000 {
		hk := HashKey("api", fmt.Sprint("k", i))
		o1, ok1 := t1.Owner(hk)
		o2, ok2 := t2.Owner(hk)
		if !ok1 || !ok2 || o1 != o2 {
			t.Fatalf("owner of %q: %q %v vs %q %v", hk, o1, ok1, o2, ok2)
		}
		count[o1]++
	}
	for _, m := range members {
		if count[m] < 600 { // a third is 1000; bounded load keeps it near
			t.Errorf("member %s owns %d of 3000 keys", m, count[m])
		}
	}
	// More members than partitions: one partition each.
	if n := Build(members, Params{Partitions: 2, Replication: 1, Load: 1.25}).Partitions(); n != 3 {
		t.Errorf("partitions %d, want 3", n)
	}
}

func TestFromOwnersRoundTrip(t *testing.T) {
	tb := Build([]string{"n1", "n2", "n3", "n4"}, DefaultParams())
	back, err := FromOwners(tb.Members(), tb.Owners())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		hk := HashKey("l", fmt.Sprint(i))
		a, _ := tb.Owner(hk)
		b, _ := back.Owner(hk)
		if a != b {
			t.Fatalf("key %d: %s vs %s", i, a, b)
		}
	}
	for _, bad := range []struct {
		m []string
		o []uint32
	}{{nil, []uint32{0}}, {[]string{"a"}, nil}, {[]string{"a"}, []uint32{0, 1}}} {
		if _, err := FromOwners(bad.m, bad.o); !errors.Is(err, ErrBadTable) {
			t.Errorf("FromOwners(%v, %v) = %v, want ErrBadTable", bad.m, bad.o, err)
		}
	}
	if _, ok := (Table{}).Owner("x"); ok {
		t.Error("zero Table named an owner")
	}
}

func TestHashKeyTags(t *testing.T) {
	for _, tc := range []struct{ limit, key, want string }{
		{"api", "tenant:acme", "api\x00tenant:acme"},
		{"api", "tenant:{acme}:route", "acme"},
		{"api", "{}x", "api\x00{}x"},
		{"api", "x{a}{b}", "a"},
		{"api", "x}{a", "api\x00x}{a"},
	} {
		if got := HashKey(tc.limit, tc.key); got != tc.want {
			t.Errorf("HashKey(%q, %q) = %q, want %q", tc.limit, tc.key, got, tc.want)
		}
	}
}

// TestKeySumIsTheHashKeysSum: KeySum places every key where its hash key
// does (nodes of different builds must agree on owners): tags, empty
// parts, a NUL in the key, keys longer than xxhash's 32-byte blocks, and
// whatever a fuzzed pair holds.
func TestKeySumIsTheHashKeysSum(t *testing.T) {
	long := strings.Repeat("k", 100)
	for _, tc := range []struct{ limit, key string }{
		{"api", "tenant:acme"},
		{"api", "tenant:{acme}:route"},
		{"api", "{}x"},
		{"api", "x{a}{b}"},
		{"api", "x}{a"},
		{"", ""},
		{"", "k"},
		{"api", ""},
		{"a\x00b", "c"},
		{"a", "\x00bc"},
		{long, long},
		{"api", long + "{tag}"},
		{"ünï", "çødé"},
	} {
		if got, want := KeySum(tc.limit, tc.key), Sum(HashKey(tc.limit, tc.key)); got != want {
			t.Errorf("KeySum(%q, %q) = %x, the hash key's sum %x", tc.limit, tc.key, got, want)
		}
	}
	tbl := Build([]string{"n1", "n2", "n3"}, DefaultParams())
	for i := range 2000 {
		limit, key := fmt.Sprintf("l%d", i%7), fmt.Sprintf("tenant:%d", i)
		a, _ := tbl.OwnerIndex(HashKey(limit, key))
		b, _ := tbl.OwnerIndexSum(KeySum(limit, key))
		if a != b {
			t.Fatalf("(%q, %q): owner %d by hash key, %d by KeySum", limit, key, a, b)
		}
	}
}

func FuzzKeySum(f *testing.F) {
	f.Add("api", "tenant:{acme}")
	f.Fuzz(func(t *testing.T, limit, key string) {
		if got, want := KeySum(limit, key), Sum(HashKey(limit, key)); got != want {
			t.Errorf("KeySum(%q, %q) = %x, the hash key's sum %x", limit, key, got, want)
		}
	})
}

func TestParamsValidate(t *testing.T) {
	if err := DefaultParams().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []Params{{0, 1, 2}, {1, 0, 2}, {1, 1, 1}} {
		if p.Validate() == nil {
			t.Errorf("%+v validated", p)
		}
	}
}

// BenchmarkKeySum is the hash that places a take, from its parts and
// through its hash key, for keys of 16 and 64 bytes.
func BenchmarkKeySum(b *testing.B) {
	for _, key := range []string{"tenant:00012345", "tenant:0001234500012345000123450001234500012345000123450001234"} {
		b.Run(fmt.Sprintf("key=%d/KeySum", len(key)), func(b *testing.B) {
			for b.Loop() {
				_ = KeySum("requests", key)
			}
		})
		b.Run(fmt.Sprintf("key=%d/HashKey", len(key)), func(b *testing.B) {
			for b.Loop() {
				_ = Sum(HashKey("requests", key))
			}
		})
	}
}
