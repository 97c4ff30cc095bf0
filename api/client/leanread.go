package client

import (
	"bytes"
	"errors"
	"io"
	"strconv"

	"github.com/weir-rl/weir/api"
)

// This file reads the replies of a member's RESP endpoint. The reader is
// resumable: a reply is parsed only once it is buffered whole, so a read
// that fails part-way through one (a read deadline set to interrupt the
// take that is reading, see leanConn.lead) consumes nothing and the next
// reader carries on where it stopped.

// maxLeanLine bounds one line of a reply (an integer, a header or an
// error's text).
const maxLeanLine = 16 << 10

// maxLeanReply bounds a whole reply: 5 + 8*maxLeanChecks lines, each at most
// a limit name of maxLeanBulk bytes and its header, or a short integer.
const maxLeanReply = 5*32 + maxLeanChecks*(maxLeanBulk+16+7*32)

// errShort says a reply is not buffered whole yet.
var errShort = errors.New("client: reply incomplete")

// replyReader reads replies from r into a buffer of its own; buf[start:end]
// is read and not yet consumed.
type replyReader struct {
	r          io.Reader
	buf        []byte
	start, end int
	names      names
}

func newReplyReader(r io.Reader) *replyReader {
	return &replyReader{r: r, buf: make([]byte, 16<<10)}
}

// fill reads once more into the buffer, compacting or growing it (up to
// maxLeanReply) when it is full. A read error leaves everything buffered
// in place.
func (rr *replyReader) fill() error {
	if rr.start == rr.end {
		rr.start, rr.end = 0, 0
	}
	if rr.end == len(rr.buf) {
		switch {
		case rr.start > 0:
			rr.end = copy(rr.buf, rr.buf[rr.start:rr.end])
			rr.start = 0
		case len(rr.buf) >= maxLeanReply:
			return errBadReply
		default:
			grown := make([]byte, min(2*len(rr.buf), maxLeanReply))
			rr.end = copy(grown, rr.buf[:rr.end])
			rr.buf = grown
		}
	}
	for range 100 { // as bufio: a reader that keeps returning nothing is broken
		n, err := rr.r.Read(rr.buf[rr.end:])
		rr.end += n
		if n > 0 {
			return nil // an error with data comes again on the next read
		}
		if err != nil {
			return err
		}
	}
	return io.ErrNoProgress
}

// next parses one reply with parse, reading until it is buffered whole;
// block, when not nil, is called before each read, which may block. parse
// gets the cursor by value and says how much it consumed, so that the
// cursor stays on the stack (see byValue).
func next[T any](rr *replyReader, parse func(cursor) (T, int, error), block func()) (T, error) {
	for {
		v, n, err := parse(cursor{b: rr.buf[rr.start:rr.end], names: &rr.names})
		if !errors.Is(err, errShort) {
			rr.start += n
			return v, err
		}
		if block != nil {
			block()
		}
		if err := rr.fill(); err != nil {
			var zero T
			return zero, err
		}
	}
}

// readCTake reads one WEIR.CTAKE reply: the answer, or a replyError (the
// service refused the take), or another error (the connection is not
// usable any more, or, for a timeout, nothing was consumed). block, when
// not nil, is called before each read from the connection: a reply
// already buffered is returned without one.
func (rr *replyReader) readCTake(block func()) (api.TakeResponse, error) {
	return next(rr, byValue(parseCTake), block)
}

// readSimple reads a reply that is a simple string or an error: the string
// (without '+') or a replyError.
func (rr *replyReader) readSimple() (string, error) {
	return next(rr, byValue(parseSimple), nil)
}

// byValue adapts a parser to next. A cursor whose address went through a
// function value escaped to the heap: an allocation per reply.
func byValue[T any](parse func(*cursor) (T, error)) func(cursor) (T, int, error) {
	return func(c cursor) (T, int, error) {
		v, err := parse(&c)
		return v, c.i, err
	}
}

// cursor walks a buffered reply; i is how much of b it consumed. Bulk
// strings are interned in names when it is not nil.
type cursor struct {
	b     []byte
	i     int
	names *names
}

// names are the last few limit names a connection's replies carried, so
// that a reply naming one of them costs no allocation: a client asks of
// few limits.
type names struct {
	s    [8]string
	next int
}

// of returns b as a string, one of n's when it is there.
func (n *names) of(b []byte) string {
	for _, s := range n.s {
		if s == string(b) {
			return s
		}
	}
	s := string(b)
	n.s[n.next] = s
	n.next = (n.next + 1) % len(n.s)
	return s
}

