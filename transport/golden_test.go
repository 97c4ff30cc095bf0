package transport

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/weir-rl/weir/bucket"
	"github.com/weir-rl/weir/transport/peerpb"
)

// update rewrites the golden messages of MaxVersion (go test ./transport
// -run TestGolden -update). Older versions' files are never rewritten.
var update = flag.Bool("update", false, "rewrite testdata/peer-v<MaxVersion>/*.bin")

// golden holds, per protocol version, the messages its golden files
// encode: every field of that version set. A later version adds its own
// map entry and leaves the older ones as they are.
var golden = map[Version]map[string]proto.Message{
	V1: {
		"batch-request": &peerpb.BatchRequest{From: "n1", Protocol: 1, Requests: []*peerpb.Request{
			{
				Op: peerpb.Op_OP_TAKE, Epoch: 9, Proxied: true, RequestId: []byte{1, 2, 3},
				Checks: []*peerpb.Check{
					{Limit: "api", Key: "k1", Cost: 2},
					{
						Limit: "inline", Key: "k2", Cost: 1, Inline: true, InlineAlgorithm: "token_bucket",
						InlineCapacity: 10, InlineBurst: 5, InlineLimit: 3, InlineRate: "10/s", InlineWindow: "1m",
					},
				},
				Traceparent:  "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
				TenantPrefix: "acme:", TenantMaxBuckets: 1000, BudgetNs: 45e6,
			},
			{Op: peerpb.Op_OP_ACQUIRE, Holder: "h", TtlNs: 5e9, WaitNs: 1e9, Checks: []*peerpb.Check{{Limit: "lock", Key: "x", Cost: 1}}},
			{Op: peerpb.Op_OP_RENEW, LeaseId: "l1", TtlNs: 5e9},
			{Op: peerpb.Op_OP_ALLOT, Holder: "rlqs-1", Want: 50, Demand: 12.5, Unspent: 3, Seq: 4},
		}},
		"batch-reply": &peerpb.BatchReply{Replies: []*peerpb.Reply{
			{
				Results: []*peerpb.Result{{
					Allowed: true, Remaining: 7, Capacity: 10, RetryAfterNs: 0, ResetAfterNs: 3e8,
					WindowNs: 1e9, Run: "n1-run", DecidedAtNs: 123, Bucket: 77,
				}},
				RulesVersion: 3, Epoch: 9,
			},
			{ErrCode: 5, ErrDetail: "no such limit", NotOwner: true},
			{Expired: true},
			{Lease: &peerpb.Grant{Granted: true, Id: "l1", Fencing: 8, TtlNs: 5e9, RetryAfterNs: 1, Permits: 2}},
			{Allot: &peerpb.Allotment{Tokens: 40, TtlNs: 2e9, RetryAfterNs: 0, Capacity: 100, WindowNs: 1e9, Seq: 5}},
			{Entries: []*peerpb.HandoffEntry{goldenBucketEntry()}},
		}},
		"handoff": &peerpb.HandoffRequest{From: "n2", Protocol: 1, Entries: []*peerpb.HandoffEntry{
			goldenBucketEntry(),
			{Kind: 2, Limit: "lock", Key: "x", Lease: &peerpb.LeaseState{
				Id: "l1", Holder: "h", Fencing: 8, TtlNs: 5e9, RemainingNs: 4e9, NextFencing: 9,
			}},
			{Kind: 3, Limit: "api", Key: "k1", Holding: &peerpb.HoldingState{
				Holder: "rlqs-1", Tokens: 40, RemainingNs: 1e9, Demand: 12.5, Seq: 5,
			}},
		}},
		"replica-batch": &peerpb.HandoffRequest{
			From: "n3", Protocol: 1, Replica: true, Entries: []*peerpb.HandoffEntry{goldenBucketEntry()},
			Dropped: []*peerpb.Check{{Limit: "api", Key: "gone"}},
		},
		"report-request": &peerpb.ReportRequest{Limit: "api", HotN: 5, Protocol: 1},
		"report-reply": &peerpb.ReportReply{
			Node: "n1", LimitsVersion: 3, Allowed: 100, Denied: 7, Fallback: 1, Buckets: 12, LeasesHeld: 2,
			Hot:        []*peerpb.HotList{{Limit: "api", Floor: 2, Keys: []*peerpb.HotKey{{Key: "k1", Count: 50, Err: 1, Denied: 4}}}},
			Allotments: []*peerpb.HeldAllotment{{Limit: "api", Key: "k1", Holder: "rlqs-1", Tokens: 40, ExpiresInMs: 900}},
		},
	},
	V2: {
		"replica-batch": &peerpb.HandoffRequest{
			From: "n3", Protocol: 2, Replica: true, Entries: []*peerpb.HandoffEntry{goldenBucketEntry()},
			Buckets: goldenPacked, Dropped: []*peerpb.Check{{Limit: "api", Key: "gone"}},
		},
		"handoff": &peerpb.HandoffRequest{From: "n2", Protocol: 2, Buckets: goldenPacked},
	},
	// V3 adds no field: its replica batch is v2's, framed on the replica
	// link (TestLinkFrameLayout).
	V3: {
		"replica-batch": &peerpb.HandoffRequest{
			From: "n3", Protocol: 3, Replica: true, Entries: []*peerpb.HandoffEntry{goldenBucketEntry()},
			Buckets: goldenPacked, Dropped: []*peerpb.Check{{Limit: "api", Key: "gone"}},
		},
	},
}

