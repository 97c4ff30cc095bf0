package transport

import (
	"encoding/binary"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/weir-rl/weir/bucket"
)

// Packed bucket entries (HandoffRequest.buckets, protocol V2): the bucket
// states of a handoff or replica batch as one byte string instead of one
// HandoffEntry message each. A replica batch is thousands of buckets a
// second per successor, and as messages each cost four allocations and a
// reflective walk on both sides (BenchmarkReplicate); packed, a batch
// costs a handful of allocations whatever its length. Only buckets of a
// limit the limits file names are packed: one that carries its own limit
// (bucket.Entry.Limit, an inline limit) goes as a message, as do leases
// and allotments, which are rare.
//
// The layout, every integer a varint (uvarint for counts and lengths,
// zig-zag for the snapshot's signed fields):
//
//	names   uvarint n, then n × (uvarint length, bytes): the limit names
//	entries uvarint n, then n × entry
//	entry   uvarint name index, uvarint key length, key bytes,
//	        byte algorithm | 0x80 when Full,
//	        varint Count, Frac, Prev, Ahead, Since, Left, UntilFull (ns)
//
// A bucket of an algorithm this build does not know is dropped, as in
// decodeState; anything else malformed fails the whole batch.

// packedFull marks a Full snapshot in an entry's algorithm byte.
const packedFull = 0x80

// errPacked is the error of malformed packed buckets.
var errPacked = errors.New("transport: malformed packed buckets")

// packedBufs keeps the byte strings packed buckets are appended to from
// one batch to the next (*[]byte), as httpapi's takeBufs keeps answers.
// A replica batch packs to KBs every interval per successor; appended to
// an empty slice each time, the doubling was 30 % of a replicated entry's
// cost (BenchmarkReplicate/v2, 576 against 405 ns an entry). A buffer is
// free again once its Handoff call returns: gRPC has marshaled the
// request by then.
var packedBufs = sync.Pool{New: func() any { return new([]byte) }}

// maxPackedBuf is the largest buffer packedBufs keeps: a resync's chunk
// of handoffChunk long keys may be larger, and is left to the collector
// (its pointer goes back holding the last buffer that fit).
const maxPackedBuf = 1 << 20

// packable reports whether e goes in the packed form: it carries no limit
// of its own.
func packable(e *bucket.Entry) bool { return e.Limit == (bucket.Limit{}) }

// appendPacked appends the packed form of entries, all packable, to b.
func appendPacked(b []byte, entries []bucket.Entry) []byte {
	// A batch is nearly always of a few limits: a linear search of them
	// beats a map.
	var names []string
	index := func(name string) int {
		for i, n := range names {
			if n == name {
				return i
			}
		}
		names = append(names, name)
		return len(names) - 1
	}
	idx := make([]int, len(entries))
	for i := range entries {
		idx[i] = index(entries[i].Name)
	}
	b = binary.AppendUvarint(b, uint64(len(names)))
	for _, n := range names {
		b = binary.AppendUvarint(b, uint64(len(n)))
		b = append(b, n...)
	}
	b = binary.AppendUvarint(b, uint64(len(entries)))
	for i := range entries {
		e := &entries[i]
		s := &e.Snapshot
		b = binary.AppendUvarint(b, uint64(idx[i]))
		b = binary.AppendUvarint(b, uint64(len(e.Key)))
		b = append(b, e.Key...)
		alg := byte(s.Algorithm)
		if s.Full {
			alg |= packedFull
		}
		b = append(b, alg)
		for _, v := range [...]int64{s.Count, s.Frac, s.Prev, int64(s.Ahead), int64(s.Since), int64(s.Left), int64(s.UntilFull)} {
			b = binary.AppendVarint(b, v)
		}
	}
	return b
}

// packedReader reads the packed form; err is set by the first read past
// the end or of a malformed varint, after which every read returns zero.
type packedReader struct {
	b   []byte
	err error
}

func (r *packedReader) uvarint() uint64 { return readVarint(r, binary.Uvarint) }
func (r *packedReader) varint() int64   { return readVarint(r, binary.Varint) }

