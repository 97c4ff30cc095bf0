package transport

import (
	"context"
	"errors"
	"fmt"
	"reflect"
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
