package bucket

import (
	"errors"
	"fmt"
	"hash/maphash"
	"sync/atomic"
	"time"
)

// ErrFull reports that the store holds MaxBuckets buckets and none of those
// sampled could be evicted, so a new key cannot get state. The request
// spends and creates nothing; the caller applies the limit's failure policy.
var ErrFull = errors.New("bucket: store full")

// Config sizes a Store.
type Config struct {
	// MaxBuckets caps the live buckets of the whole store, in buckets. At
	// the cap a new key evicts a full bucket sampled from its own shard.
	// Default 1,000,000; range Shards..1<<31.
	MaxBuckets int
	// Shards is the number of independently locked shards, a power of two.
	// More shards mean less lock contention. Default 64; range 1..65536.
	Shards int
}

// DefaultConfig returns the production sizing: 1,000,000 buckets in 64
// shards.
func DefaultConfig() Config { return Config{MaxBuckets: 1_000_000, Shards: 64} }

// LocalConfig returns a small sizing for tests: 10,000 buckets in 4 shards.
func LocalConfig() Config { return Config{MaxBuckets: 10_000, Shards: 4} }

// Validate reports whether c is usable. It changes nothing.
func (c Config) Validate() error {
	if c.Shards < 1 || c.Shards > 1<<16 || c.Shards&(c.Shards-1) != 0 {
		return fmt.Errorf("bucket: config: shards %d: want a power of two in 1..65536", c.Shards)
	}
	if c.MaxBuckets < c.Shards || c.MaxBuckets > 1<<31 {
		return fmt.Errorf("bucket: config: max buckets %d: want %d..%d", c.MaxBuckets, c.Shards, 1<<31)
	}
	return nil
}

// evictSample is how many buckets of a full shard a new key inspects for
// one that can be evicted, like Redis's sampled eviction. The shard's clock
// hand picks them: the buckets after those inspected last.
const evictSample = 16

// smallChecks is the number of checks a request may carry without the
// store allocating scratch space.
const smallChecks = 8

// Check is one bucket a request spends from: the limit's name and policy,
// the key, and the cost.
type Check struct {
	Name  string
	Limit Limit
	Key   string
	Cost  int64
	// Carry keeps Limit with the bucket when the take writes it: a limit
	// that no limits file names (an inline limit, whose parameters come
	// with each request), so the bucket's exports carry its definition
	// (Entry.Limit) to a new owner or a replica. The latest take's Limit
	// is the one kept.
	Carry bool
}

// Entry is one exported bucket.
type Entry struct {
	Name, Key string
	Snapshot  Snapshot
	// Limit is the limit kept with the bucket (Check.Carry), which a
	// receiver merges it under when it knows no limit of that name; the
	// zero Limit when none was kept.
	Limit Limit
}

// Store holds the buckets a node owns, in memory, bounded by MaxBuckets. It
// is safe for concurrent use: buckets are striped over shards, each with its
// own mutex, and a request locks the shards it touches in ascending order.
// The zero value is not usable; call NewStore.
//
// Memory: a live bucket costs about 74 bytes of heap plus its key's copy.
// BenchmarkStoreBytesPerBucket measures 89.5 bytes per bucket for 1,000,000
// keys of 14 bytes (copies of 16 bytes) in 64 shards: a 56-byte slot, 17
// bytes of index and the key copy (a map keyed by name and key cost 149).
// Each shard keeps its own hash table for that; store_shard.go says why.
type Store struct {
	seed      maphash.Seed
	mask      uint64
	max       int64
	shards    []shard
	live      atomic.Int64 // buckets stored plus room reserved by takes in progress
	tenants   tenantCounts // live buckets per tenant (TakeTenantAt)
	evictions atomic.Uint64
	sweep     atomic.Uint64
}

// NewStore returns an empty store. An invalid cfg is replaced by
// DefaultConfig; validate it first to report the mistake.
func NewStore(cfg Config) *Store {
	if cfg.Validate() != nil {
		cfg = DefaultConfig()
	}
	s := &Store{
		seed:   maphash.MakeSeed(),
		mask:   uint64(cfg.Shards - 1),
		max:    int64(cfg.MaxBuckets),
		shards: make([]shard, cfg.Shards),
	}
	for i := range s.shards {
		s.shards[i].ids = make(map[string]uint32)
	}
	return s
}

