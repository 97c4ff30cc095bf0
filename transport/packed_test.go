package transport

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weir-rl/weir/allot"
	"github.com/weir-rl/weir/bucket"
	"github.com/weir-rl/weir/lease"
	"github.com/weir-rl/weir/transport/peerpb"
)

// packedSample is buckets of two limits with every snapshot field at the
// ends of its range, a Full one and an empty key.
func packedSample() []bucket.Entry {
	return []bucket.Entry{
		{Name: "api", Key: "tenant:1", Snapshot: bucket.Snapshot{Algorithm: bucket.TokenBucket, Count: 41, Frac: 7, Since: time.Millisecond, UntilFull: time.Second}},
		{Name: "db", Key: "", Snapshot: bucket.Snapshot{Algorithm: bucket.FixedWindow, Count: math.MaxInt64, Prev: math.MinInt64, Ahead: -1, Since: math.MinInt64, Left: math.MaxInt64, UntilFull: 1}},
		{Name: "api", Key: "tenant:2", Snapshot: bucket.Snapshot{Algorithm: bucket.GCRA, Full: true}},
		{Name: "api", Key: "ключ", Snapshot: bucket.Snapshot{Algorithm: bucket.SlidingWindow, Count: -3, Prev: 9, Since: -time.Second}},
	}
}

func TestPackedRoundTrip(t *testing.T) {
	in := packedSample()
	b := appendPacked([]byte("prefix"), in)
	prior := []bucket.Entry{{Name: "kept", Key: "k"}}
	got, err := decodePacked(slices.Clone(prior), b[len("prefix"):])
	if err != nil {
		t.Fatal(err)
	}
	if want := append(prior, in...); !reflect.DeepEqual(got, want) {
		t.Fatalf("decoded %+v\nwant %+v", got, want)
	}
	if got, err := decodePacked(prior, nil); err != nil || !slices.Equal(got, prior) {
		t.Errorf("empty packed: %v, %v", got, err)
	}
}

// TestPackedMalformed: every truncation, and trailing bytes, fail the
// whole batch with errPacked and leave out as it was.
func TestPackedMalformed(t *testing.T) {
	b := appendPacked(nil, packedSample())
	prior := []bucket.Entry{{Name: "kept", Key: "k"}}
	for n := 1; n < len(b); n++ {
		got, err := decodePacked(slices.Clone(prior), b[:n])
		if !errors.Is(err, errPacked) || !slices.Equal(got, prior) {
			t.Fatalf("cut at %d of %d: %v, %d entries", n, len(b), err, len(got))
		}
	}
	for name, bad := range map[string][]byte{
		"trailing byte":      append(slices.Clone(b), 0),
		"name index too big": {1, 1, 'a', 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0},
		"count past input":   {0, 200, 1},
		"names past input":   {200, 1},
		"overlong varint":    {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
	} {
		if got, err := decodePacked(slices.Clone(prior), bad); !errors.Is(err, errPacked) || !slices.Equal(got, prior) {
			t.Errorf("%s: %v, %d entries", name, err, len(got))
		}
	}
}

// TestPackedUnknownAlgorithm: a bucket of an algorithm this build does
// not know is dropped, the others kept, as decodeState does.
func TestPackedUnknownAlgorithm(t *testing.T) {
	in := packedSample()
	in[1].Snapshot.Algorithm = bucket.FixedWindow + 1
	got, err := decodePacked(nil, appendPacked(nil, in))
	if err != nil {
		t.Fatal(err)
	}
	if want := []bucket.Entry{in[0], in[2], in[3]}; !reflect.DeepEqual(got, want) {
		t.Fatalf("decoded %+v\nwant %+v", got, want)
	}
}

func TestSplitPackable(t *testing.T) {
	all := packedSample()
	if p, r := splitPackable(all); len(r) != 0 || &p[0] != &all[0] || len(p) != len(all) {
		t.Errorf("all packable: %d packed (same slice %v), %d rest", len(p), &p[0] == &all[0], len(r))
	}
	inline := bucket.Entry{Name: "inline", Key: "x", Limit: bucket.Limit{Algorithm: bucket.TokenBucket, Capacity: 10, Rate: bucket.Rate{N: 1, Per: time.Second}}}
	mixed := []bucket.Entry{all[0], inline, all[1]}
	p, r := splitPackable(mixed)
	if !reflect.DeepEqual(p, []bucket.Entry{all[0], all[1]}) || !reflect.DeepEqual(r, []bucket.Entry{inline}) {
		t.Errorf("mixed: packed %+v, rest %+v", p, r)
	}
	if mixed[1] != inline {
		t.Error("splitPackable changed its input")
	}
}

// FuzzPacked: no input panics the decoder; what it accepts packs again to
// bytes that decode to the same buckets. scanPacked, which a replica's
// receiver uses instead, accepts exactly the same inputs, counts the same
// buckets, finds the longest UntilFull of those not refilled, and decodes
// them later to the same buckets, all of them or those still in debt.
func FuzzPacked(f *testing.F) {
	f.Add(appendPacked(nil, packedSample()))
	f.Add(goldenPacked)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := decodePacked(nil, b)
		p, scanErr := scanPacked(b)
		if (err == nil) != (scanErr == nil) {
			t.Fatalf("decodePacked: %v, scanPacked: %v", err, scanErr)
		}
		if err != nil {
			if len(got) != 0 {
				t.Fatalf("refused input returned %d entries", len(got))
			}
			return
		}
		var until time.Duration
		for _, e := range got {
			if !e.Snapshot.Full {
				until = max(until, e.Snapshot.UntilFull)
			}
		}
		if p.Len() != len(got) || p.UntilFull() != until {
			t.Fatalf("scanned %d buckets until full in %v, decoded %d until %v", p.Len(), p.UntilFull(), len(got), until)
		}
		if later, _ := decodePacked(nil, p.b); len(later)+len(got) > 0 && !reflect.DeepEqual(later, got) {
			t.Fatalf("decoded later %+v, at once %+v", later, got)
		}
		for _, elapsed := range []time.Duration{-1, 0, until / 2, until} {
			var want []bucket.Entry
			for _, e := range got {
				if !e.Snapshot.Full && e.Snapshot.UntilFull > elapsed {
					want = append(want, e)
				}
			}
			if in := p.AppendInDebt(nil, elapsed); len(in)+len(want) > 0 && !reflect.DeepEqual(in, want) {
				t.Fatalf("in debt after %v: %+v, want %+v", elapsed, in, want)
			}
		}
		again, err := decodePacked(nil, appendPacked(nil, got))
		if err != nil || len(again)+len(got) > 0 && !reflect.DeepEqual(again, got) {
			t.Fatalf("accepted input does not round trip: %v", err)
		}
	})
}