// goldenPacked is goldenPackedEntries packed (packed.go): the names table
// ("api"), two entries, the first with every snapshot field set (zig-zag
// varints), the second Full.
var goldenPacked = []byte{
	1, 3, 'a', 'p', 'i', // one name
	2,                                                           // two entries
	0, 2, 'k', '1', 1, 0x08, 0x0a, 0x0c, 0x0e, 0x10, 0x12, 0x14, // api/k1, gcra, 4 5 6 7 8 9 10
	0, 2, 'k', '3', 0x80, 0, 0, 0, 0, 0, 0, 0, // api/k3, token_bucket, Full
}

// goldenPackedEntries are the buckets goldenPacked holds.
var goldenPackedEntries = []bucket.Entry{
	{Name: "api", Key: "k1", Snapshot: bucket.Snapshot{Algorithm: 1, Count: 4, Frac: 5, Prev: 6, Ahead: 7, Since: 8, Left: 9, UntilFull: 10}},
	{Name: "api", Key: "k3", Snapshot: bucket.Snapshot{Full: true}},
}

// goldenBucketEntry is a bucket's handoff entry with an inline limit.
func goldenBucketEntry() *peerpb.HandoffEntry {
	return &peerpb.HandoffEntry{
		Kind: 1, Limit: "inline", Key: "k2",
		Bucket: &peerpb.BucketState{
			Algorithm: 1, Full: false, Count: 4, Frac: 5, Prev: 6, AheadNs: 7, SinceNs: 8, LeftNs: 9, UntilFullNs: 10,
		},
		LimitDef: &peerpb.BucketLimit{Algorithm: 1, Capacity: 10, RateN: 10, RatePerNs: 1e9, WindowNs: 0, Calendar: 0},
	}
}

func goldenPath(v Version, name string) string {
	return filepath.Join("testdata", "peer-v"+strconv.Itoa(int(v)), name+".bin")
}

