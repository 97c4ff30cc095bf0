package bucket

import (
	"errors"
	"fmt"
	"hash/maphash"
	"strings"
	"sync"
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
// one that can be evicted, like Redis's sampled eviction.
const evictSample = 16

// maxInterned bounds the per-shard table that shares limit-name strings.
const maxInterned = 1024

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
}

// Entry is one exported bucket.
type Entry struct {
	Name, Key string
	Snapshot  Snapshot
}

// bkey identifies a bucket; a struct key makes lookups allocation-free.
type bkey struct{ name, key string }

// shard is one lock stripe. mu guards every other field. Buckets live in
// pages, indexed from m, so that updating one never reassigns a map key
// (which would retain the caller's string) and no bucket is its own heap
// object.
type shard struct {
	mu    sync.Mutex
	m     map[bkey]uint32
	pages []*[pageSize]State // bucket slots, in pages so growth never copies or doubles
	used  uint32             // slots handed out so far
	free  []uint32           // slots of removed buckets, reused first
	names map[string]string
	_     [64]byte // keeps neighbouring shards' locks off one cache line
}

// pageSize is the number of bucket slots a shard allocates at once.
const pageSize = 256

// at returns the bucket in slot idx. sh is locked.
func (sh *shard) at(idx uint32) *State { return &sh.pages[idx/pageSize][idx%pageSize] }

// Store holds the buckets a node owns, in memory, bounded by MaxBuckets. It
// is safe for concurrent use: buckets are striped over shards, each with its
// own mutex, and a request locks the shards it touches in ascending order.
// The zero value is not usable; call NewStore.
type Store struct {
	seed      maphash.Seed
	mask      uint64
	max       int64
	shards    []shard
	live      atomic.Int64 // buckets stored plus room reserved by takes in progress
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
		s.shards[i].m = make(map[bkey]uint32)
		s.shards[i].names = make(map[string]string)
	}
	return s
}

func (s *Store) shardOf(name, key string) uint32 {
	h := maphash.String(s.seed, key) ^ maphash.String(s.seed, name)*0x9e3779b97f4a7c15
	return uint32(h & s.mask)
}

// work is the scratch state of one check during a take.
type work struct {
	shard uint32
	idx   uint32 // slot in the shard, when found
	found bool
	later bool // a later check in the request spends from the same bucket
	st    State
}

// TakeAt spends every check's cost at now, all or nothing: the request is
// allowed only when every check is, and then each bucket is charged; a
// request with any denial spends and creates nothing. Checks naming the
// same bucket spend cumulatively. It appends one Decision per check to
// out[:0] and reports whether all were allowed. An invalid limit or cost
// returns an error wrapping ErrInvalid, and a new key that finds its shard
// full with nothing evictable returns ErrFull; in both cases nothing changes.
// For an existing bucket and up to 8 checks it does not allocate.
func (s *Store) TakeAt(now time.Time, checks []Check, out []Decision) ([]Decision, bool, error) {
	out = out[:0]
	for i := range checks {
		c := &checks[i]
		if err := c.Limit.Validate(); err != nil {
			return out, false, fmt.Errorf("%w (limit %q)", err, c.Name)
		}
		if err := checkCost(c.Limit, c.Cost); err != nil {
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
			ws[dup].later = true
		} else if idx, ok := sh.m[bkey{c.Name, c.Key}]; ok {
			w.st, w.found, w.idx = *sh.at(idx), true, idx
		}
		d := take(c.Limit, &w.st, ns, c.Cost)
		all = all && d.Allowed
		out = append(out, d)
	}
	if !all {
		return out, false, nil
	}
	if !s.makeRoom(now, checks, ws) {
		return out[:0], false, ErrFull
	}
	for i := range checks {
		w := &ws[i]
		if w.later {
			continue
		}
		sh := &s.shards[w.shard]
		if w.found {
			*sh.at(w.idx) = w.st
			continue
		}
		s.insert(sh, checks[i].Name, checks[i].Key, w.st)
	}
	return out, true, nil
}

