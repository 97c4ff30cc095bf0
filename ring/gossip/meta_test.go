package gossip

import (
	"math"
	"testing"

	"github.com/weir-rl/weir/ring"
)

func TestMetaRoundTrip(t *testing.T) {
	for _, m := range []ring.Meta{
		{},
		{GRPCAddr: "10.0.0.1:8081", LimitsVersion: 7, Incarnation: 1_700_000_000_000_000_000},
		{GRPCAddr: "[::1]:1", LimitsVersion: -1, Incarnation: math.MinInt64},
		{LimitsVersion: math.MaxInt64},
		{GRPCAddr: "10.0.0.1:8081", APIAddr: "10.0.0.1:8080", HTTPAddr: "10.0.0.1:80", Incarnation: 5},
		{HTTPAddr: "h:1"},
		{GRPCAddr: "a:1", Protocol: ring.Versions{Min: 1, Max: 1}},
		{Protocol: ring.Versions{Min: 0, Max: math.MaxUint32}},
		{GRPCAddr: "a:1", RESPAddr: "a:6379"},
		{RESPAddr: "r:1", Protocol: ring.Versions{Min: 1, Max: 2}},
	} {
		for _, flags := range []byte{0, metaLeaving} {
			got, gotFlags, err := decodeMeta(appendMeta(nil, m, flags))
			if err != nil || got != m || gotFlags != flags {
				t.Errorf("round trip %+v %d: got %+v %d, %v", m, flags, got, gotFlags, err)
			}
		}
	}
	if b := appendMeta(nil, ring.Meta{GRPCAddr: "10.0.0.1:8081", LimitsVersion: 3, Incarnation: 1 << 60}, 0); len(b) > 32 {
		t.Errorf("meta not compact: %d bytes", len(b))
	}
	if err := validateMeta(ring.Meta{GRPCAddr: string(make([]byte, maxMetaLen))}); err == nil {
		t.Error("oversized meta validated")
	}
	for _, bad := range [][]byte{{2}, {1}, {3, 0, 0, 0}, {1, 0}, {1, 0, 0x80}, {1, 0, 2}, {2, 0, 0, 0, 5, 'a'}, {2, 0, 0, 0, 0, 0}} {
		if _, _, err := decodeMeta(bad); err == nil {
			t.Errorf("decodeMeta(%v) accepted", bad)
		}
	}
}

func FuzzDecodeMeta(f *testing.F) {
	f.Add(appendMeta(nil, ring.Meta{GRPCAddr: "a:1", LimitsVersion: 2, Incarnation: 3}, 0))
	f.Add([]byte{})
	f.Add(appendMeta(nil, ring.Meta{GRPCAddr: "a:1", Protocol: ring.Versions{Min: 1, Max: 2}}, 0))
	f.Add(appendMeta(nil, ring.Meta{GRPCAddr: "a:1", APIAddr: "b:2", HTTPAddr: "c:3"}, 0))
	f.Add(appendMeta(nil, ring.Meta{GRPCAddr: "a:1", RESPAddr: "d:4"}, 0))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, flags, err := decodeMeta(b)
		if err != nil || len(b) == 0 {
			return
		}
		if got, gotFlags, err := decodeMeta(appendMeta(nil, m, flags)); err != nil || got != m || gotFlags != flags {
			t.Fatalf("re-encode of %+v: %+v %v", m, got, err)
		}
	})
}