// hash returns the hash of bucket (name, key): its low bits pick the shard
// and its upper 32 bits the bucket's place in the shard's index.
func (s *Store) hash(name, key string) uint64 {
	return maphash.String(s.seed, key) ^ maphash.String(s.seed, name)*0x9e3779b97f4a7c15
}

// locate returns the shard of (name, key) and the bucket's hash.
func (s *Store) locate(name, key string) (*shard, uint64) {
	h := s.hash(name, key)
	return &s.shards[h&s.mask], h
}

// work is the scratch state of one check during a take.
type work struct {
	hash  uint64
	shard uint32
	idx   uint32 // slot in the shard, when found
	found bool
	later bool // a later check in the request spends from the same bucket
	peek  bool // every check up to this one on the bucket costs 0: write nothing
	// tenant is the store's copy of the tenant prefix a new bucket was
	// counted for (makeRoom); "" for none.
	tenant string
	st     State
}

// TakeAt spends every check's cost at now, all or nothing: the request is
// allowed only when every check is, and then each bucket is charged; a
// request with any denial spends and creates nothing. Checks naming the
// same bucket spend cumulatively. It appends one Decision per check to
// out[:0] and reports whether all were allowed. An invalid limit or cost
// returns an error wrapping ErrInvalid, and a new key that finds its shard
// full with nothing evictable returns ErrFull; in both cases nothing changes.
// For an existing bucket and up to 8 checks it does not allocate.
//
// A check of cost 0 is a peek (PeekAt): it is always allowed, answers the
// bucket's state as of now, and neither writes nor creates its bucket,
// so a request of peeks alone changes nothing and needs no room.
func (s *Store) TakeAt(now time.Time, checks []Check, out []Decision) ([]Decision, bool, error) {
	return s.TakeTenantAt(now, Tenant{}, checks, out)
}

// TakeTenantAt is TakeAt for a request of tenant t: each bucket it creates
// counts for t until it leaves the store (evicted, swept, exported or
// extracted), and a request that would create one past t.Max returns
// ErrTenantFull, changing nothing and evicting nothing. Buckets that exist
// already, and peeks, need no room. The zero Tenant is TakeAt.
func (s *Store) TakeTenantAt(now time.Time, t Tenant, checks []Check, out []Decision) ([]Decision, bool, error) {
	out = out[:0]
	for i := range checks {
		c := &checks[i]
		if err := c.Limit.Validate(); err != nil {
			return out, false, fmt.Errorf("%w (limit %q)", err, c.Name)
		}
		if err := checkSpend(c.Limit, c.Cost); err != nil {
			return out, false, fmt.Errorf("%w (limit %q)", err, c.Name)
		}
	}
	var wbuf [smallChecks]work
	var ws []work
	if len(checks) <= smallChecks {
		ws = wbuf[:len(checks)]
	} else {
		ws = make([]work, len(checks))
	}
	var obuf [smallChecks]uint32
	order := s.lockOrder(checks, ws, obuf[:0])
	for _, i := range order {
		s.shards[i].mu.Lock()
	}
	defer s.unlock(order)

	ns := now.UnixNano()
	all := true
	for i := range checks {
		c, w := &checks[i], &ws[i]
		sh := &s.shards[w.shard]
		dup := -1
		for j := i - 1; j >= 0; j-- {
			if checks[j].Name == c.Name && checks[j].Key == c.Key {
				dup = j
				break
			}
		}
		if dup >= 0 {
			w.st, w.found, w.idx = ws[dup].st, ws[dup].found, ws[dup].idx
			w.peek = ws[dup].peek && c.Cost == 0
			ws[dup].later = true
		} else {
			if idx, ok := sh.find(w.hash, c.Name, c.Key); ok {
				w.st, w.found, w.idx = sh.at(idx).st, true, idx
			}
			w.peek = c.Cost == 0
		}
		d := take(c.Limit, &w.st, ns, c.Cost)
		d.Instance, d.State = instance(w.shard, sh.gen), w.st
		all = all && d.Allowed
		out = append(out, d)
	}
	if !all {
		return out, false, nil
	}
	if err := s.makeRoom(now, t, ws); err != nil {
		return out[:0], false, err
	}
	for i := range checks {
		w := &ws[i]
		if w.later || w.peek {
			continue
		}
		sh := &s.shards[w.shard]
		idx := w.idx
		if w.found {
			sh.at(idx).st = w.st
		} else {
			idx = sh.insert(w.hash, checks[i].Name, checks[i].Key, w.st)
			if w.tenant != "" {
				sh.ownedBy(idx, w.tenant)
			}
		}
		if checks[i].Carry {
			sh.carry(idx, checks[i].Limit)
		}
	}
	return out, true, nil
}

