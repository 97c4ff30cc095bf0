package dedup

import (
	"math/rand/v2"
	"testing"
	"time"
)

// model is the Cache's contract in its plainest form, a map and a queue of
// (id, first seen, generation): what the ring and its index must match op
// for op, eviction order and counts included.
type model struct {
	cfg     Config
	m       map[int]modelEntry
	q       []modelQueued
	maxRing int
	gen     uint64
	evicted uint64
}

type modelEntry struct {
	gen  uint64
	done bool
	v    int
}

type modelQueued struct {
	id  int
	at  int64
	gen uint64
}

func (c *model) expire(now time.Time) {
	for len(c.q) > 0 && c.q[0].at <= now.UnixNano()-int64(c.cfg.Window) {
		c.pop(false)
	}
}

func (c *model) pop(early bool) {
	q := c.q[0]
	c.q = c.q[1:]
	if e, ok := c.m[q.id]; ok && e.gen == q.gen {
		delete(c.m, q.id)
		if early {
			c.evicted++
		}
	}
}

func (c *model) makeRoom() {
	for len(c.m) >= c.cfg.MaxEntries && len(c.q) > 0 {
		c.pop(true)
	}
}

func (c *model) record(now time.Time, id int, e modelEntry) {
	if len(c.q) == c.maxRing {
		c.pop(true)
	}
	c.gen++
	e.gen = c.gen
	c.m[id] = e
	c.q = append(c.q, modelQueued{id: id, at: now.UnixNano(), gen: c.gen})
}

func (c *model) lookup(now time.Time, id int) (int, Status) {
	c.expire(now)
	e, ok := c.m[id]
	switch {
	case !ok:
		return 0, Fresh
	case !e.done:
		return 0, Pending
	}
	return e.v, Done
}

// TestCacheMatchesModel drives a Cache and the model with the same random
// operations over a small id space, so ids collide, expire, are evicted,
// aborted and replaced often, and the ring wraps and grows: every answer,
// Len and Evicted must agree after every step.
func TestCacheMatchesModel(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 1))
		cfg := Config{Window: time.Duration(1+rng.IntN(50)) * time.Millisecond, MaxEntries: 1 + rng.IntN(40)}
		c := New[int, int](cfg)
		m := &model{cfg: cfg, m: map[int]modelEntry{}, maxRing: c.maxRing}
		now := time.Unix(1_700_000_000, 0)
		ids := 1 + rng.IntN(120)
		for step := range 20_000 {
			now = now.Add(time.Duration(rng.IntN(300)) * time.Microsecond)
			id, v := rng.IntN(ids), rng.IntN(1000)
			var got, want int
			var gotSt, wantSt Status
			switch op := rng.IntN(10); {
			case op < 4:
				got, gotSt = c.BeginAt(now, id)
				want, wantSt = m.lookup(now, id)
				if wantSt == Fresh {
					m.makeRoom()
					m.record(now, id, modelEntry{})
				}
			case op < 6:
				c.Finish(id, v)
				if e, ok := m.m[id]; ok && !e.done {
					e.done, e.v = true, v
					m.m[id] = e
				}
			case op < 7:
				c.Abort(id)
				if e, ok := m.m[id]; ok && !e.done {
					delete(m.m, id)
				}
			case op < 8:
				c.Put(now, id, v)
				m.expire(now)
				if _, ok := m.m[id]; !ok {
					m.makeRoom()
				}
				m.record(now, id, modelEntry{done: true, v: v})
			case op < 9:
				got, gotSt = c.Lookup(now, id)
				want, wantSt = m.lookup(now, id)
			default:
				c.ExpireAt(now)
				m.expire(now)
			}
			if got != want || gotSt != wantSt || c.Len() != len(m.m) || c.Evicted() != m.evicted {
				t.Fatalf("seed %d step %d id %d: got %d %v len %d evicted %d; model %d %v len %d evicted %d",
					seed, step, id, got, gotSt, c.Len(), c.Evicted(), want, wantSt, len(m.m), m.evicted)
			}
		}
	}
}

// BenchmarkCacheSteady measures one id's life in a cache at its steady
// state: recorded, finished, looked up once, and expired window later,
// with 30,000 ids held (one engine shard at ~50k request ids a second).
func BenchmarkCacheSteady(b *testing.B) {
	type id struct {
		n uint8
		b [32]byte
	}
	c := New[id, [80]byte](Config{Window: 10 * time.Second, MaxEntries: 1 << 16})
	now := time.Unix(1_700_000_000, 0)
	step := 10 * time.Second / 30_000
	var k id
	k.n = 32
	b.ReportAllocs()
	i := uint64(0)
	for b.Loop() {
		i++
		for j := range 8 {
			k.b[j] = byte(i >> (8 * j))
		}
		now = now.Add(step)
		if _, st := c.BeginAt(now, k); st != Fresh {
			b.Fatal(st)
		}
		c.Finish(k, [80]byte{1})
		if _, st := c.Lookup(now, k); st != Done {
			b.Fatal(st)
		}
	}
}
