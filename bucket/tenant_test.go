package bucket

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestStoreTenantQuota: a tenant's requests create at most Max buckets;
// past it a new key is ErrTenantFull and changes nothing (no bucket, no
// count, no eviction), while the tenant's existing keys, peeks and other
// tenants keep working; a bucket that leaves the store (swept when full,
// extracted, exported) counts out.
func TestStoreTenantQuota(t *testing.T) {
	s := NewStore(Config{MaxBuckets: 8, Shards: 2})
	l := tb(2, 1, time.Second)
	acme, other := Tenant{Prefix: "acme:", Max: 3}, Tenant{Prefix: "other:", Max: 3}
	take := func(now time.Time, tn Tenant, keys ...string) error {
		t.Helper()
		var cs []Check
		for _, k := range keys {
			cs = append(cs, Check{Name: "l", Limit: l, Key: k, Cost: 1})
		}
		_, _, err := s.TakeTenantAt(now, tn, cs, nil)
		return err
	}
	for i := range 3 {
		if err := take(epoch, acme, fmt.Sprint("acme:", i)); err != nil {
			t.Fatalf("key %d of 3: %v", i, err)
		}
	}
	if n := s.TenantBuckets("acme:"); n != 3 {
		t.Fatalf("acme holds %d, want 3", n)
	}
	if err := take(epoch, acme, "acme:3"); !errors.Is(err, ErrTenantFull) {
		t.Fatalf("a fourth key: %v, want ErrTenantFull", err)
	}
	if s.Has("l", "acme:3") || s.Len() != 3 || s.TenantBuckets("acme:") != 3 {
		t.Fatalf("a refused key changed the store: %d buckets, acme %d", s.Len(), s.TenantBuckets("acme:"))
	}
	if err := take(epoch, acme, "acme:0"); err != nil { // an existing key keeps working
		t.Fatalf("existing key: %v", err)
	}
	if _, ok, err := s.TakeTenantAt(epoch, acme, []Check{{Name: "l", Limit: l, Key: "acme:new", Cost: 0}}, nil); !ok || err != nil {
		t.Fatalf("a peek of a new key: %v %v", ok, err)
	}
	// Fill the store with the other tenant and untenanted keys: at the
	// cap, acme's refusal evicts nothing, though full buckets exist.
	for i := range 3 {
		if err := take(epoch, other, fmt.Sprint("other:", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := take(epoch, Tenant{}, "free:0", "free:1"); err != nil {
		t.Fatal(err)
	}
	later := epoch.Add(time.Hour) // every bucket is full again
	ev := s.Evictions()
	if err := take(later, acme, "acme:4"); !errors.Is(err, ErrTenantFull) || s.Evictions() != ev {
		t.Fatalf("at the cap: %v, %d evictions (was %d)", err, s.Evictions(), ev)
	}
	// A request with two new keys and no room for both creates neither.
	if _, err := s.ExtractAt(epoch, "l", "acme:2"); !err {
		t.Fatal("extract acme:2")
	}
	if n := s.TenantBuckets("acme:"); n != 2 {
		t.Fatalf("after an extract acme holds %d, want 2", n)
	}
	if err := take(epoch, acme, "acme:5", "acme:6"); !errors.Is(err, ErrTenantFull) || s.Has("l", "acme:5") || s.TenantBuckets("acme:") != 2 {
		t.Fatalf("two new keys, room for one: %v, acme %d", err, s.TenantBuckets("acme:"))
	}
	// Swept once full, the tenant's buckets count out.
	if n := s.SweepAt(later, 100); n != 7 || s.TenantBuckets("acme:") != 0 || s.TenantBuckets("other:") != 0 {
		t.Fatalf("sweep evicted %d, acme %d, other %d", n, s.TenantBuckets("acme:"), s.TenantBuckets("other:"))
	}
	for i := range 3 {
		if err := take(later, acme, fmt.Sprint("acme:x", i)); err != nil {
			t.Fatalf("after the sweep, key %d: %v", i, err)
		}
	}
	if es := s.ExportAt(later, nil, true); len(es) != 3 || s.TenantBuckets("acme:") != 0 {
		t.Fatalf("export: %d entries, acme %d", len(es), s.TenantBuckets("acme:"))
	}
	if len(s.tenants.m) != 0 {
		t.Fatalf("the count map keeps %d empty tenants", len(s.tenants.m))
	}
}
