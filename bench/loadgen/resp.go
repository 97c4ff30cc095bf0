package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"
)

// A minimal RESP2 client: enough to load a script and call EVALSHA, with no
// dependency beyond the standard library. One respConn is one TCP
// connection with one request in flight (no pipelining); the redis-lua
// target gives every caller its own, which is the connection pool of a
// typical Redis client sized to the concurrency.

// Bounds on what readValue accepts, so a broken or hostile peer cannot make
// the load generator allocate without limit.
const (
	respMaxBulk  = 64 << 20 // bytes in one bulk string
	respMaxArray = 1 << 20  // elements in one array
	respMaxDepth = 8        // nesting of arrays
)

// respKind is the type of a RESP2 reply.
type respKind byte

// The RESP2 reply types, by their first byte on the wire.
const (
	respSimple  respKind = '+'
	respError   respKind = '-'
	respInteger respKind = ':'
	respBulk    respKind = '$'
	respArray   respKind = '*'
)

// respValue is one decoded reply. Str holds a simple string, an error
// message or a bulk string; Int an integer; Arr the elements of an array.
// Null marks the null bulk string ($-1) and the null array (*-1). A value is
// reused across reads to avoid allocating: Str and Arr are overwritten.
type respValue struct {
	Kind respKind
	Null bool
	Int  int64
	Str  []byte
	Arr  []respValue
}

// redisError is an error reply ("-ERR ...", "-NOSCRIPT ...") returned as
// the error of a command.
type redisError string

// Error implements error.
func (e redisError) Error() string { return "loadgen: redis: " + string(e) }

// prefix returns the error's code, its first word (ERR, NOSCRIPT, ...).
func (e redisError) prefix() string {
	for i := range len(e) {
		if e[i] == ' ' {
			return string(e[:i])
		}
	}
	return string(e)
}

// errProtocol reports a reply that is not valid RESP2.
var errProtocol = errors.New("loadgen: redis: protocol error")

// appendCommand appends args as a RESP2 array of bulk strings, the form in
// which clients send commands.
func appendCommand(b []byte, args ...string) []byte {
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(len(args)), 10)
	b = append(b, '\r', '\n')
	for _, a := range args {
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(a)), 10)
		b = append(b, '\r', '\n')
		b = append(b, a...)
		b = append(b, '\r', '\n')
	}
	return b
}

// readValue reads one reply from r into dst.
func readValue(r *bufio.Reader, dst *respValue) error {
	return readValueDepth(r, dst, 0)
}

func readValueDepth(r *bufio.Reader, dst *respValue, depth int) error {
	line, err := readLine(r)
	if err != nil {
		return err
	}
	if len(line) == 0 {
		return fmt.Errorf("%w: empty line", errProtocol)
	}
	dst.Kind, dst.Null, dst.Int = respKind(line[0]), false, 0
	dst.Str, dst.Arr = dst.Str[:0], dst.Arr[:0]
	body := line[1:]
	switch dst.Kind {
	case respSimple, respError:
		dst.Str = append(dst.Str, body...)
		return nil
	case respInteger:
		dst.Int, err = parseInt(body)
		return err
	case respBulk:
		n, err := parseInt(body)
		if err != nil {
			return err
		}
		if n == -1 {
			dst.Null = true
			return nil
		}
		if n < 0 || n > respMaxBulk {
			return fmt.Errorf("%w: bulk length %d", errProtocol, n)
		}
		dst.Str = grow(dst.Str, int(n)+2)
		if _, err := io.ReadFull(r, dst.Str); err != nil {
			return err
		}
		if dst.Str[n] != '\r' || dst.Str[n+1] != '\n' {
			return fmt.Errorf("%w: bulk string not terminated by CRLF", errProtocol)
		}
		dst.Str = dst.Str[:n]
		return nil
	case respArray:
		n, err := parseInt(body)
		if err != nil {
			return err
		}
		if n == -1 {
			dst.Null = true
			return nil
		}
		if n < 0 || n > respMaxArray {
			return fmt.Errorf("%w: array length %d", errProtocol, n)
		}
		if depth >= respMaxDepth {
			return fmt.Errorf("%w: arrays nested deeper than %d", errProtocol, respMaxDepth)
		}
		if cap(dst.Arr) >= int(n) {
			dst.Arr = dst.Arr[:n]
		} else {
			dst.Arr = append(dst.Arr[:cap(dst.Arr)], make([]respValue, int(n)-cap(dst.Arr))...)
		}
		for i := range dst.Arr {
			if err := readValueDepth(r, &dst.Arr[i], depth+1); err != nil {
				return err
			}
		}
		return nil
	default:
		return fmt.Errorf("%w: unknown reply type %q", errProtocol, line[0])
	}
}

// readLine returns the next CRLF-terminated line without its CRLF. The
// slice is valid until the next read from r.
func readLine(r *bufio.Reader) ([]byte, error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			return nil, fmt.Errorf("%w: line longer than %d bytes", errProtocol, r.Size())
		}
		return nil, err
	}
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return nil, fmt.Errorf("%w: line not terminated by CRLF", errProtocol)
	}
	return line[:len(line)-2], nil
}

// parseInt parses a RESP integer without allocating.
func parseInt(b []byte) (int64, error) {
	if len(b) == 0 || len(b) > 20 {
		return 0, fmt.Errorf("%w: bad integer %q", errProtocol, b)
	}
	neg := b[0] == '-'
	if neg {
		b = b[1:]
		if len(b) == 0 {
			return 0, fmt.Errorf("%w: bad integer %q", errProtocol, "-")
		}
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("%w: bad integer %q", errProtocol, b)
		}
		d := int64(c - '0')
		if n > (1<<63-1-d)/10 {
			return 0, fmt.Errorf("%w: integer overflows int64", errProtocol)
		}
		n = n*10 + d
	}
	if neg {
		n = -n
	}
	return n, nil
}

// grow returns b resized to n bytes, reusing its array when large enough.
func grow(b []byte, n int) []byte {
	if cap(b) >= n {
		return b[:n]
	}
	return make([]byte, n)
}

// respConn is one connection to a Redis server. It is not safe for
// concurrent use.
type respConn struct {
	c        net.Conn
	r        *bufio.Reader
	out      []byte    // reused command buffer
	deadline time.Time // the deadline last set on c
}

// dialRESP connects to a Redis server at addr (host:port).
func dialRESP(ctx context.Context, addr string) (*respConn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("loadgen: redis: %w", err)
	}
	return &respConn{c: c, r: bufio.NewReaderSize(c, 4096)}, nil
}

// do sends one command and reads its reply into dst. An error reply is
// returned as a redisError (dst holds it too). A deadline that is not zero
// bounds the whole exchange.
func (c *respConn) do(deadline time.Time, dst *respValue, args ...string) error {
	if !deadline.Equal(c.deadline) {
		if err := c.c.SetDeadline(deadline); err != nil {
			return err
		}
		c.deadline = deadline
	}
	c.out = appendCommand(c.out[:0], args...)
	if _, err := c.c.Write(c.out); err != nil {
		return err
	}
	if err := readValue(c.r, dst); err != nil {
		return err
	}
	if dst.Kind == respError {
		return redisError(dst.Str)
	}
	return nil
}

// Close closes the connection.
func (c *respConn) Close() error { return c.c.Close() }
