package client

import (
	"errors"
	"strings"
	"testing"
)

// repeatReader returns its bytes over and over.
type repeatReader struct {
	b []byte
	i int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		m := copy(p[n:], r.b[r.i:])
		n += m
		r.i = (r.i + m) % len(r.b)
	}
	return n, nil
}

// BenchmarkReadCTake is the client's decoding of one WEIR.CTAKE reply of
// one result, buffered as a pipelined connection reads them.
func BenchmarkReadCTake(b *testing.B) {
	rr := newReplyReader(&repeatReader{b: versionReply(12345)})
	b.ReportAllocs()
	for b.Loop() {
		resp, err := rr.readCTake(nil)
		if err != nil || resp.RulesVersion != 12345 {
			b.Fatalf("%+v, %v", resp, err)
		}
	}
}

// TestCursorIntAgreesWithStrconv: the one-pass integer parser answers as
// the line-and-strconv one does (value, bytes consumed, error) on numbers
// of every length around its 18-digit cut, signs, and malformed or short
// input.
func TestCursorIntAgreesWithStrconv(t *testing.T) {
	ins := []string{
		":0\r\n", ":-0\r\n", ":+5\r\n", ":7\r\n:8\r\n", ":-1\r\n", ":\r\n", ":-\r\n", ":12a\r\n", ":12\n", ":12\r",
		":12", ":", "", "$3\r\nabc\r\n", ":1 \r\n", ": 1\r\n", ":--1\r\n",
		":999999999999999999\r\n", ":-999999999999999999\r\n", ":1000000000000000000\r\n",
		":9223372036854775807\r\n", ":-9223372036854775808\r\n", ":9223372036854775808\r\n", ":99999999999999999999\r\n",
	}
	for d := 1; d <= 20; d++ {
		ins = append(ins, ":"+strings.Repeat("9", d)+"\r\n", ":-"+strings.Repeat("1", d)+"\r\n")
	}
	for _, in := range ins {
		fast, slow := cursor{b: []byte(in)}, cursor{b: []byte(in)}
		fv, ferr := fast.int()
		sv, serr := slow.intLine()
		if fv != sv || fast.i != slow.i || !errors.Is(ferr, serr) {
			t.Errorf("%q: one pass %d, consumed %d, %v; strconv %d, consumed %d, %v", in, fv, fast.i, ferr, sv, slow.i, serr)
		}
	}
}

// TestReadCTakeAllocatesOnlyResults: decoding a reply allocates its
// Results and nothing else; a limit name seen before is reused.
func TestReadCTakeAllocatesOnlyResults(t *testing.T) {
	rr := newReplyReader(&repeatReader{b: versionReply(1)})
	if _, err := rr.readCTake(nil); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = rr.readCTake(nil) }); n != 1 {
		t.Fatalf("%v allocations per reply, want 1 (its Results)", n)
	}
}

// TestReadCTakeBlocksOnlyToRead: block is called before each read from
// the connection and not for a reply already buffered, so a leader whose
// reply came with another's sets up no interruption.
func TestReadCTakeBlocksOnlyToRead(t *testing.T) {
	rr := newReplyReader(&repeatReader{b: versionReply(1)})
	blocked := 0
	block := func() { blocked++ }
	if _, err := rr.readCTake(block); err != nil || blocked != 1 {
		t.Fatalf("first reply: %v after %d reads, want one read", err, blocked)
	}
	// The read filled the buffer with many replies.
	for i := range 10 {
		if _, err := rr.readCTake(block); err != nil || blocked != 1 {
			t.Fatalf("buffered reply %d: %v, block called %d times, want still once", i, err, blocked)
		}
	}
}