// readVarint reads the next varint with decode (binary.Uvarint or
// binary.Varint).
func readVarint[T int64 | uint64](r *packedReader, decode func([]byte) (T, int)) T {
	v, n := decode(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

// bytes returns the next n bytes, which alias the input.
func (r *packedReader) bytes(n uint64) []byte {
	if r.err != nil || n > uint64(len(r.b)) {
		r.fail()
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *packedReader) fail() {
	if r.err == nil {
		r.err = errPacked
	}
	r.b = nil
}

// minPackedEntry is the fewest bytes an entry takes: name index, key
// length, algorithm byte and seven one-byte varints.
const minPackedEntry = 10

// decodePacked appends the buckets of packed form b to out and returns
// it; on a malformed b it returns out unchanged and errPacked. A bucket's
// name and key are strings of their own (one allocation for the batch's
// keys), so out retains none of b.
func decodePacked(out []bucket.Entry, b []byte) ([]bucket.Entry, error) {
	return decodePackedIf(out, b, false, 0)
}

// decodePackedIf is decodePacked of, when inDebt, only the buckets still
// in debt elapsed after their snapshots (bucket.Snapshot.InDebtAfter). It
// walks b once.
func decodePackedIf(out []bucket.Entry, b []byte, inDebt bool, elapsed time.Duration) ([]bucket.Entry, error) {
	if len(b) == 0 {
		return out, nil
	}
	// The keys are copied into one string and sliced from it, and the
	// names, read before the buckets, set once the walk returns them.
	start := len(out)
	var keys strings.Builder
	keys.Grow(len(b))
	type span struct{ from, to, name int }
	var spans []span
	names, _, err := walkPacked(b, func(ni uint64, key []byte, s bucket.Snapshot) {
		if inDebt && !s.InDebtAfter(elapsed) {
			return
		}
		spans = append(spans, span{keys.Len(), keys.Len() + len(key), int(ni)}) //nolint:gosec // ni < the names walkPacked read
		keys.Write(key)
		s.Algorithm &^= packedFull
		out = append(out, bucket.Entry{Snapshot: s})
	})
	if err != nil {
		clear(out[start:])
		return out[:start], err
	}
	all := keys.String()
	for i, sp := range spans {
		out[start+i].Name, out[start+i].Key = names[sp.name], all[sp.from:sp.to]
	}
	return out, nil
}

// walkPacked checks packed form b and returns its limit names and the
// number of its buckets of an algorithm this build knows, calling visit
// (when not nil) with each of those: its name's index, its key (aliasing
// b) and its snapshot, whose Algorithm still has packedFull set when Full.
// A malformed b is errPacked, and visit may have been called for a prefix
// of it.
func walkPacked(b []byte, visit func(ni uint64, key []byte, s bucket.Snapshot)) ([]string, int, error) {
	r := &packedReader{b: b}
	nNames := r.uvarint()
	if nNames > uint64(len(r.b)) { // each name takes at least its length byte
		return nil, 0, errPacked
	}
	names := make([]string, nNames)
	for i := range names {
		names[i] = string(r.bytes(r.uvarint()))
	}
	n := r.uvarint()
	if r.err != nil || n > uint64(len(r.b))/minPackedEntry {
		return nil, 0, errPacked
	}
	kept := 0
	for range n {
		ni := r.uvarint()
		key := r.bytes(r.uvarint())
		alg := r.bytes(1)
		var v [7]int64
		for j := range v {
			v[j] = r.varint()
		}
		if r.err != nil || ni >= nNames {
			return nil, 0, errPacked
		}
		if alg[0]&^packedFull > byte(bucket.FixedWindow) {
			continue // an algorithm this build does not know
		}
		kept++
		if visit != nil {
			visit(ni, key, bucket.Snapshot{
				Algorithm: bucket.Algorithm(alg[0]), Full: alg[0]&packedFull != 0,
				Count: v[0], Frac: v[1], Prev: v[2], Ahead: time.Duration(v[3]), Since: time.Duration(v[4]),
				Left: time.Duration(v[5]), UntilFull: time.Duration(v[6]),
			})
		}
	}
	if len(r.b) != 0 {
		return nil, 0, errPacked
	}
	return names, kept, nil
}

// Packed is the packed buckets of a replica batch as they arrived:
// checked, not decoded. A successor keeps a batch this way until it merges
// it (most never are: see node/cluster's replica log), which costs a
// fraction of a decoded bucket's memory and holds no pointer into it. The
// zero Packed holds no bucket.
type Packed struct {
	b         []byte
	n         int
	untilFull time.Duration
}

// scanPacked checks packed form b, which the Packed it returns keeps.
func scanPacked(b []byte) (Packed, error) {
	if len(b) == 0 {
		return Packed{}, nil
	}
	var until time.Duration
	_, n, err := walkPacked(b, func(_ uint64, _ []byte, s bucket.Snapshot) {
		if s.InDebtAfter(until) {
			until = s.UntilFull
		}
	})
	if err != nil {
		return Packed{}, err
	}
	return Packed{b: b, n: n, untilFull: until}, nil
}

// PackedOf returns entries, all packable (no Entry.Limit), in the form a
// successor receives them: for tests of a Handler.
func PackedOf(entries []bucket.Entry) Packed {
	p, _ := scanPacked(appendPacked(nil, entries)) // appendPacked's own form always scans
	return p
}

// Len returns the number of buckets in p.
func (p Packed) Len() int { return p.n }

// UntilFull returns the longest time until a bucket in p holds no debt,
// counted from when its sender took the snapshots; zero when every one is
// full.
func (p Packed) UntilFull() time.Duration { return p.untilFull }

// AppendInDebt appends to out, decoded, the buckets of p still in debt
// elapsed after their snapshots (bucket.Snapshot.InDebtAfter), and returns
// it; they retain none of p's memory.
func (p Packed) AppendInDebt(out []bucket.Entry, elapsed time.Duration) []bucket.Entry {
	if p.untilFull <= elapsed {
		return out
	}
	out, _ = decodePackedIf(out, p.b, true, elapsed) // checked by scanPacked
	return out
}

// splitPackable returns the packable buckets of bs and the others, in
// their order. bs is not modified; the common batch, every bucket
// packable, is returned as it is.
func splitPackable(bs []bucket.Entry) (packed, rest []bucket.Entry) {
	i := 0
	for i < len(bs) && packable(&bs[i]) {
		i++
	}
	if i == len(bs) {
		return bs, nil
	}
	for j := range bs {
		if packable(&bs[j]) {
			packed = append(packed, bs[j])
		} else {
			rest = append(rest, bs[j])
		}
	}
	return packed, rest
}
