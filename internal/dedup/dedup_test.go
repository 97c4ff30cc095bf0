package dedup

import (
	"testing"
	"time"
)

func TestCacheSteps(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	c := New[string, string](Config{Window: 100 * time.Millisecond, MaxEntries: 3})
	type step struct {
		at     time.Time
		op     string // begin, finish, abort
		id, v  string
		want   Status
		wantV  string
		length int
	}
	steps := []step{
		{at: ms(0), op: "begin", id: "a", want: Fresh, length: 1},
		{at: ms(1), op: "begin", id: "a", want: Pending, length: 1},
		{op: "finish", id: "a", v: "A", length: 1},
		{at: ms(2), op: "begin", id: "a", want: Done, wantV: "A", length: 1},
		{op: "finish", id: "a", v: "other", length: 1}, // a finished id keeps its answer
		{at: ms(3), op: "begin", id: "a", want: Done, wantV: "A", length: 1},
		{op: "abort", id: "a", length: 1}, // a finished id is kept
		{at: ms(10), op: "begin", id: "b", want: Fresh, length: 2},
		{op: "abort", id: "b", length: 1},
		{at: ms(11), op: "begin", id: "b", want: Fresh, length: 2},           // aborted: decided afresh
		{at: ms(5), op: "begin", id: "a", want: Done, wantV: "A", length: 2}, // time going backwards expires nothing
		{at: ms(99), op: "begin", id: "a", want: Done, wantV: "A", length: 2},
		{at: ms(100), op: "begin", id: "a", want: Fresh, length: 2}, // window over: forgotten, recorded again
		{at: ms(101), op: "begin", id: "c", want: Fresh, length: 3},
		{at: ms(102), op: "begin", id: "d", want: Fresh, length: 3}, // full: oldest (b) evicted
		{at: ms(103), op: "begin", id: "a", want: Pending, length: 3},
		{at: ms(104), op: "begin", id: "b", want: Fresh, length: 3}, // b was evicted; a goes now
		{at: ms(105), op: "begin", id: "a", want: Fresh, length: 3}, // and c goes
	}
	for i, s := range steps {
		switch s.op {
		case "begin":
			v, st := c.BeginAt(s.at, s.id)
			if st != s.want || v != s.wantV {
				t.Fatalf("step %d: BeginAt(%v, %q) = %q, %v; want %q, %v", i, s.at.Sub(t0), s.id, v, st, s.wantV, s.want)
			}
		case "finish":
			c.Finish(s.id, s.v)
		case "abort":
			c.Abort(s.id)
		}
		if c.Len() != s.length {
			t.Fatalf("step %d: Len %d, want %d", i, c.Len(), s.length)
		}
	}
	if c.Evicted() != 3 {
		t.Fatalf("Evicted %d, want 3 (b, a, c)", c.Evicted())
	}
}

