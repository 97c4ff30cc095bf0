package node

import (
	"fmt"
	"testing"
	"time"

	"github.com/weir-rl/weir/node/limits"
	"github.com/weir-rl/weir/transport"
)

// BenchmarkReplicaApply measures the successor's merge of a replication
// batch of 256 bucket entries in debt into its replica store, over 100,000
// keys (the first pass inserts them, later ones merge into them): with
// transport's BenchmarkReplicate, what one replicated key costs.
func BenchmarkReplicaApply(b *testing.B) {
	f, err := limits.Parse([]byte(simLimits), "bench")
	if err != nil {
		b.Fatal(err)
	}
	rs := newReplicas(DefaultReplicationConfig())
	const n, keys = 256, 100_000
	batches := make([][]transport.HandoffEntry, keys/n)
	for i := range batches {
		batches[i] = make([]transport.HandoffEntry, n)
		for j := range batches[i] {
			batches[i][j] = transport.HandoffEntry{
				Kind: transport.HandoffBucket, Limit: "hot", Key: fmt.Sprintf("tenant:%06d", i*n+j),
				Bucket: transport.BucketState{Count: 41, Since: time.Millisecond, UntilFull: time.Hour},
			}
		}
	}
	now := time.Unix(1_000_000, 0)
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		rs.apply(now, f, "n1", batches[i%len(batches)], nil)
		i++
	}
	if rs.len() == 0 {
		b.Fatal("the replica store holds nothing")
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/entry")
}
