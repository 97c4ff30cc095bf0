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

// next parses one reply with parse, reading until it is buffered whole.
func next[T any](rr *replyReader, parse func(*cursor) (T, error)) (T, error) {
	for {
		c := cursor{b: rr.buf[rr.start:rr.end]}
		v, err := parse(&c)
		if !errors.Is(err, errShort) {
			rr.start += c.i
			return v, err
		}
		if err := rr.fill(); err != nil {
			var zero T
			return zero, err
		}
	}
}

// readCTake reads one WEIR.CTAKE reply: the answer, or a replyError (the
// service refused the take), or another error (the connection is not
// usable any more, or, for a timeout, nothing was consumed).
func (rr *replyReader) readCTake() (api.TakeResponse, error) {
	return next(rr, parseCTake)
}

// readSimple reads a reply that is a simple string or an error: the string
// (without '+') or a replyError.
func (rr *replyReader) readSimple() (string, error) {
	return next(rr, parseSimple)
}

// cursor walks a buffered reply; i is how much of b it consumed.
type cursor struct {
	b []byte
	i int
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

// int reads an integer reply.
func (c *cursor) int() (int64, error) {
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