// lockOrder records each check's shard and returns the distinct shards in
// ascending order.
func (s *Store) lockOrder(checks []Check, ws []work, order []uint32) []uint32 {
	for i := range checks {
		sh := s.shardOf(checks[i].Name, checks[i].Key)
		ws[i].shard = sh
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

// makeRoom reserves room for every new bucket of a request, evicting full
// buckets from the shard that gains one where the store is at its cap. On
// failure it releases what it reserved. Shards are locked.
func (s *Store) makeRoom(now time.Time, checks []Check, ws []work) bool {
	var reserved int64
	for i := range ws {
		w := &ws[i]
		if w.found || w.later {
			continue
		}
		if !s.reserve(&s.shards[w.shard], now, checks, ws) {
			s.live.Add(-reserved)
			return false
		}
		reserved++
	}
	return true
}

// reserve makes room for one new bucket in sh, evicting one of its full
// buckets when the store is at its cap. sh is locked.
func (s *Store) reserve(sh *shard, now time.Time, checks []Check, ws []work) bool {
	for {
		cur := s.live.Load()
		if cur < s.max {
			if s.live.CompareAndSwap(cur, cur+1) {
				return true
			}
			continue
		}
		if s.evict(sh, now, 1, evictSample, checks, ws) == 0 {
			return false
		}
	}
}

// evict deletes up to n evictable buckets of sh, inspecting at most scan of
// them (scan < 0: all), never one a pending request is about to update. It
// returns how many it deleted. sh is locked.
func (s *Store) evict(sh *shard, now time.Time, n, scan int, checks []Check, ws []work) int {
	done := 0
	for k, idx := range sh.m {
		if done == n || scan == 0 {
			break
		}
		scan--
		if !sh.at(idx).EvictableAt(now) || pending(k, checks, ws) {
			continue
		}
		s.remove(sh, k, idx)
		s.evictions.Add(1)
		done++
	}
	return done
}

func pending(k bkey, checks []Check, ws []work) bool {
	for i := range checks {
		if ws[i].found && checks[i].Name == k.name && checks[i].Key == k.key {
			return true
		}
	}
	return false
}

// insert adds a bucket for which room is reserved, copying the key so the store retains none of the
// caller's memory and sharing one copy of each limit name. sh is locked.
func (s *Store) insert(sh *shard, name, key string, st State) {
	n, ok := sh.names[name]
	if !ok {
		n = strings.Clone(name)
		if len(sh.names) < maxInterned {
			sh.names[n] = n
		}
	}
	var idx uint32
	if l := len(sh.free); l > 0 {
		idx = sh.free[l-1]
		sh.free = sh.free[:l-1]
	} else {
		idx = sh.used
		sh.used++
		if int(idx/pageSize) == len(sh.pages) {
			sh.pages = append(sh.pages, new([pageSize]State))
		}
	}
	*sh.at(idx) = st
	sh.m[bkey{n, strings.Clone(key)}] = idx
}

// remove deletes a bucket. sh is locked.
func (s *Store) remove(sh *shard, k bkey, idx uint32) {
	delete(sh.m, k)
	*sh.at(idx) = State{}
	sh.free = append(sh.free, idx)
	s.live.Add(-1)
}

// RefundAt gives each check's cost back to its bucket at now, never above
// capacity: the undo of a take whose request was denied on another owner.
// Missing buckets are already full; invalid checks are skipped.
func (s *Store) RefundAt(now time.Time, checks []Check) {
	ns := now.UnixNano()
	for i := range checks {
		c := &checks[i]
		if c.Limit.Validate() != nil || checkCost(c.Limit, c.Cost) != nil {
			continue
		}
		sh := &s.shards[s.shardOf(c.Name, c.Key)]
		sh.mu.Lock()
		if idx, ok := sh.m[bkey{c.Name, c.Key}]; ok {
			refund(c.Limit, sh.at(idx), ns, c.Cost)
		}
		sh.mu.Unlock()
	}
}

// Len returns the number of live buckets.
func (s *Store) Len() int { return int(s.live.Load()) }

// Evictions returns how many buckets have been evicted since NewStore, by
// new keys at the cap and by SweepAt.
func (s *Store) Evictions() uint64 { return s.evictions.Load() }

// SweepAt evicts up to max buckets that are full at now and returns how
// many it evicted. Successive calls start at successive shards, so a
// periodic small sweep visits every shard. It holds one shard lock at a
// time.
func (s *Store) SweepAt(now time.Time, max int) int {
	done := 0
	start := s.sweep.Add(1)
	for i := range len(s.shards) {
		if done >= max {
			break
		}
		sh := &s.shards[(start+uint64(i))&s.mask]
		sh.mu.Lock()
		done += s.evict(sh, now, max-done, -1, nil, nil)
		sh.mu.Unlock()
	}
	return done
}

// ExportAt returns a snapshot of every bucket for which pick(name, key) is
// true (all when pick is nil), as of now, and deletes them when remove is
// set (a handoff to a new owner). It locks one shard at a time, so buckets
// taken from concurrently may be exported before or after the take.
func (s *Store) ExportAt(now time.Time, pick func(name, key string) bool, remove bool) []Entry {
	ns := now.UnixNano()
	var out []Entry
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for k, idx := range sh.m {
			if pick != nil && !pick(k.name, k.key) {
				continue
			}
			out = append(out, Entry{Name: k.name, Key: k.key, Snapshot: exportAt(*sh.at(idx), ns)})
			if remove {
				s.remove(sh, k, idx)
			}
		}
		sh.mu.Unlock()
	}
	return out
}

// MergeAt folds exported entries into the store at now, conservatively: an
// existing bucket keeps the fewer tokens of the two, a missing one is
// created from the snapshot. limit returns the policy in force for a name;
// entries whose name it does not know are skipped, and so are new buckets
// that find their shard full with nothing evictable.
func (s *Store) MergeAt(now time.Time, entries []Entry, limit func(name string) (Limit, bool)) {
	ns := now.UnixNano()
	for i := range entries {
		e := &entries[i]
		l, ok := limit(e.Name)
		if !ok || l.Validate() != nil {
			continue
		}
		sh := &s.shards[s.shardOf(e.Name, e.Key)]
		sh.mu.Lock()
		if idx, ok := sh.m[bkey{e.Name, e.Key}]; ok {
			mergeAt(l, sh.at(idx), e.Snapshot, ns)
		} else if st := importAt(l, e.Snapshot, ns); st != (State{}) {
			if s.reserve(sh, now, nil, nil) {
				s.insert(sh, e.Name, e.Key, st)
			}
		}
		sh.mu.Unlock()
	}
}

// Has reports whether the store holds a bucket for (name, key).
func (s *Store) Has(name, key string) bool {
	sh := &s.shards[s.shardOf(name, key)]
	sh.mu.Lock()
	_, ok := sh.m[bkey{name, key}]
	sh.mu.Unlock()
	return ok
}

// ExtractAt removes the bucket (name, key) and returns its snapshot as of
// now, for a new owner that pulls a key on its first miss. ok is false when
// the store holds no such bucket.
func (s *Store) ExtractAt(now time.Time, name, key string) (Entry, bool) {
	sh := &s.shards[s.shardOf(name, key)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	k := bkey{name, key}
	idx, ok := sh.m[k]
	if !ok {
		return Entry{}, false
	}
	e := Entry{Name: name, Key: key, Snapshot: exportAt(*sh.at(idx), now.UnixNano())}
	s.remove(sh, k, idx)
	return e, true
}
