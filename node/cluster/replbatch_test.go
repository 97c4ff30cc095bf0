package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/bucket"
	"github.com/weir-rl/weir/node/placement"
	"github.com/weir-rl/weir/ring"
	"github.com/weir-rl/weir/transport"
)

// TestFlushReusesEmptiedBatches: a flush's batches go back to the log
// emptied, every entry cleared, and the next flush fills them again,
// started at its own instant; a batch grown past four MaxBatch (a
// resync's) gives its room back instead.
func TestFlushReusesEmptiedBatches(t *testing.T) {
	cfg := DefaultReplicationConfig()
	r := newChangeLog(cfg, nil)
	t0 := time.Unix(1_800_000_000, 0)
	bs := r.batches(nil, t0)
	b := bs.to("n2:7947")
	b.st.Buckets = append(b.st.Buckets, bucket.Entry{Name: "hot", Key: "a"})
	b.buckets = append(b.buckets, keyID{Limit: "hot", Key: "a"})
	b.dropped = append(b.dropped, transport.Key{Limit: "hot", Key: "b"})
	big := bs.to("n3:7947")
	big.st.Buckets = make([]bucket.Entry, 1, 4*cfg.MaxBatch+1)
	r.keep(bs)

	t1 := t0.Add(time.Second)
	next := r.batches(nil, t1)
	got := map[*replBatch]bool{next.to("n3:7947"): true, next.to("n2:7947"): true}
	if !got[b] || !got[big] {
		t.Fatal("the next flush did not reuse the last flush's batches")
	}
	for nb := range got {
		if len(nb.st.Buckets)+len(nb.buckets)+len(nb.dropped) != 0 || !nb.oldest.Equal(t1) {
			t.Errorf("a reused batch holds %d buckets, %d keys, %d dropped, oldest %v; want none, oldest %v",
				len(nb.st.Buckets), len(nb.buckets), len(nb.dropped), nb.oldest, t1)
		}
	}
	if e := b.st.Buckets[:1][0]; e != (bucket.Entry{}) {
		t.Errorf("the emptied batch still holds %+v", e)
	}
	if k := b.buckets[:1][0]; k != (keyID{}) {
		t.Errorf("the emptied batch still holds key %+v", k)
	}
	if big.st.Buckets != nil {
		t.Errorf("a batch of room %d kept it (over %d)", cap(big.st.Buckets), 4*cfg.MaxBatch)
	}
}

// trioSnapshot is n1's placement in a ring of three live members.
func trioSnapshot() *placement.Snapshot {
	var ms []ring.Member
	for i := 1; i <= 3; i++ {
		name := fmt.Sprintf("n%d", i)
		ms = append(ms, ring.Member{Name: name, Addr: name + ":7946", State: ring.Alive, Meta: ring.Meta{GRPCAddr: name + ":7947"}})
	}
	return placement.New(placement.Config{Self: "n1"}, placement.State{View: ring.NewView(1, "n1", ms), Joined: true})
}

// BenchmarkFlushBatches is a flush's batching of 1,000 changed keys in
// debt that n1 owns in a ring of three, to their two successors (the
// bucket snapshots, the successor lookups, the batches), sending nothing:
// with transport's BenchmarkReplicate and BenchmarkReplicaApply, what a
// replicated take costs. lookup is keys whose state the flush looks up in
// the store (changed more than once, or not by a take), captured keys
// changed once by a take, sent in the state it reported.
func BenchmarkFlushBatches(b *testing.B) {
	c, eng := member(b)
	snap := trioSnapshot()
	now := time.Now()
	var keys []keyID
	for i := 0; len(keys) < 1000; i++ {
		k := fmt.Sprintf("tenant:%06d", i)
		if _, ok := snap.Successor("hot", k); !ok {
			continue // not n1's
		}
		if _, err := eng.Take(context.Background(), []api.Check{{Limit: "hot", Key: k, Cost: 1}}); err != nil {
			b.Fatal(err)
		}
		keys = append(keys, keyID{Limit: "hot", Key: k})
	}
	debt := fullAt(b, now.Add(time.Second))
	for _, tc := range []struct {
		name   string
		change change
	}{{"lookup", unknown(now)}, {"captured", change{first: now, full: debt.FullAt().UnixNano(), after: debt}}} {
		b.Run(tc.name, func(b *testing.B) {
			dirty := map[keyID]change{}
			for _, k := range keys {
				dirty[k] = tc.change
			}
			r := newChangeLog(DefaultReplicationConfig(), nil)
			b.ReportAllocs()
			for b.Loop() {
				bs := r.batches(snap, now)
				c.batchBuckets(bs, dirty, nil)
				n := 0
				for _, rb := range bs.byAddr {
					n += len(rb.st.Buckets)
				}
				if n != len(dirty) {
					b.Fatalf("%d of %d keys batched", n, len(dirty))
				}
				r.keep(bs)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(dirty)), "ns/key")
		})
	}
}
