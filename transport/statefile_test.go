package transport

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/weir-rl/weir/bucket"
	"github.com/weir-rl/weir/lease"
)

// sampleState is owner state of every kind a state file keeps: buckets of
// each algorithm, one with a carried (inline) limit, and leases.
func sampleState() State {
	return State{
		Buckets: []bucket.Entry{
			{Name: "api", Key: "u1", Snapshot: bucket.Snapshot{Algorithm: bucket.TokenBucket, Count: 3, Frac: 17, UntilFull: 7 * time.Minute}},
			{Name: "g", Key: "u2", Snapshot: bucket.Snapshot{Algorithm: bucket.GCRA, Frac: 5, Ahead: 40 * time.Second, UntilFull: 40 * time.Second}},
			{Name: "sw", Key: "u3", Snapshot: bucket.Snapshot{Algorithm: bucket.SlidingWindow, Count: 9, Prev: 4, Since: 2 * time.Second, UntilFull: time.Minute}},
			{Name: "fw", Key: "u4", Snapshot: bucket.Snapshot{Algorithm: bucket.FixedWindow, Count: 2, Since: time.Second, Left: time.Hour, UntilFull: time.Hour}},
			{
				Name: "cl.throttle", Key: "tenant:é/ü", Snapshot: bucket.Snapshot{Algorithm: bucket.GCRA, Ahead: time.Second, UntilFull: time.Second},
				Limit: bucket.Limit{Algorithm: bucket.GCRA, Capacity: 16, Rate: bucket.Rate{N: 30, Per: time.Minute}},
			},
		},
		Leases: lease.Handoff{NextFencing: 42, Leases: []lease.Snapshot{
			{ID: "db/k/41", Limit: "db", Key: "k", Holder: "h1", Fencing: 41, TTL: 30 * time.Second, Remaining: 12 * time.Second},
		}},
	}
}

func TestStateFileRoundTrip(t *testing.T) {
	written := time.Unix(1_800_000_000, 123_456_789)
	in := sampleState()
	b, err := EncodeStateFile(in, written)
	if err != nil {
		t.Fatal(err)
	}
	got, at, err := DecodeStateFile(b)
	if err != nil {
		t.Fatal(err)
	}
	if !at.Equal(written) {
		t.Fatalf("written at %v, want %v", at, written)
	}
	if !reflect.DeepEqual(got, in) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, in)
	}
	// An empty state is a valid file too.
	b, err = EncodeStateFile(State{}, written)
	if err != nil {
		t.Fatal(err)
	}
	if got, _, err := DecodeStateFile(b); err != nil || got.Len() != 0 {
		t.Fatalf("empty: %+v, %v", got, err)
	}
}

// refused checks that b is refused with ErrStateFile and nothing returned.
func refused(t *testing.T, what string, b []byte) {
	t.Helper()
	st, at, err := DecodeStateFile(b)
	if !errors.Is(err, ErrStateFile) {
		t.Fatalf("%s: err %v, want ErrStateFile", what, err)
	}
	if st.Len() != 0 || !at.IsZero() {
		t.Fatalf("%s: refused file returned %d entries at %v", what, st.Len(), at)
	}
}

func TestStateFileRefusesTruncated(t *testing.T) {
	b, err := EncodeStateFile(sampleState(), time.Unix(1, 0))
	if err != nil {
		t.Fatal(err)
	}
	for n := range len(b) {
		refused(t, "truncated", b[:n])
	}
	refused(t, "trailing byte", append(b[:len(b):len(b)], 0))
}

func TestStateFileRefusesCorrupt(t *testing.T) {
	b, err := EncodeStateFile(sampleState(), time.Unix(1, 0))
	if err != nil {
		t.Fatal(err)
	}
	// Any one bit flipped anywhere: magic, version, time, length, body or
	// sum.
	for i := range b {
		c := append([]byte(nil), b...)
		c[i] ^= 0x10
		refused(t, "flipped byte", c)
	}
}

func TestStateFileRefusesForeign(t *testing.T) {
	b, err := EncodeStateFile(sampleState(), time.Unix(1, 0))
	if err != nil {
		t.Fatal(err)
	}
	refused(t, "empty", nil)
	refused(t, "json", []byte(`{"buckets":[]}`))
	foreign := append([]byte("NOTWEIR!"), b[8:]...)
	refused(t, "magic", foreign)
	// A later version with a valid sum: refused for its version, not its sum.
	v2 := append([]byte(nil), b[:len(b)-stateSum]...)
	binary.BigEndian.PutUint32(v2[8:], StateFileVersion+1)
	v2 = resum(v2)
	if _, _, err := DecodeStateFile(v2); err == nil || !strings.Contains(err.Error(), "version 2") {
		t.Fatalf("version 2: %v", err)
	}
	refused(t, "version", v2)
	// A length above the bound is refused before anything is read.
	big := append([]byte(nil), b[:len(b)-stateSum]...)
	binary.BigEndian.PutUint64(big[20:], MaxStateFileBody+1)
	refused(t, "overlong", resum(big))
	// A body that is not a handoff request, under a valid sum.
	junk := append([]byte(nil), b[:stateHeader]...)
	binary.BigEndian.PutUint64(junk[20:], 3)
	refused(t, "junk body", resum(append(junk, 0xff, 0xff, 0xff)))
}

// resum appends the SHA-256 a writer would to b (a file without its sum).
func resum(b []byte) []byte {
	sum := sha256.Sum256(b)
	return append(b, sum[:]...)
}
