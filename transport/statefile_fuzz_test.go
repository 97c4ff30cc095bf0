package transport

import (
	"reflect"
	"testing"
	"time"
)

// FuzzStateFile feeds arbitrary bytes to the state file reader: it never
// panics, a refused file returns nothing, and a file it accepts encodes
// back to one that decodes to the same state. The body parser is fuzzed
// on its own too, since a fuzzer rarely forges a SHA-256. Seeds are in
// testdata/fuzz/FuzzStateFile.
func FuzzStateFile(f *testing.F) {
	if b, err := EncodeStateFile(sampleState(), time.Unix(1_800_000_000, 0)); err == nil {
		f.Add(b)
		f.Add(b[stateHeader : len(b)-stateSum])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		st, at, err := DecodeStateFile(b)
		if err != nil {
			if st.Len() != 0 || !at.IsZero() {
				t.Fatalf("refused file returned %d entries", st.Len())
			}
		} else {
			again, err := EncodeStateFile(st, at)
			if err != nil {
				t.Fatal(err)
			}
			st2, at2, err := DecodeStateFile(again)
			if err != nil || !at2.Equal(at) || !reflect.DeepEqual(normalize(st2), normalize(st)) {
				t.Fatalf("accepted file does not round trip: %v", err)
			}
		}
		if body, err := decodeStateBody(b); err == nil {
			if _, err := EncodeStateFile(body, time.Unix(0, 0)); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// normalize makes nil and empty slices compare equal.
func normalize(s State) State {
	if len(s.Buckets) == 0 {
		s.Buckets = nil
	}
	if len(s.Leases.Leases) == 0 {
		s.Leases.Leases = nil
	}
	if len(s.Holdings) == 0 {
		s.Holdings = nil
	}
	return s
}
