package cluster

import (
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-rl/weir/bucket"
	"github.com/weir-rl/weir/ring"
)

// fullAt is a token bucket's state after an admitted take that leaves it
// full again at full: a second's debt, taken a second before.
func fullAt(t testing.TB, full time.Time) bucket.State {
	t.Helper()
	lim := bucket.Limit{Algorithm: bucket.TokenBucket, Capacity: 2e9, Rate: bucket.Rate{N: 1e9, Per: time.Second}}
	var s bucket.State
	if d, err := bucket.TakeAt(lim, &s, full.Add(-time.Second), 1e9); err != nil || !d.Allowed {
		t.Fatalf("take: %+v, %v", d, err)
	}
	if !s.FullAt().Equal(full) {
		t.Fatalf("the state is full at %v, want %v", s.FullAt(), full)
	}
	return s
}

// TestChangeLogRecordsNothingAlone: while the ring has no other live
// member the change log records no change; a resync with a peer records
// them again, and every resync asks the next flush for every key.
func TestChangeLogRecordsNothingAlone(t *testing.T) {
	r := newChangeLog(DefaultReplicationConfig(), nil)
	now := time.Unix(1_800_000_000, 0)
	r.resync(true)
	r.Bucket("l", "a", now, bucket.State{}, false)
	r.Lease("l", "b", now)
	b, l, all := r.take()
	if len(b) != 0 || len(l) != 0 || !all {
		t.Fatalf("alone: %d buckets, %d leases recorded, all %v; want none and all", len(b), len(l), all)
	}
	r.resync(false)
	r.Bucket("l", "a", now, bucket.State{}, false)
	r.Lease("l", "b", now)
	b, l, all = r.take()
	if len(b) != 1 || len(l) != 1 || !all {
		t.Fatalf("with a peer: %d buckets, %d leases recorded, all %v; want one each and all", len(b), len(l), all)
	}
}

// TestChangeLogSkipsShallowDebt: a take that leaves its bucket at most one
// interval from full is not recorded; one that leaves more is, as is a
// change that does not say (the zero State), and a recorded key stays
// recorded when a shallower take follows.
func TestChangeLogSkipsShallowDebt(t *testing.T) {
	r := newChangeLog(DefaultReplicationConfig(), nil) // 20 ms
	r.resync(false)
	now := time.Unix(1_800_000_000, 0)
	in := func(d time.Duration) time.Time { return now.Add(d) }
	r.Bucket("l", "shallow", now, fullAt(t, in(time.Nanosecond)), false)
	r.Bucket("l", "edge", now, fullAt(t, in(20*time.Millisecond)), false)
	r.Bucket("l", "deep", now, fullAt(t, in(20*time.Millisecond+time.Nanosecond)), false)
	r.Bucket("l", "deep", in(time.Millisecond), fullAt(t, in(2*time.Millisecond)), false)
	r.Bucket("l", "unknown", now, bucket.State{}, false)
	b, _, _ := r.take()
	got := map[string]bool{}
	for k := range b {
		got[k.Key] = true
	}
	if len(got) != 2 || !got["deep"] || !got["unknown"] {
		t.Fatalf("recorded %v, want deep and unknown only", got)
	}
	if d := b[keyID{Limit: "l", Key: "deep"}]; !d.first.Equal(now) || d.full != in(20*time.Millisecond+time.Nanosecond).UnixNano() {
		t.Errorf("deep: first %v full %v, want its first take's", d.first.Sub(now), time.Unix(0, d.full).Sub(now))
	}
}

func TestAlone(t *testing.T) {
	self := ring.Member{Name: "n1", State: ring.Alive}
	other := func(s ring.State) ring.Member { return ring.Member{Name: "n2", State: s} }
	for _, tc := range []struct {
		members []ring.Member
		want    bool
	}{
		{[]ring.Member{self}, true},
		{[]ring.Member{self, other(ring.Dead)}, true},
		{[]ring.Member{self, other(ring.Left)}, true},
		{[]ring.Member{self, other(ring.Suspect)}, true},
		{[]ring.Member{self, other(ring.Alive)}, false},
	} {
		if got := alone(ring.NewView(1, "n1", tc.members)); got != tc.want {
			t.Errorf("%v: alone %v, want %v", tc.members, got, tc.want)
		}
	}
}

