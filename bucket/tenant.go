package bucket

import (
	"errors"
	"strings"
	"sync"
)

// ErrTenantFull reports that a take would create a bucket for a tenant
// whose keys already hold Tenant.Max live buckets in the store. The request
// spends and creates nothing, and nothing is evicted for it; the tenant's
// existing buckets keep working.
var ErrTenantFull = errors.New("bucket: tenant at its bucket quota")

// Tenant is the caller a take creates buckets for (a key prefix, as a
// caller token confines one) and the most live buckets the store may hold
// for it. The zero Tenant is no tenant: nothing is counted.
type Tenant struct {
	Prefix string
	Max    int64
}

// tenantCount is one tenant's live buckets.
type tenantCount struct {
	prefix string // the store's own copy, shared by the shards' records
	n      int64
}

// tenantCounts counts the live buckets of each tenant that has any, so the
// map holds at most one entry per tenant bucket. It is safe for concurrent
// use; it is locked inside shard locks, never the other way round. mu
// guards m.
type tenantCounts struct {
	mu sync.Mutex
	m  map[string]*tenantCount
}

// reserve counts one more bucket for t, unless t holds t.Max already. It
// returns the store's copy of t.Prefix, for the bucket's record.
func (tc *tenantCounts) reserve(t Tenant) (string, bool) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	c := tc.m[t.Prefix]
	if c == nil {
		if t.Max < 1 {
			return "", false
		}
		if tc.m == nil {
			tc.m = make(map[string]*tenantCount)
		}
		c = &tenantCount{prefix: strings.Clone(t.Prefix)}
		tc.m[c.prefix] = c
	}
	if c.n >= t.Max {
		return "", false
	}
	c.n++
	return c.prefix, true
}

// release counts one bucket of prefix out.
func (tc *tenantCounts) release(prefix string) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	c := tc.m[prefix]
	if c == nil {
		return
	}
	if c.n--; c.n <= 0 {
		delete(tc.m, prefix)
	}
}

// count returns the live buckets of prefix.
func (tc *tenantCounts) count(prefix string) int64 {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if c := tc.m[prefix]; c != nil {
		return c.n
	}
	return 0
}

// TenantBuckets returns the live buckets the store holds for the tenant
// of key prefix prefix (created by TakeTenantAt).
func (s *Store) TenantBuckets(prefix string) int64 { return s.tenants.count(prefix) }
