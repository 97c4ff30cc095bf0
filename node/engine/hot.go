package engine

import (
	"hash/maphash"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/weir-rl/weir/topk"
)

// Hot-key sketch sizes. Each limit gets hotShards sketches of
// hotShardCap keys (1024 keys per limit), so memory is bounded by the
// number of limits in the limits file, whatever the number of keys.
const (
	hotShards   = 8
	hotShardCap = 128
)

// hotKeys counts the cost every (limit, key) asks of this node, admitted or
// denied, in bounded top-k sketches. A request is counted once, at the node
// it arrived at (not at the owner it was forwarded to), so the sketches of
// all nodes cover disjoint parts of the cluster's traffic and merge with
// topk.Merge. Keys never leave it as metric labels. Safe for concurrent
// use.
//
// A key hashes to one of hotShards sketches, each behind its own mutex, so
// concurrent requests rarely wait for one another; the shards of one limit
// cover disjoint keys and merge exactly.
type hotKeys struct {
	seed maphash.Seed
	// limits maps a limit name to its shards. It is copied on write (a new
	// limit is rare) so the decision path reads it without a lock.
	limits atomic.Pointer[map[string]*hotLimit]
	mu     sync.Mutex // serializes writers of limits
}

// hotLimit is the sketches of one limit.
type hotLimit struct {
	shards [hotShards]hotShard
}

// hotShard is one sketch and the mutex that guards it, padded so shards do
// not share a cache line.
type hotShard struct {
	mu sync.Mutex
	s  *topk.Sketch
	_  [40]byte
}

func newHotKeys() *hotKeys {
	h := &hotKeys{seed: maphash.MakeSeed()}
	h.limits.Store(&map[string]*hotLimit{})
	return h
}

// add counts cost asked of (limit, key); denied says it was refused. The
// limit name comes from the limits file, so the map stays small.
func (h *hotKeys) add(limit, key string, cost int64, denied bool) {
	l := (*h.limits.Load())[limit]
	if l == nil {
		l = h.limit(limit)
	}
	sh := &l.shards[maphash.String(h.seed, key)%hotShards]
	sh.mu.Lock()
	sh.s.Add(key, cost, denied)
	sh.mu.Unlock()
}

// limit returns the shards of limit, creating them.
func (h *hotKeys) limit(name string) *hotLimit {
	h.mu.Lock()
	defer h.mu.Unlock()
	old := *h.limits.Load()
	if l := old[name]; l != nil {
		return l
	}
	l := &hotLimit{}
	for i := range l.shards {
		l.shards[i].s = topk.New(hotShardCap)
	}
	next := make(map[string]*hotLimit, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	next[name] = l
	h.limits.Store(&next)
	return l
}

// hotList is one limit's summary: its n heaviest keys on this node and the
// floor bounding every key left out.
type hotList struct {
	limit string
	sum   topk.Summary
}

// summaries returns, for limit (every limit when empty), the n heaviest
// keys on this node, limits in name order.
func (h *hotKeys) summaries(limit string, n int) []hotList {
	m := *h.limits.Load()
	names := make([]string, 0, len(m))
	for name := range m {
		if limit == "" || name == limit {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	out := make([]hotList, 0, len(names))
	for _, name := range names {
		l := m[name]
		parts := make([]topk.Summary, hotShards)
		for i := range l.shards {
			sh := &l.shards[i]
			sh.mu.Lock()
			parts[i] = sh.s.Summary(n)
			sh.mu.Unlock()
		}
		out = append(out, hotList{limit: name, sum: shardMerge(parts, n)})
	}
	return out
}

// shardMerge merges the summaries of one limit's shards, which hold
// disjoint keys: a key's count is its shard's, exact within that shard's
// error, and the floor of the whole is the largest shard floor.
func shardMerge(parts []topk.Summary, n int) topk.Summary {
	var all []topk.Entry
	var floor int64
	for _, p := range parts {
		all = append(all, p.Entries...)
		floor = max(floor, p.Floor)
	}
	// Merge with one part and a zero floor just sorts and cuts.
	top := topk.Merge([]topk.Summary{{Entries: all}}, n)
	if len(top) < len(all) && len(top) > 0 {
		floor = max(floor, top[len(top)-1].Count)
	}
	return topk.Summary{Entries: top, Floor: floor}
}
