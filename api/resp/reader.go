package resp

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strconv"
)

// maxInline bounds an inline (telnet-style) command line and a RESP
// header line, in bytes; it is the reader's buffer size.
const maxInline = 16 << 10

// protocolError is input that breaks the protocol or the reader's bounds;
// the connection answers it with -ERR Protocol error: ... and closes, as
// Redis does.
type protocolError string

// Error returns the answer's text after "ERR ".
func (e protocolError) Error() string { return "Protocol error: " + string(e) }

// reader reads commands in Redis's request formats (RESP arrays of bulk
// strings, and inline commands split on spaces) within bounds that are
// checked on each header before anything is allocated for it: at most
// maxArgs arguments, each at most maxBulk bytes, at most maxBytes of
// arguments per command. redcon v1.6.4's own reader is not used: it spins
// for as long as a multibulk count says (2^62 iterations for
// "*4611686018427387904\r\n") and panics on a bulk length near
// math.MaxInt64, both found by FuzzDispatch.
//
// A reader is not safe for concurrent use. The arguments next returns are
// valid until the following call.
type reader struct {
	br       *bufio.Reader
	maxArgs  int
	maxBulk  int
	maxBytes int
	note     string // appended to the bounds' protocol errors (" before AUTH")
	args     [][]byte
	arena    []byte // backs args; reset by next
}

func newReader(r io.Reader, maxArgs, maxBulk, maxBytes int) *reader {
	return &reader{br: bufio.NewReaderSize(r, maxInline), maxArgs: maxArgs, maxBulk: maxBulk, maxBytes: maxBytes}
}

// next reads one command. Empty commands (a blank line, "*0") are
// skipped. An error is io.EOF or a read error when the connection ended,
// or a protocolError.
func (r *reader) next() ([][]byte, error) {
	r.args, r.arena = r.args[:0], r.arena[:0]
	for {
		line, err := r.line()
		if err != nil {
			return nil, err
		}
		if len(line) == 0 {
			continue
		}
		if line[0] != '*' {
			if err := r.inline(line); err != nil {
				return nil, err
			}
			if len(r.args) == 0 {
				continue
			}
			return r.args, nil
		}
		n64, ok := parseInt(trimCR(line[1:]))
		n := int(n64)
		if !ok || n64 > 1024*1024 {
			return nil, protocolError("invalid multibulk length")
		}
		if n <= 0 {
			continue
		}
		if n > r.maxArgs {
			return nil, protocolError("command has " + strconv.Itoa(n) + " arguments, over the " + strconv.Itoa(r.maxArgs) + " maximum" + r.note)
		}
		total := 0
		for range n {
			arg, err := r.bulk(&total)
			if err != nil {
				return nil, err
			}
			r.args = append(r.args, arg)
		}
		return r.args, nil
	}
}

// bulk reads one "$len\r\n<bytes>\r\n" argument, adding its size to total.
func (r *reader) bulk(total *int) ([]byte, error) {
	line, err := r.line()
	if err != nil {
		return nil, err
	}
	if len(line) == 0 || line[0] != '$' {
		got := "\\n"
		if len(line) > 0 {
			got = printable(line[:1])
		}
		return nil, protocolError("expected '$', got '" + got + "'")
	}
	size64, ok := parseInt(trimCR(line[1:]))
	size := int(size64)
	if !ok || size64 < 0 {
		return nil, protocolError("invalid bulk length")
	}
	if size > r.maxBulk {
		return nil, protocolError("argument of " + strconv.Itoa(size) + " bytes, over the " + strconv.Itoa(r.maxBulk) + "-byte maximum")
	}
	if *total += size; *total > r.maxBytes {
		return nil, protocolError("command over " + strconv.Itoa(r.maxBytes) + " bytes" + r.note)
	}
	arg := r.alloc(size + 2)
	if _, err := io.ReadFull(r.br, arg); err != nil {
		return nil, err
	}
	if arg[size] != '\r' || arg[size+1] != '\n' {
		return nil, protocolError("invalid bulk length")
	}
	return arg[:size:size], nil
}

// inline splits an inline command on spaces into r.args.
func (r *reader) inline(line []byte) error {
	for _, f := range bytes.Fields(trimCR(line)) {
		if len(r.args) == r.maxArgs {
			return protocolError("command has more than " + strconv.Itoa(r.maxArgs) + " arguments" + r.note)
		}
		r.args = append(r.args, f)
	}
	return nil
}

// line reads one line without its "\n"; a line longer than maxInline is a
// protocolError.
func (r *reader) line() ([]byte, error) {
	line, err := r.br.ReadSlice('\n')
	switch {
	case errors.Is(err, bufio.ErrBufferFull):
		return nil, protocolError("too big inline request")
	case err != nil:
		if len(line) > 0 && errors.Is(err, io.EOF) {
			return nil, io.ErrUnexpectedEOF
		}
		return nil, err
	}
	line = line[:len(line)-1]
	// The slice points into the reader's buffer, which the next read
	// overwrites: inline arguments are kept, so copy.
	if len(line) > 0 && line[0] != '*' && line[0] != '$' {
		cp := r.alloc(len(line))
		copy(cp, line)
		return cp, nil
	}
	return line, nil
}

// alloc returns n bytes from the arena, starting a new block when the
// current one is full (earlier arguments keep theirs).
func (r *reader) alloc(n int) []byte {
	if cap(r.arena)-len(r.arena) < n {
		r.arena = make([]byte, 0, max(4096, n))
	}
	s := r.arena[len(r.arena) : len(r.arena)+n]
	r.arena = r.arena[:len(r.arena)+n]
	return s
}

func trimCR(b []byte) []byte {
	if len(b) > 0 && b[len(b)-1] == '\r' {
		return b[:len(b)-1]
	}
	return b
}
