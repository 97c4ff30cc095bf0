package transport

import (
	"reflect"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/weir-rl/weir/allot"
	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/bucket"
	"github.com/weir-rl/weir/lease"
	"github.com/weir-rl/weir/transport/peerpb"
)

func TestRequestsRoundTrip(t *testing.T) {
	in := []Request{
		{Op: OpTake, Checks: []api.Check{{Limit: "a", Key: "k1", Cost: 1}, {Limit: "b", Key: "k2", Cost: 7}, {Limit: "c", Key: "{t}x", Cost: 3}}, Epoch: 9, RequestID: "\x00id-1", TraceParent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", Tenant: api.Tenant{Prefix: "tenant:acme:", MaxBuckets: 500}},
		{Op: OpTake, Checks: []api.Check{
			{Limit: "cl.throttle", Key: "u", Cost: 2, Inline: &api.InlineLimit{Algorithm: "gcra", Burst: 16, Rate: "30/60s"}},
			{Limit: "w", Key: "k", Cost: 1, Inline: &api.InlineLimit{Algorithm: "sliding_window", Limit: 100, Window: "1m"}},
			{Limit: "t", Key: "k", Cost: 1, Inline: &api.InlineLimit{Capacity: 6, Rate: "2/s"}},
		}},
		{Op: OpRelease, LeaseID: "lease-1", Epoch: 1 << 40},
		{Op: OpAcquire, Checks: []api.Check{{Limit: "db", Key: "k", Cost: 1}}, Holder: "h", TTL: 30 * time.Second, Wait: 5 * time.Second},
		{Op: OpRefund, Checks: []api.Check{{Limit: "a", Key: "k1", Cost: 1}}},
		{Op: OpRenew, LeaseID: "l2", TTL: time.Millisecond},
		{Op: OpAllot, Checks: []api.Check{{Limit: "a", Key: "k"}}, Holder: "n2", Want: 30, Demand: 612.25, Unspent: 4, Seq: 77},
		{Op: OpReturn, Checks: []api.Check{{Limit: "a", Key: "k"}}, Holder: "n2", Unspent: 3, Seq: 78},
	}
	now := time.Unix(1_700_000_000, 0)
	got := decodeRequests(encodeRequests(in, now), now)
	if !reflect.DeepEqual(got, in) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, in)
	}
	if got := decodeRequests(encodeRequests(nil, now), now); len(got) != 0 {
		t.Fatalf("empty round trip: %v", got)
	}
}

// TestDeadlineTravelsAsBudget: a request's deadline crosses as the time
// left at send and lands on the receiver's clock as arrival plus that, so
// a receiver whose clock is a day off (or any skew) sees the same budget;
// the time in transit is not deducted. A deadline already past is sent as
// 1 ns, which the receiver refuses; none stays none (an older sender).
func TestDeadlineTravelsAsBudget(t *testing.T) {
	sent := time.Unix(1_700_000_000, 0)
	arrived := sent.Add(24*time.Hour + 7*time.Millisecond) // skewed a day, 7 ms in transit
	for _, tc := range []struct {
		name     string
		deadline time.Time
		want     time.Time
	}{
		{"30ms left", sent.Add(30 * time.Millisecond), arrived.Add(30 * time.Millisecond)},
		{"already past", sent.Add(-time.Second), arrived.Add(1)},
		{"none", time.Time{}, time.Time{}},
	} {
		in := []Request{{Op: OpTake, Checks: []api.Check{{Limit: "a", Key: "k", Cost: 1}}, Deadline: tc.deadline}}
		got := decodeRequests(encodeRequests(in, sent), arrived)[0]
		if !got.Deadline.Equal(tc.want) {
			t.Errorf("%s: deadline at the receiver %v, want %v", tc.name, got.Deadline, tc.want)
		}
		if expired := got.ExpiredAt(arrived.Add(time.Millisecond)); expired != (tc.name == "already past") {
			t.Errorf("%s: expired 1ms after arrival = %v", tc.name, expired)
		}
	}
}

func TestRepliesRoundTrip(t *testing.T) {
	in := []Reply{
		{Results: []api.Result{
			{
				Allowed: true, Remaining: 5, Capacity: 6, ResetAfter: 500 * time.Millisecond, Window: 3 * time.Second,
				Evidence: api.Evidence{Run: "n1/ab", DecidedAt: time.Unix(0, 1_700_000_000_000_000_001), Bucket: 1<<48 | 7},
			},
			{Allowed: false, Capacity: 6, RetryAfter: 499 * time.Millisecond, ResetAfter: 3 * time.Second},
		}, RulesVersion: 3},
		{ErrCode: 2, ErrDetail: "lease not found"},
		{NotOwner: true, Epoch: 12},
		{Expired: true, Epoch: 13},
		{Lease: api.AcquireResponse{Granted: true, ID: "id", FencingToken: 17, TTL: 30 * time.Second, Permits: 8}, RulesVersion: 4},
		{Lease: api.AcquireResponse{RetryAfter: time.Second, Permits: 8}},
		{Allot: api.AllotResponse{Tokens: 25, TTL: 2 * time.Second, Capacity: 200, Window: 2 * time.Second, Seq: 99}},
		{Allot: api.AllotResponse{RetryAfter: 40 * time.Millisecond, TTL: time.Second, Capacity: 200, Window: time.Second, Seq: 1}},
		{},
	}
	msgs := encodeReplies(in)
	got := make([]Reply, len(msgs))
	for i, m := range msgs {
		got[i] = decodeReply(m)
	}
	if !reflect.DeepEqual(got, in) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, in)
	}
	if msgs[2].Lease != nil {
		t.Fatal("a zero Grant was encoded")
	}
}