// line returns the next line without its CRLF, pointing into b.
func (c *cursor) line() ([]byte, error) {
	rest := c.b[c.i:]
	j := bytes.IndexByte(rest, '\n')
	if j < 0 {
		if len(rest) > maxLeanLine {
			return nil, errBadReply
		}
		return nil, errShort
	}
	if j < 2 || rest[j-1] != '\r' {
		return nil, errBadReply
	}
	c.i += j + 1
	return rest[:j-1], nil
}

// int reads an integer reply. Integers of up to 18 digits, which are all
// a reply's but for a corrupt one, are parsed in one pass over the line;
// the rest, and anything short or malformed, by intLine.
func (c *cursor) int() (int64, error) {
	b := c.b[c.i:]
	if len(b) >= 4 && b[0] == ':' {
		j, neg := 1, b[1] == '-'
		if neg {
			j++
		}
		k, n := j, int64(0)
		for k < len(b) && k-j < 19 && b[k]-'0' <= 9 {
			n = n*10 + int64(b[k]-'0')
			k++
		}
		if k > j && k-j <= 18 && k+1 < len(b) && b[k] == '\r' && b[k+1] == '\n' {
			c.i += k + 2
			if neg {
				n = -n
			}
			return n, nil
		}
	}
	return c.intLine()
}

// intLine reads an integer reply through line and strconv.
func (c *cursor) intLine() (int64, error) {
	line, err := c.line()
	if err != nil {
		return 0, err
	}
	if line[0] != ':' {
		return 0, errBadReply
	}
	n, ok := parseReplyInt(line[1:])
	if !ok {
		return 0, errBadReply
	}
	return n, nil
}

// bulk reads a bulk string reply of at most maxLeanBulk bytes.
func (c *cursor) bulk() (string, error) {
	line, err := c.line()
	if err != nil {
		return "", err
	}
	if line[0] != '$' {
		return "", errBadReply
	}
	n, ok := parseReplyInt(line[1:])
	if !ok || n < 0 || n > maxLeanBulk {
		return "", errBadReply
	}
	rest := c.b[c.i:]
	if int64(len(rest)) < n+2 {
		return "", errShort
	}
	if rest[n] != '\r' || rest[n+1] != '\n' {
		return "", errBadReply
	}
	c.i += int(n) + 2
	if c.names != nil {
		return c.names.of(rest[:n]), nil
	}
	return string(rest[:n]), nil
}

// parseReplyInt parses an integer reply's digits strictly.
func parseReplyInt(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	return n, err == nil
}

func parseSimple(c *cursor) (string, error) {
	line, err := c.line()
	if err != nil {
		return "", err
	}
	switch line[0] {
	case '+':
		return string(line[1:]), nil
	case '-':
		return "", replyError(line[1:])
	}
	return "", errBadReply
}

func parseCTake(c *cursor) (api.TakeResponse, error) {
	line, err := c.line()
	if err != nil {
		return api.TakeResponse{}, err
	}
	switch line[0] {
	case '-':
		return api.TakeResponse{}, replyError(line[1:])
	case '*':
	default:
		return api.TakeResponse{}, errBadReply
	}
	n, ok := parseReplyInt(line[1:])
	if !ok || n < 5+8 || n > 5+8*maxLeanChecks || (n-5)%8 != 0 {
		return api.TakeResponse{}, errBadReply
	}
	var head [5]int64
	for i := range head {
		if head[i], err = c.int(); err != nil {
			return api.TakeResponse{}, err
		}
	}
	out := api.TakeResponse{
		Allowed: head[0] == 1, RetryAfter: api.MillisDuration(head[1]), RulesVersion: head[2],
		RingEpoch: uint64(head[3]), Forwarded: head[4] == 1,
		Results: make([]api.Result, (n-5)/8),
	}
	for i := range out.Results {
		limit, err := c.bulk()
		if err != nil {
			return api.TakeResponse{}, err
		}
		var f [7]int64
		for j := range f {
			if f[j], err = c.int(); err != nil {
				return api.TakeResponse{}, err
			}
		}
		if f[5] < 0 || f[5] > int64(api.SourceAllotment) {
			return api.TakeResponse{}, errBadReply
		}
		out.Results[i] = api.Result{
			Limit: limit, Allowed: f[0] == 1, Remaining: f[1], Capacity: f[2],
			RetryAfter: api.MillisDuration(f[3]), ResetAfter: api.MillisDuration(f[4]),
			Source: api.Source(f[5]), Window: api.MillisDuration(f[6]),
		}
	}
	return out, nil
}