// TestHandoffRoundTripPacked: at V2 a handoff of packable buckets, a
// bucket with its own limit, a lease and a holding arrives whole, the
// packed buckets chunked like entries.
func TestHandoffRoundTripPacked(t *testing.T) {
	rec, addr, p := handoffPeers(t, "old-owner")
	p.SetProtocol(V2)
	inline := bucket.Entry{
		Name: "inline", Key: "x", Snapshot: bucket.Snapshot{Count: 3},
		Limit: bucket.Limit{Algorithm: bucket.TokenBucket, Capacity: 10, Rate: bucket.Rate{N: 1, Per: time.Second}},
	}
	st := State{Buckets: []bucket.Entry{inline}}
	for i := range 2*handoffChunk + 4 {
		st.Buckets = append(st.Buckets, bucket.Entry{Name: "l", Key: fmt.Sprint(i), Snapshot: bucket.Snapshot{Count: int64(i), Since: -1}})
	}
	st.Leases = lease.Handoff{NextFencing: 18, Leases: []lease.Snapshot{{ID: "lease", Limit: "db", Key: "k", Fencing: 17, TTL: time.Second}}}
	st.Holdings = []allot.Entry{{Key: allot.Key{Limit: "l", Key: "0"}, Holder: "n2", Tokens: 5, Remaining: time.Second, Seq: 1}}
	if err := p.Handoff(context.Background(), addr, st); err != nil {
		t.Fatal(err)
	}
	got, sizes := rec.handedOver()
	if want := []int{handoffChunk + 3, handoffChunk, 4}; !slices.Equal(sizes, want) {
		t.Errorf("chunks %v, want %v", sizes, want)
	}
	if !reflect.DeepEqual(got, st) {
		t.Fatalf("received %+v\nwant %+v", got, st)
	}
}

// TestMalformedPackedRefused: a handoff whose packed buckets do not
// parse is refused with InvalidArgument before its handler sees any of
// it.
func TestMalformedPackedRefused(t *testing.T) {
	rec := &recorder{}
	c := rawPeerClient(t, startServer(t, rec, nil))
	good := appendPacked(nil, packedSample())
	for _, replica := range []bool{false, true} {
		_, err := c.Handoff(context.Background(), &peerpb.HandoffRequest{
			From: "n1", Protocol: V2, Replica: replica, Buckets: good[:len(good)-1],
			Entries: encodeState(State{Leases: lease.Handoff{Leases: []lease.Snapshot{{ID: "l", Limit: "db", Key: "k", TTL: time.Second}}}}),
		})
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("replica %v: err = %v, want InvalidArgument", replica, err)
		}
	}
	if n := rec.calls.Load(); n != 0 {
		t.Errorf("handler called %d times", n)
	}
	if _, err := c.Handoff(context.Background(), &peerpb.HandoffRequest{From: "n1", Protocol: V2, Buckets: good}); err != nil {
		t.Fatalf("well-formed: %v", err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.handoffs) != 1 || !reflect.DeepEqual(rec.handoffs[0].Buckets, packedSample()) {
		t.Errorf("handler got %+v", rec.handoffs)
	}
}