// TestChangeLogKeepsTheLatestFull: a key's change in a batch keeps the
// latest full instant its takes reported, and a change that did not say
// (the zero State) makes it unknown for the rest of the batch, so the
// flush never skips a bucket some change left in debt past that instant.
// The state a take left is kept only for a key's one change in the batch
// (a second voids it, in whichever order the two reported), and not for a
// bucket that carries its limit. A failed batch's key comes back to be
// looked up, unknown unless changed again since.
func TestChangeLogKeepsTheLatestFull(t *testing.T) {
	cfg := DefaultReplicationConfig()
	cfg.Interval = time.Millisecond // every take below leaves more debt than that
	r := newChangeLog(cfg, nil)
	r.resync(false)
	now := time.Unix(1_800_000_000, 0)
	ms := func(n int) time.Time { return now.Add(time.Duration(n) * time.Millisecond) }
	r.Bucket("l", "a", now, fullAt(t, ms(30)), false)
	r.Bucket("l", "a", ms(1), fullAt(t, ms(50)), false)
	r.Bucket("l", "a", ms(2), fullAt(t, ms(40)), false) // an earlier full (a report out of order): 50 stays
	r.Bucket("l", "b", now, fullAt(t, ms(10)), false)
	r.Bucket("l", "b", ms(1), bucket.State{}, false)
	r.Bucket("l", "b", ms(2), fullAt(t, ms(20)), false)
	one := fullAt(t, ms(70))
	r.Bucket("l", "one", ms(3), one, false)
	r.Bucket("l", "inline", ms(3), fullAt(t, ms(70)), true)
	b, _, _ := r.take()
	a, bb := b[keyID{Limit: "l", Key: "a"}], b[keyID{Limit: "l", Key: "b"}]
	if !a.first.Equal(now) || a.full != ms(50).UnixNano() || a.after != (bucket.State{}) {
		t.Errorf("a: first %v full %v state %+v, want the first change, the latest full (+50ms) and no state", a.first.Sub(now), time.Unix(0, a.full).Sub(now), a.after)
	}
	if bb.full != unknownFull || bb.after != (bucket.State{}) {
		t.Errorf("b: full %v state %+v after a change that did not say, want unknown", time.Unix(0, bb.full).Sub(now), bb.after)
	}
	if got := b[keyID{Limit: "l", Key: "one"}]; got.after != one || got.full != ms(70).UnixNano() {
		t.Errorf("one: state %+v full %v, want its take's state and +70ms", got.after, time.Unix(0, got.full).Sub(now))
	}
	if got := b[keyID{Limit: "l", Key: "inline"}]; got.after != (bucket.State{}) || got.full != ms(70).UnixNano() {
		t.Errorf("inline: state %+v full %v, want no state (its limit is in the store) and +70ms", got.after, time.Unix(0, got.full).Sub(now))
	}
	// a fails to send and is not changed again; c fails and was changed
	// again with a known full.
	r.Bucket("l", "c", ms(5), fullAt(t, ms(60)), false)
	r.requeue([]keyID{{Limit: "l", Key: "a"}, {Limit: "l", Key: "c"}}, nil, ms(-5))
	b, _, _ = r.take()
	if got := b[keyID{Limit: "l", Key: "a"}]; got.full != unknownFull || !got.first.Equal(ms(-5)) {
		t.Errorf("requeued a: first %v full %v, want -5ms and unknown", got.first.Sub(now), got.full)
	}
	if got := b[keyID{Limit: "l", Key: "c"}]; got.full != ms(60).UnixNano() || !got.first.Equal(ms(-5)) || got.after != (bucket.State{}) {
		t.Errorf("requeued c: first %v full %v state %+v, want -5ms, its new change's +60ms and no state",
			got.first.Sub(now), time.Unix(0, got.full).Sub(now), got.after)
	}
}

// BenchmarkChangeLogBucket is replication's share of the decision path:
// one admitted take's Bucket call, over 100,000 keys, for a take that
// leaves a nanosecond of debt (the bench limit's) and one that leaves a
// second (bench-debt's), with a flush taking the batch every 1,024 calls.
func BenchmarkChangeLogBucket(b *testing.B) {
	for _, tc := range []struct {
		name string
		debt time.Duration
	}{{"shallow", time.Nanosecond}, {"deep", time.Second}} {
		b.Run(tc.name, func(b *testing.B) {
			r, keys, now, after := benchLog(b, tc.debt)
			for i := 0; b.Loop(); i++ {
				r.Bucket("bench", keys[i%len(keys)], now, after, false)
				if i%1024 == 1023 {
					d, l, _ := r.take()
					r.recycle(d, l)
				}
			}
		})
	}
}

// BenchmarkChangeLogBucketParallel is BenchmarkChangeLogBucket's deep case
// from every P at once, as the decision path calls it under load: what the
// change log costs when takes of different keys meet there. Each goroutine
// takes the batch every 1,024 of its calls, as the stream loop would.
func BenchmarkChangeLogBucketParallel(b *testing.B) {
	r, keys, now, after := benchLog(b, time.Second)
	var seq atomic.Uint64
	b.RunParallel(func(pb *testing.PB) {
		for i := int(seq.Add(1_000_003)); pb.Next(); i++ {
			r.Bucket("bench", keys[i%len(keys)], now, after, false)
			if i%1024 == 1023 {
				d, l, _ := r.take()
				r.recycle(d, l)
			}
		}
	})
}

// benchLog returns the change log benchmarks' log (a peer present, no
// kicks: the benchmarks take the batch themselves), their 100,000 keys,
// their instant and a take's state that leaves debt of debt then.
func benchLog(b *testing.B, debt time.Duration) (r *changeLog, keys []string, now time.Time, after bucket.State) {
	keys = make([]string, 100_000)
	for i := range keys {
		keys[i] = "tenant:" + strconv.Itoa(i)
	}
	cfg := DefaultReplicationConfig()
	cfg.MaxBatch = 1 << 30
	r = newChangeLog(cfg, nil)
	r.resync(false)
	now = time.Unix(1_800_000_000, 0)
	return r, keys, now, fullAt(b, now.Add(debt))
}
