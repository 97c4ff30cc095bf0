package bucket

import (
	"fmt"
	"time"
)

// This file: the store operations beside a take: refunds, settling,
// sweeping, export and merge for handoff and replication, and lookups.

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
		sh, h := s.locate(c.Name, c.Key)
		sh.mu.Lock()
		if idx, ok := sh.find(h, c.Name, c.Key); ok {
			refund(c.Limit, &sh.at(idx).st, ns, c.Cost)
			sh.gen++
		}
		sh.mu.Unlock()
	}
}

// SettleAt refills the token bucket of c (its Limit and Key; Cost is
// ignored) to now under c.Limit, stores the result, and returns the whole
// tokens it holds. It materializes a bucket around a change of capacity
// (package allot): settled under the old capacity before the change, so
// refill up to now counts under the capacity in force until now, and again
// at the same now under the new one after it, so the stored time the
// bucket turns full (when it may be evicted) is the new capacity's. A
// missing bucket is created full: read as missing, it would be full under
// whatever capacity is in force later. A time before the bucket's last
// step refills nothing. Only token_bucket limits settle; others, and
// invalid limits, are an error wrapping ErrInvalid; a missing bucket that
// finds its shard full with nothing evictable is ErrFull.
func (s *Store) SettleAt(now time.Time, c Check) (int64, error) {
	if err := c.Limit.Validate(); err != nil {
		return 0, err
	}
	if c.Limit.Algorithm != TokenBucket {
		return 0, fmt.Errorf("%w: only token_bucket limits settle, not %s", ErrInvalid, c.Limit.Algorithm)
	}
	sh, h := s.locate(c.Name, c.Key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	ns := now.UnixNano()
	idx, ok := sh.find(h, c.Name, c.Key)
	if !ok {
		var st State
		t, whole, frac := tbLoad(c.Limit, &st, ns)
		tbStore(c.Limit, &st, t, whole, frac)
		if !s.reserve(uint32(h&s.mask), now, nil) {
			return 0, ErrFull
		}
		sh.insert(h, c.Name, c.Key, st)
		return int64(whole), nil
	}
	st := &sh.at(idx).st
	migrate(c.Limit, st, ns)
	t, whole, frac := tbLoad(c.Limit, st, ns)
	tbStore(c.Limit, st, t, whole, frac)
	return int64(whole), nil
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
		si := uint32((start + uint64(i)) & s.mask)
		sh := &s.shards[si]
		sh.mu.Lock()
		done += s.evict(si, now, max-done, -1, nil)
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
		for idx := range sh.used {
			sl := sh.at(idx)
			if sl.name == 0 {
				continue
			}
			name := sh.names[sl.name-1].s
			if pick != nil && !pick(name, sl.key) {
				continue
			}
			out = append(out, Entry{Name: name, Key: sl.key, Snapshot: exportAt(sl.st, ns), Limit: sh.carried[idx]})
			if remove {
				s.remove(sh, idx)
				sh.gen++
			}
		}
		sh.mu.Unlock()
	}
	return out
}

// MergeAt folds exported entries into the store at now, conservatively: an
// existing bucket keeps the fewer tokens of the two, a missing one is
// created from the snapshot. limit returns the policy in force for an
// entry's name and the Limit it carries (Entry.Limit, zero for none), and
// whether that policy is the carried one, to be kept with the bucket as
// Check.Carry keeps it; entries it refuses are skipped, and so are new
// buckets that find their shard full with nothing evictable.
func (s *Store) MergeAt(now time.Time, entries []Entry, limit func(name string, carried Limit) (l Limit, carry, ok bool)) {
	ns := now.UnixNano()
	for i := range entries {
		e := &entries[i]
		l, carry, ok := limit(e.Name, e.Limit)
		if !ok || l.Validate() != nil {
			continue
		}
		sh, h := s.locate(e.Name, e.Key)
		sh.mu.Lock()
		sh.gen++
		idx, found := sh.find(h, e.Name, e.Key)
		if found {
			mergeAt(l, &sh.at(idx).st, e.Snapshot, ns)
		} else if st := importAt(l, e.Snapshot, ns); st != (State{}) {
			if s.reserve(uint32(h&s.mask), now, nil) {
				idx, found = sh.insert(h, e.Name, e.Key, st), true
			}
		}
		if found && carry {
			sh.carry(idx, l)
		}
		sh.mu.Unlock()
	}
}

// Has reports whether the store holds a bucket for (name, key).
func (s *Store) Has(name, key string) bool {
	sh, h := s.locate(name, key)
	sh.mu.Lock()
	_, ok := sh.find(h, name, key)
	sh.mu.Unlock()
	return ok
}

// SnapshotAt returns the snapshot of the bucket (name, key) as of now
// without changing the store, for a replica of it. ok is false when the
// store holds no such bucket.
func (s *Store) SnapshotAt(now time.Time, name, key string) (Entry, bool) {
	sh, h := s.locate(name, key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	idx, ok := sh.find(h, name, key)
	if !ok {
		return Entry{}, false
	}
	return sh.entryAt(idx, name, key, now), true
}

// entryAt is the Entry of the bucket (name, key) at slot idx as of now,
// with the inline limit it carries. The caller holds sh.mu.
func (sh *shard) entryAt(idx uint32, name, key string, now time.Time) Entry {
	return Entry{Name: name, Key: key, Snapshot: exportAt(sh.at(idx).st, now.UnixNano()), Limit: sh.carried[idx]}
}

// ExtractAt removes the bucket (name, key) and returns its snapshot as of
// now, for a new owner that pulls a key on its first miss. ok is false when
// the store holds no such bucket.
func (s *Store) ExtractAt(now time.Time, name, key string) (Entry, bool) {
	sh, h := s.locate(name, key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	idx, ok := sh.find(h, name, key)
	if !ok {
		return Entry{}, false
	}
	e := sh.entryAt(idx, name, key, now)
	s.remove(sh, idx)
	sh.gen++
	return e, true
}
