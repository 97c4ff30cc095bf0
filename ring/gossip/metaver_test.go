package gossip

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/weir-rl/weir/ring"
)

// update rewrites the golden metas of the newest protocol version.
var update = flag.Bool("update", false, "rewrite testdata/peer-v<newest>/meta.bin")

// goldenMeta is the meta the golden file of each protocol version holds.
var goldenMeta = map[int]ring.Meta{
	1: {
		GRPCAddr: "10.0.0.1:7947", APIAddr: "10.0.0.1:8080", HTTPAddr: "10.0.0.1:8081",
		LimitsVersion: 7, Incarnation: 1_700_000_000_000_000_001,
		Protocol: ring.Versions{Min: 1, Max: 1},
	},
}

// newestGolden is the protocol version whose golden files -update writes.
const newestGolden = 1

// TestGoldenMeta decodes the golden meta of every protocol version with
// this version's decoder; -update rewrites the newest one.
func TestGoldenMeta(t *testing.T) {
	path := func(v int) string { return filepath.Join("testdata", "peer-v"+strconv.Itoa(v), "meta.bin") }
	if *update {
		if err := os.MkdirAll(filepath.Dir(path(newestGolden)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path(newestGolden), appendMeta(nil, goldenMeta[newestGolden], metaLeaving), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for v := 1; v <= newestGolden; v++ {
		b, err := os.ReadFile(path(v))
		if err != nil {
			t.Fatalf("v%d: %v (run go test -run TestGoldenMeta -update)", v, err)
		}
		got, flags, err := decodeMeta(b)
		if err != nil || got != goldenMeta[v] || flags != metaLeaving {
			t.Errorf("v%d golden: got %+v flags %d err %v, want %+v", v, got, flags, err, goldenMeta[v])
		}
	}
}

// decodeMetaBeforeExts is decodeMeta as released before meta extensions
// (ring.Meta without Protocol): it stops after the three addresses.
// It stands for an older member reading a newer member's meta.
func decodeMetaBeforeExts(b []byte) (grpc, api, http string, err error) {
	if len(b) < 2 || b[0] != metaVersion2 {
		return "", "", "", errors.New("not v2")
	}
	b = b[2:]
	for range 2 {
		_, k := binary.Varint(b)
		if k <= 0 {
			return "", "", "", errors.New("bad varint")
		}
		b = b[k:]
	}
	out := make([]string, 3)
	for i := range out {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return "", "", "", errors.New("bad address")
		}
		out[i] = string(b[k : k+int(n)])
		b = b[k+int(n):]
	}
	return out[0], out[1], out[2], nil
}

// TestMetaExtensionsAdditive: a member that advertises protocol versions
// stays readable by one that does not know the field, and a member reads
// past an extension it does not know (one from a newer member).
func TestMetaExtensionsAdditive(t *testing.T) {
	m := ring.Meta{GRPCAddr: "a:1", Incarnation: 3, Protocol: ring.Versions{Min: 1, Max: 2}}
	b := appendMeta(nil, m, 0)
	if b[0] != metaVersion2 {
		t.Fatalf("a meta with protocol versions is written as version %d, want 2", b[0])
	}
	if g, a, h, err := decodeMetaBeforeExts(b); err != nil || g != "a:1" || a != "" || h != "" {
		t.Errorf("older decoder: %q %q %q %v", g, a, h, err)
	}
	// A newer member's unknown extension (tag 9) before and after ours.
	unknown := []byte{9, 3, 'x', 'y', 'z'}
	withUnknown := append(append(append([]byte(nil), b[:len(b)-4]...), unknown...), b[len(b)-4:]...)
	withUnknown = append(withUnknown, unknown...)
	got, _, err := decodeMeta(withUnknown)
	if err != nil || got != m {
		t.Errorf("unknown extension: got %+v, %v; want %+v", got, err, m)
	}
	if !bytes.Equal(appendMeta(nil, got, 0), b) {
		t.Error("re-encoding drops only the unknown extension")
	}
	for _, bad := range [][]byte{
		append(append([]byte(nil), b...), 9),                     // tag without length
		append(append([]byte(nil), b...), 9, 5, 'x'),             // length past the end
		append(append([]byte(nil), b[:len(b)-4]...), 1, 1, 0x80), // truncated versions
	} {
		if _, _, err := decodeMeta(bad); err == nil {
			t.Errorf("decodeMeta(%v) accepted", bad)
		}
	}
	// The version-1 encoding is kept for a member with nothing new to say.
	if b := appendMeta(nil, ring.Meta{GRPCAddr: "a:1"}, 0); b[0] != metaVersion1 {
		t.Errorf("plain meta written as version %d", b[0])
	}
}

// respGoldenMeta is what testdata/meta-resp.bin holds: a meta with the
// RESP address extension, as this version writes it.
var respGoldenMeta = ring.Meta{
	GRPCAddr: "10.0.0.1:7947", APIAddr: "10.0.0.1:8080", HTTPAddr: "10.0.0.1:8081", RESPAddr: "10.0.0.1:6380",
	LimitsVersion: 7, Incarnation: 1_700_000_000_000_000_001,
	Protocol: ring.Versions{Min: 1, Max: 1},
}

// decodeMetaExtsBeforeRESP is decodeMetaExts as released before the RESP
// address extension: it knows the protocol versions alone and skips every
// other tag. It stands for an older member reading a newer one's meta.
func decodeMetaExtsBeforeRESP(b []byte, m *ring.Meta) error {
	return walkMetaExts(b, func(tag uint64, val []byte) error {
		if tag != metaExtProtocol {
			return nil
		}
		v, err := decodeVersions(val)
		if err != nil {
			return err
		}
		m.Protocol = v
		return nil
	})
}

// TestGoldenMetaRESP: the RESP address extension's encoding is pinned by
// a golden file (-update rewrites it), this decoder reads it back, and a
// decoder from before it reads everything else of the meta and ignores it.
func TestGoldenMetaRESP(t *testing.T) {
	path := filepath.Join("testdata", "meta-resp.bin")
	if *update {
		if err := os.WriteFile(path, appendMeta(nil, respGoldenMeta, 0), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run TestGoldenMetaRESP -update)", err)
	}
	if got, _, err := decodeMeta(b); err != nil || got != respGoldenMeta {
		t.Errorf("golden: got %+v, %v; want %+v", got, err, respGoldenMeta)
	}
	if !bytes.Equal(appendMeta(nil, respGoldenMeta, 0), b) {
		t.Error("the encoding of the RESP extension changed (golden bytes differ)")
	}
	// Older decoders: the one from before extensions, and the one that knew
	// only the protocol versions.
	if g, a, h, err := decodeMetaBeforeExts(b); err != nil || g != respGoldenMeta.GRPCAddr || a != respGoldenMeta.APIAddr || h != respGoldenMeta.HTTPAddr {
		t.Errorf("decoder before extensions: %q %q %q %v", g, a, h, err)
	}
	var old ring.Meta
	noExts := respGoldenMeta
	noExts.Protocol, noExts.RESPAddr = ring.Versions{}, ""
	exts := b[len(appendMeta(nil, noExts, 0)):]
	if err := decodeMetaExtsBeforeRESP(exts, &old); err != nil || old.Protocol != respGoldenMeta.Protocol || old.RESPAddr != "" {
		t.Errorf("decoder before the RESP extension: %+v, %v", old, err)
	}
	// A meta with a RESP address alone is written as version 2.
	if b := appendMeta(nil, ring.Meta{GRPCAddr: "a:1", RESPAddr: "a:6379"}, 0); b[0] != metaVersion2 {
		t.Errorf("meta with a RESP address written as version %d", b[0])
	}
}
