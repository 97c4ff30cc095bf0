package transport

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-rl/weir/bucket"
	"github.com/weir-rl/weir/lease"
	"github.com/weir-rl/weir/transport/peerpb"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Handoff and replica batches over a pool.

// handoffPeers starts a recording server and a pool that calls it as
// member self, both with the same secret.
func handoffPeers(t *testing.T, self string) (*recorder, string, *Pool) {
	t.Helper()
	rec := &recorder{}
	tok := testCreds(t, "s")
	addr := startServer(t, rec, tok)
	cfg := LocalConfig()
	cfg.Credentials = tok
	cfg.Self = self
	return rec, addr, newTestPool(t, cfg)
}

func TestHandoffRoundTrip(t *testing.T) {
	rec, addr, p := handoffPeers(t, "old-owner")

	var st State
	for i := range 2*handoffChunk + 4 {
		st.Buckets = append(st.Buckets, bucket.Entry{Name: "l", Key: fmt.Sprint(i), Snapshot: bucket.Snapshot{Count: int64(i), Since: -1}})
	}
	st.Leases = lease.Handoff{NextFencing: 18, Leases: []lease.Snapshot{{ID: "lease", Limit: "db", Key: "k", Fencing: 17, TTL: time.Second}}}
	if err := p.Handoff(context.Background(), addr, st); err != nil {
		t.Fatal(err)
	}
	got, sizes := rec.handedOver()
	rec.mu.Lock()
	from := rec.from
	rec.handoffs = nil
	rec.mu.Unlock()
	if len(sizes) != 3 || sizes[0] != handoffChunk || sizes[2] != 5 {
		t.Errorf("chunks %v, want [%d %d 5]", sizes, handoffChunk, handoffChunk)
	}
	if !reflect.DeepEqual(got, st) {
		t.Fatalf("received %+v, want %+v", got, st)
	}
	if from[0] != "old-owner" {
		t.Errorf("from = %q", from[0])
	}

	rec.mu.Lock()
	rec.handoffErr = errors.New("store full")
	rec.mu.Unlock()
	err := p.Handoff(context.Background(), addr, State{Buckets: st.Buckets[:1]})
	if status.Code(err) != codes.Aborted {
		t.Fatalf("failing handler: err = %v, want Aborted", err)
	}
}

// TestReplicateCountsBytes: Replicate returns the size of the messages it
// sent, chunks and heartbeat alike.
func TestReplicateCountsBytes(t *testing.T) {
	_, addr, p := handoffPeers(t, "owner")
	var st State
	for i := range handoffChunk + 3 {
		st.Buckets = append(st.Buckets, bucket.Entry{Name: "l", Key: fmt.Sprint(i), Snapshot: bucket.Snapshot{Count: int64(i), UntilFull: time.Second}})
	}
	dropped := []Key{{Limit: "l", Key: "gone"}}
	want := 0
	for i, chunk := range [][]bucket.Entry{st.Buckets[:handoffChunk], st.Buckets[handoffChunk:]} {
		req := &peerpb.HandoffRequest{From: "owner", Entries: encodeState(State{Buckets: chunk}), Replica: true, Protocol: p.Protocol()}
		if i == 0 {
			req.Dropped = encodeKeys(dropped)
		}
		want += proto.Size(req)
	}
	if n, err := p.Replicate(context.Background(), addr, st, dropped); err != nil || n != want {
		t.Fatalf("Replicate: %d bytes, %v; want %d", n, err, want)
	}
	hb := proto.Size(&peerpb.HandoffRequest{From: "owner", Replica: true, Protocol: p.Protocol()})
	if n, err := p.Replicate(context.Background(), addr, State{}, nil); err != nil || n != hb {
		t.Fatalf("heartbeat: %d bytes, %v; want %d", n, err, hb)
	}
}

// TestConcurrentReplicasKeepTheirBuckets: replica batches sent at once,
// each packing its buckets into a buffer kept from one batch to the next
// (packedBufs), each reach the successor with their own buckets and no
// other batch's: no buffer is filled by one batch while another sends it.
func TestConcurrentReplicasKeepTheirBuckets(t *testing.T) {
	rec, addr, p := handoffPeers(t, "owner")
	p.SetProtocol(V2) // buckets go packed
	const senders, batches, base = 4, 20, 40
	var wg sync.WaitGroup
	for s := range senders {
		wg.Go(func() {
			for b := range batches {
				// Lengths differ from batch to batch, so that a reused
				// buffer holds a longer batch's leftovers.
				var st State
				for i := range base + (s*batches+b)%7*10 {
					e := bucket.Entry{Name: "l", Key: fmt.Sprintf("s%d-b%d/%d", s, b, i)}
					e.Snapshot = bucket.Snapshot{Count: int64(i), UntilFull: time.Second}
					st.Buckets = append(st.Buckets, e)
				}
				if _, err := p.Replicate(context.Background(), addr, st, nil); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.replicas) != senders*batches {
		t.Fatalf("the successor got %d batches, want %d", len(rec.replicas), senders*batches)
	}
	for _, st := range rec.replicas {
		batch, _, _ := strings.Cut(st.Buckets[0].Key, "/")
		var s, b int
		if _, err := fmt.Sscanf(batch, "s%d-b%d", &s, &b); err != nil {
			t.Fatalf("first key %q: %v", st.Buckets[0].Key, err)
		}
		if n := base + (s*batches+b)%7*10; len(st.Buckets) != n {
			t.Fatalf("batch %s arrived with %d buckets, want %d", batch, len(st.Buckets), n)
		}
		for i, e := range st.Buckets {
			if want := fmt.Sprintf("%s/%d", batch, i); e.Key != want || e.Snapshot.Count != int64(i) {
				t.Fatalf("batch %s bucket %d is %q count %d, want %q count %d", batch, i, e.Key, e.Snapshot.Count, want, i)
			}
		}
	}
}