// instance packs a shard's number and generation into a Decision.Instance.
func instance(shard uint32, gen uint64) uint64 { return uint64(shard)<<48 | gen&(1<<48-1) }

// lockOrder records each check's shard and returns the distinct shards in
// ascending order.
func (s *Store) lockOrder(checks []Check, ws []work, order []uint32) []uint32 {
	for i := range checks {
		h := s.hash(checks[i].Name, checks[i].Key)
		sh := uint32(h & s.mask)
		ws[i].hash, ws[i].shard = h, sh
		pos := len(order)
		for pos > 0 && order[pos-1] > sh {
			pos--
		}
		if pos > 0 && order[pos-1] == sh {
			continue
		}
		order = append(order, 0)
		copy(order[pos+1:], order[pos:])
		order[pos] = sh
	}
	return order
}

func (s *Store) unlock(order []uint32) {
	for i := len(order) - 1; i >= 0; i-- {
		s.shards[order[i]].mu.Unlock()
	}
}

// makeRoom reserves room for every new bucket of a request: first in
// tenant t's count (ErrTenantFull past t.Max, before anything is evicted),
// then in the store, evicting full buckets from the shard that gains one
// where the store is at its cap (ErrFull when none can go). On failure it
// releases what it reserved. Shards are locked.
func (s *Store) makeRoom(now time.Time, t Tenant, ws []work) error {
	fresh := func(w *work) bool { return !w.found && !w.later && !w.peek }
	if t != (Tenant{}) {
		for i := range ws {
			w := &ws[i]
			if !fresh(w) {
				continue
			}
			p, ok := s.tenants.reserve(t)
			if !ok {
				s.releaseTenants(ws[:i])
				return ErrTenantFull
			}
			w.tenant = p
		}
	}
	var reserved int64
	for i := range ws {
		w := &ws[i]
		if !fresh(w) {
			continue
		}
		if !s.reserve(w.shard, now, ws) {
			s.live.Add(-reserved)
			s.releaseTenants(ws)
			return ErrFull
		}
		reserved++
	}
	return nil
}

// releaseTenants gives back the tenant counts makeRoom took for ws.
func (s *Store) releaseTenants(ws []work) {
	for i := range ws {
		if p := ws[i].tenant; p != "" {
			s.tenants.release(p)
			ws[i].tenant = ""
		}
	}
}

// reserve makes room for one new bucket in shard si, evicting one of its
// full buckets when the store is at its cap, never one of ws. The shard is
// locked.
func (s *Store) reserve(si uint32, now time.Time, ws []work) bool {
	for {
		cur := s.live.Load()
		if cur < s.max {
			if s.live.CompareAndSwap(cur, cur+1) {
				return true
			}
			continue
		}
		if s.evict(si, now, 1, evictSample, ws) == 0 {
			return false
		}
	}
}

// evict deletes up to n evictable buckets of shard si, inspecting at most
// scan of them (scan < 0: all) from its clock hand on, never one a pending
// request of ws is about to update. It returns how many it deleted. The
// shard is locked.
func (s *Store) evict(si uint32, now time.Time, n, scan int, ws []work) int {
	sh := &s.shards[si]
	done := 0
	for range sh.used {
		if done == n || scan == 0 {
			break
		}
		idx := sh.hand
		if sh.hand++; sh.hand == sh.used {
			sh.hand = 0
		}
		sl := sh.at(idx)
		if sl.name == 0 {
			continue
		}
		scan--
		if !sl.st.EvictableAt(now) || pending(si, idx, ws) {
			continue
		}
		s.remove(sh, idx)
		s.evictions.Add(1)
		done++
	}
	return done
}

// pending reports whether a request's found bucket is slot idx of shard si.
func pending(si, idx uint32, ws []work) bool {
	for i := range ws {
		if ws[i].found && ws[i].shard == si && ws[i].idx == idx {
			return true
		}
	}
	return false
}

// remove deletes the bucket in slot idx of sh and counts it out. sh is
// locked.
func (s *Store) remove(sh *shard, idx uint32) {
	if p, ok := sh.owners[idx]; ok {
		s.tenants.release(p)
	}
	sh.remove(idx)
	s.live.Add(-1)
}