func TestCacheBounded(t *testing.T) {
	t0 := time.Unix(0, 0)
	c := New[string, int](Config{Window: time.Hour, MaxEntries: 100})
	for i := range 10_000 {
		c.BeginAt(t0.Add(time.Duration(i)), string(rune('a'+i%26))+string(rune(i)))
		if c.Len() > 100 {
			t.Fatalf("Len %d over MaxEntries", c.Len())
		}
	}
	if c.n > 200 || ringSlots(c) > max(256, chunkLen) { // a ring smaller than a chunk is held in one
		t.Fatalf("queue holds %d entries in a ring of %d for %d ids", c.n, ringSlots(c), c.Len())
	}
	// Everything expires after the window.
	c.BeginAt(t0.Add(2*time.Hour), "z")
	if c.Len() != 1 {
		t.Fatalf("Len %d after the window, want 1", c.Len())
	}
	// Ids that leave their queue slot behind (aborted, or recorded again
	// by Put) do not grow the ring past its bound either, and the newest
	// are still remembered.
	for i := range 10_000 {
		id := "y" + string(rune(i))
		c.BeginAt(t0.Add(2*time.Hour), id)
		if i%2 == 0 {
			c.Abort(id)
		} else {
			c.Put(t0.Add(2*time.Hour), id, i)
		}
	}
	if c.n > 256 || ringSlots(c) > max(256, chunkLen) || c.Len() > 100 {
		t.Fatalf("after aborts and Puts: %d queued in a ring of %d, %d ids held", c.n, ringSlots(c), c.Len())
	}
	if v, st := c.Lookup(t0.Add(2*time.Hour), "y"+string(rune(9999))); st != Done || v != 9999 {
		t.Fatalf("newest id: %v, %v; want 9999, done", v, st)
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []Config{{Window: 0, MaxEntries: 1}, {Window: time.Second}, {Window: time.Second, MaxEntries: MaxMaxEntries + 1}} {
		if c.Validate() == nil {
			t.Errorf("%+v validated", c)
		}
	}
}

// A cache that sees no new id still lets its expired ids go when told the
// time, and starts over empty once none is left.
func TestCacheExpireAt(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	c := New[string, string](Config{Window: 100 * time.Millisecond, MaxEntries: 1000})
	for i := range 500 {
		id := string(rune('a'+i%26)) + time.Duration(i).String()
		c.BeginAt(t0.Add(time.Duration(i/10)*time.Millisecond), id)
		c.Finish(id, "answer")
	}
	c.ExpireAt(t0.Add(120 * time.Millisecond)) // ids first seen at 20 ms or before go: 210 of them
	if got := c.Len(); got != 290 {
		t.Fatalf("Len after a partial expiry = %d, want 290", got)
	}
	c.ExpireAt(t0.Add(50 * time.Millisecond)) // time going backwards expires nothing
	if got := c.Len(); got != 290 {
		t.Fatalf("Len after time went back = %d, want 290", got)
	}
	c.ExpireAt(t0.Add(time.Second))
	if got := c.Len(); got != 0 || c.n != 0 || c.chunks != nil || c.spare != nil {
		t.Fatalf("after the window: Len %d, queued %d, ring %d; want an empty cache", got, c.n, ringSlots(c))
	}
	if c.Evicted() != 0 {
		t.Fatalf("Evicted %d: expiry is not eviction", c.Evicted())
	}
	// The emptied cache works as before: an id it forgot is fresh again.
	if _, st := c.BeginAt(t0.Add(time.Second), "a0s"); st != Fresh {
		t.Fatalf("forgotten id: %v, want fresh", st)
	}
	c.Finish("a0s", "again")
	if v, st := c.BeginAt(t0.Add(time.Second), "a0s"); st != Done || v != "again" {
		t.Fatalf("after restart: %q, %v; want \"again\", done", v, st)
	}
}

// Lookup never records; Put records a decided answer, replacing a held
// one, and its window starts then.
func TestCacheLookupAndPut(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	c := New[string, string](Config{Window: 100 * time.Millisecond, MaxEntries: 2})
	if _, st := c.Lookup(ms(0), "a"); st != Fresh || c.Len() != 0 {
		t.Fatalf("Lookup of an unknown id: %v, Len %d; want fresh and nothing recorded", st, c.Len())
	}
	c.BeginAt(ms(0), "a")
	if _, st := c.Lookup(ms(1), "a"); st != Pending {
		t.Fatalf("Lookup of a pending id: %v", st)
	}
	c.Put(ms(2), "a", "A")
	c.Put(ms(50), "a", "A2") // replaces, and restarts the window
	if v, st := c.Lookup(ms(120), "a"); st != Done || v != "A2" {
		t.Fatalf("Lookup after Put: %q, %v; want \"A2\", done", v, st)
	}
	if c.Len() != 1 {
		t.Fatalf("Len %d after two Puts of one id, want 1", c.Len())
	}
	c.Put(ms(121), "b", "B")
	c.Put(ms(122), "c", "C") // full: the oldest (a) is evicted
	if _, st := c.Lookup(ms(122), "a"); st != Fresh || c.Len() != 2 || c.Evicted() != 1 {
		t.Fatalf("after a Put into a full cache: a %v, Len %d, Evicted %d; want a fresh, 2, 1", st, c.Len(), c.Evicted())
	}
	if _, st := c.Lookup(ms(300), "c"); st != Fresh || c.Len() != 0 {
		t.Fatalf("after the window: c %v, Len %d; want fresh, 0", st, c.Len())
	}
}

// ringSlots is how many slots c's ring holds memory for, its spare chunk
// included.
func ringSlots[K comparable, V any](c *Cache[K, V]) int {
	n := 0
	if c.spare != nil {
		n = chunkLen
	}
	for _, ch := range c.chunks {
		if ch != nil {
			n += chunkLen
		}
	}
	return n
}

// The ring holds memory for about the ids of one window as the window
// moves round it, and a slot stays where it was written while the ring
// grows.
func TestCacheRingFollowsWindow(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	c := New[int, int](Config{Window: time.Second, MaxEntries: 1 << 16})
	c.BeginAt(t0, -1)
	first := c.at(c.find(-1, c.hash(-1)))
	most := 0
	for i := range 200_000 { // 10,000 ids a second for 20 s: the ring wraps about twice
		now := t0.Add(time.Duration(i) * 100 * time.Microsecond)
		c.BeginAt(now, i)
		if i == 5_000 && c.at(c.find(-1, c.hash(-1))) != first {
			t.Fatal("a slot moved while the ring grew")
		}
		most = max(most, ringSlots(c))
	}
	if want := 10_000 + 3*chunkLen; most > want {
		t.Fatalf("the ring held %d slots for a window of 10,000 ids, want at most %d", most, want)
	}
	if c.Len() != 10_000 || c.Evicted() != 0 {
		t.Fatalf("Len %d, Evicted %d; want 10,000 held and none evicted", c.Len(), c.Evicted())
	}
}

// BenchmarkCacheFill measures filling an empty cache with 65,536 ids, as
// an engine shard's cache fills in the first seconds of a load: the ring
// and index grow all the way.
func BenchmarkCacheFill(b *testing.B) {
	type id struct {
		n uint8
		b [32]byte
	}
	now := time.Unix(1_700_000_000, 0)
	b.ReportAllocs()
	for b.Loop() {
		c := New[id, [80]byte](Config{Window: 10 * time.Second, MaxEntries: 1 << 16})
		var k id
		k.n = 32
		for i := range 1 << 16 {
			k.b[0], k.b[1], k.b[2] = byte(i), byte(i>>8), byte(i>>16)
			c.BeginAt(now, k)
			c.Finish(k, [80]byte{1})
		}
	}
}