func TestStateRoundTrip(t *testing.T) {
	in := State{
		Buckets: []bucket.Entry{
			{Name: "a", Key: "k", Snapshot: bucket.Snapshot{
				Algorithm: 2, Count: 5, Frac: 1500, Prev: -3, Ahead: time.Second, Since: -time.Millisecond, Left: 7, UntilFull: time.Minute,
			}},
			{Name: "a", Key: "full", Snapshot: bucket.Snapshot{Full: true}},
			{Name: "cl.throttle", Key: "u", Snapshot: bucket.Snapshot{Algorithm: bucket.GCRA, Ahead: time.Second}, Limit: bucket.Limit{
				Algorithm: bucket.GCRA, Capacity: 16, Rate: bucket.Rate{N: 30, Per: time.Minute},
			}},
			{Name: "w", Key: "u", Snapshot: bucket.Snapshot{Algorithm: bucket.FixedWindow, Count: 2}, Limit: bucket.Limit{
				Algorithm: bucket.FixedWindow, Capacity: 100, Calendar: bucket.Hour,
			}},
		},
		Leases: lease.Handoff{NextFencing: 18, Leases: []lease.Snapshot{
			{ID: "id\nwith a newline", Limit: "db", Key: "k", Holder: "h", Fencing: 17, TTL: 2 * time.Second, Remaining: time.Second},
		}},
		Holdings: []allot.Entry{
			{Key: allot.Key{Limit: "a", Key: "k"}, Holder: "n2", Tokens: 12, Remaining: 900 * time.Millisecond, Demand: 250.5, Seq: 1<<63 + 5},
			{Key: allot.Key{Limit: "a", Key: "k"}, Holder: "client:x", Tokens: 1, Remaining: time.Millisecond},
		},
	}
	if got := decodeState(encodeState(in)); !reflect.DeepEqual(got, in) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, in)
	}
	// A kind without its state, an unknown kind and an unknown algorithm
	// are dropped.
	bad := []*peerpb.HandoffEntry{
		{Kind: entryBucket, Limit: "a", Key: "k"},
		{Kind: entryLease},
		{Kind: entryHolding, Limit: "a", Key: "k"},
		{Kind: 9, Bucket: &peerpb.BucketState{}},
		{Kind: 1 << 20},
		{Kind: entryBucket, Limit: "a", Key: "future", Bucket: &peerpb.BucketState{Algorithm: uint32(bucket.FixedWindow) + 1}},
	}
	if got := decodeState(bad); got.Len() != 0 {
		t.Errorf("bad entries decoded as %+v", got)
	}
}

// TestEntryWithUnknownFieldIsApplied: a newer sender may add fields to an
// entry or to its bucket and lease states; this version ignores them and
// still applies the entry (a rolling upgrade keeps handing over state).
func TestEntryWithUnknownFieldIsApplied(t *testing.T) {
	want := State{
		Buckets: []bucket.Entry{{Name: "a", Key: "k", Snapshot: bucket.Snapshot{Count: 3, Since: time.Second}}},
		Leases:  lease.Handoff{NextFencing: 4, Leases: []lease.Snapshot{{ID: "id", Limit: "db", Key: "k", Fencing: 9, Remaining: time.Second}}},
	}
	var wire []byte
	for _, m := range encodeState(want) {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		// Field 99 (a varint) on the entry, and field 50 (bytes) inside
		// its state message, neither known to this version.
		b = protowire.AppendTag(b, 99, protowire.VarintType)
		b = protowire.AppendVarint(b, 12345)
		var inner []byte
		inner = protowire.AppendTag(inner, 50, protowire.BytesType)
		inner = protowire.AppendBytes(inner, []byte("from the future"))
		stateField := protowire.Number(6)
		if m.Kind == entryLease {
			stateField = 7
		}
		b = protowire.AppendTag(b, stateField, protowire.BytesType) // merged into the state message
		b = protowire.AppendBytes(b, inner)
		wire = protowire.AppendTag(wire, 2, protowire.BytesType) // HandoffRequest.entries
		wire = protowire.AppendBytes(wire, b)
	}
	var req peerpb.HandoffRequest
	if err := proto.Unmarshal(wire, &req); err != nil {
		t.Fatal(err)
	}
	if got := decodeState(req.GetEntries()); !reflect.DeepEqual(got, want) {
		t.Fatalf("with unknown fields:\n got %+v\nwant %+v", got, want)
	}
}

func TestDecodeOp(t *testing.T) {
	for _, tt := range []struct {
		in   peerpb.Op
		want Op
	}{{1, OpTake}, {5, OpRelease}, {6, OpPull}, {8, OpReturn}, {257, 0}, {-1, 0}, {9, 9}} {
		if got := decodeOp(tt.in); got != tt.want {
			t.Errorf("decodeOp(%d) = %d, want %d", tt.in, got, tt.want)
		}
	}
	if Op(9).Valid() || !OpReturn.Valid() || !OpPull.Valid() || Op(0).Valid() || !OpRenew.Valid() || OpAcquire.String() != "acquire" || Op(9).String() != "invalid" || OpAllot.String() != "allot" {
		t.Error("Op.Valid or Op.String wrong")
	}
}