// TestGolden decodes the golden messages of every version up to
// MaxVersion with this build's schema and gets every value back, and runs
// them through the converters a receiver uses. -update rewrites
// MaxVersion's files.
func TestGolden(t *testing.T) {
	if *update {
		for name, m := range golden[MaxVersion] {
			b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(filepath.Dir(goldenPath(MaxVersion, name)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(goldenPath(MaxVersion, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for v := MinVersion; v <= MaxVersion; v++ {
		if len(golden[v]) == 0 {
			t.Fatalf("no golden messages for version %d", v)
		}
		for name, want := range golden[v] {
			b, err := os.ReadFile(goldenPath(v, name))
			if err != nil {
				t.Fatalf("%v (go test ./transport -run TestGolden -update writes MaxVersion's)", err)
			}
			got := want.ProtoReflect().New().Interface()
			if err := proto.Unmarshal(b, got); err != nil {
				t.Fatalf("v%d %s: %v", v, name, err)
			}
			if !proto.Equal(got, want) {
				t.Errorf("v%d %s decodes to\n%v\nwant\n%v", v, name, got, want)
			}
			if len(got.ProtoReflect().GetUnknown()) != 0 {
				t.Errorf("v%d %s: fields unknown to this version", v, name)
			}
		}
	}
}

// TestGoldenConverts runs v1's and v2's golden files through the receiver's
// converters: what the wire carries reaches the handler's types.
func TestGoldenConverts(t *testing.T) {
	var req peerpb.BatchRequest
	var ho peerpb.HandoffRequest
	for name, m := range map[string]proto.Message{"batch-request": &req, "handoff": &ho} {
		b, err := os.ReadFile(goldenPath(V1, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := proto.Unmarshal(b, m); err != nil {
			t.Fatal(err)
		}
	}
	reqs := decodeRequests(req.GetRequests(), time.Now())
	if len(reqs) != 4 || reqs[0].TraceParent == "" || reqs[0].Deadline.IsZero() || len(reqs[0].Checks) != 2 || reqs[3].Demand != 12.5 {
		t.Errorf("decoded requests: %+v", reqs)
	}
	st := decodeState(ho.GetEntries())
	if len(st.Buckets) != 1 || len(st.Leases.Leases) != 1 || len(st.Holdings) != 1 {
		t.Errorf("decoded handoff: %d buckets, %d leases, %d holdings", len(st.Buckets), len(st.Leases.Leases), len(st.Holdings))
	}

	var rb peerpb.HandoffRequest
	b, err := os.ReadFile(goldenPath(V2, "replica-batch"))
	if err != nil {
		t.Fatal(err)
	}
	if err := proto.Unmarshal(b, &rb); err != nil {
		t.Fatal(err)
	}
	st = decodeState(rb.GetEntries())
	if st.Buckets, err = decodePacked(st.Buckets, rb.GetBuckets()); err != nil {
		t.Fatal(err)
	}
	inline := decodeState([]*peerpb.HandoffEntry{goldenBucketEntry()}).Buckets
	if want := append(inline, goldenPackedEntries...); !slices.Equal(st.Buckets, want) {
		t.Errorf("decoded v2 replica batch: %+v, want %+v", st.Buckets, want)
	}
}

// TestGoldenPackedLayout: the sender writes exactly the golden layout.
func TestGoldenPackedLayout(t *testing.T) {
	if got := appendPacked(nil, goldenPackedEntries); !bytes.Equal(got, goldenPacked) {
		t.Errorf("appendPacked = % x\nwant % x", got, goldenPacked)
	}
}

// TestUnknownFieldsTolerated: a message of a newer version, with fields
// this build does not know, decodes here with every known value intact.
func TestUnknownFieldsTolerated(t *testing.T) {
	for name, want := range golden[V1] {
		b, err := proto.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		// A newer sender's fields: a varint, a string and a nested message.
		b = protowire.AppendTag(b, 900, protowire.VarintType)
		b = protowire.AppendVarint(b, 42)
		b = protowire.AppendTag(b, 901, protowire.BytesType)
		b = protowire.AppendString(b, "from the future")
		b = protowire.AppendTag(b, 902, protowire.BytesType)
		b = protowire.AppendBytes(b, protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 7))
		got := want.ProtoReflect().New().Interface()
		if err := proto.Unmarshal(b, got); err != nil {
			t.Fatalf("%s with unknown fields: %v", name, err)
		}
		if len(got.ProtoReflect().GetUnknown()) == 0 {
			t.Errorf("%s: unknown fields not kept", name)
		}
		got.ProtoReflect().SetUnknown(nil)
		if !proto.Equal(got, want) {
			t.Errorf("%s with unknown fields decodes to %v", name, got)
		}
	}
}
