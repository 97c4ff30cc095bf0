package client

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weir-rl/weir/api"
)

// This file is the client's side of the RESP framing it speaks to a
// member's WEIR.CTAKE (package api/resp documents the command): the request
// encoder and a reply decoder that reads only what WEIR.CTAKE, AUTH and the
// handshake's probe answer, within bounds.

// maxBudgetMs is WEIR.CTAKE's largest budget_ms (a day); a caller with a
// longer deadline sends this much.
const maxBudgetMs = 24 * 60 * 60 * 1000

// maxLeanChecks bounds the checks of a reply the decoder accepts; a take of
// more checks is sent over gRPC (the node refuses more than its MaxChecks,
// 100 by default, either way).
const maxLeanChecks = 128

// maxLeanBulk bounds a bulk string of a reply (a limit name: at most 512
// bytes on a node by default).
const maxLeanBulk = 4096

// errBadReply is a reply the decoder cannot read: the connection is
// dropped, and the takes waiting on it fail as transport failures.
var errBadReply = errors.New("client: bad reply from the RESP endpoint")

// appendCTake appends the WEIR.CTAKE command of a take to b.
func appendCTake(b []byte, rid []byte, budgetMs int64, checks []api.Check) []byte {
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(3+3*len(checks)), 10)
	b = append(b, "\r\n$10\r\nWEIR.CTAKE\r\n"...)
	b = appendBulk(b, rid)
	b = appendBulkInt(b, budgetMs)
	for _, ch := range checks {
		b = appendBulk(b, ch.Limit)
		b = appendBulk(b, ch.Key)
		b = appendBulkInt(b, ch.Cost)
	}
	return b
}

// appendBulk appends s as a RESP bulk string.
func appendBulk[T string | []byte](b []byte, s T) []byte {
	b = append(b, '$')
	b = strconv.AppendInt(b, int64(len(s)), 10)
	b = append(b, '\r', '\n')
	b = append(b, s...)
	return append(b, '\r', '\n')
}

func appendBulkInt(b []byte, n int64) []byte {
	var tmp [20]byte
	return appendBulk(b, strconv.AppendInt(tmp[:0], n, 10))
}

// budgetOf is the budget_ms of a take under ctx: its remaining deadline in
// whole milliseconds rounded up (at least 1), 0 without a deadline.
func budgetOf(ctx context.Context) int64 {
	dl, ok := ctx.Deadline()
	if !ok {
		return 0
	}
	d := time.Until(dl)
	if d <= 0 {
		return 1
	}
	return min(max(api.MillisUp(d), 1), maxBudgetMs)
}

// replyError is an error reply ("-CODE detail").
type replyError string

// Error returns the reply's text.
func (e replyError) Error() string { return "client: RESP endpoint: " + string(e) }

// readLine reads one reply line without its CRLF. The slice points into
// br's buffer.
func readLine(br *bufio.Reader) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			return nil, errBadReply
		}
		return nil, err
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return nil, errBadReply
	}
	return line[:len(line)-2], nil
}

// readSimple reads a reply that is a simple string or an error: the string
// (without '+') or a replyError.
func readSimple(br *bufio.Reader) (string, error) {
	line, err := readLine(br)
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

// parseReplyInt parses an integer reply's digits strictly.
func parseReplyInt(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	return n, err == nil
}

// readInt reads an integer reply.
func readInt(br *bufio.Reader) (int64, error) {
	line, err := readLine(br)
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

// readCTake reads one WEIR.CTAKE reply: the answer, or a replyError (the
// service refused the take), or another error (the connection is not
// usable any more).
func readCTake(br *bufio.Reader) (api.TakeResponse, error) {
	line, err := readLine(br)
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
		if head[i], err = readInt(br); err != nil {
			return api.TakeResponse{}, err
		}
	}
	out := api.TakeResponse{
		Allowed: head[0] == 1, RetryAfter: api.MillisDuration(head[1]), RulesVersion: head[2],
		RingEpoch: uint64(head[3]), Forwarded: head[4] == 1,
		Results: make([]api.Result, (n-5)/8),
	}
	for i := range out.Results {
		limit, err := readBulk(br)
		if err != nil {
			return api.TakeResponse{}, err
		}
		var f [7]int64
		for j := range f {
			if f[j], err = readInt(br); err != nil {
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

// readBulk reads a bulk string reply of at most maxLeanBulk bytes.
func readBulk(br *bufio.Reader) (string, error) {
	line, err := readLine(br)
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
	b := make([]byte, n+2)
	if _, err := io.ReadFull(br, b); err != nil {
		return "", err
	}
	if b[n] != '\r' || b[n+1] != '\n' {
		return "", errBadReply
	}
	return string(b[:n]), nil
}

// statusOfReply converts a WEIR.CTAKE error reply to the status error a
// gRPC Take would have failed with for the same cause, so that the rest of
// the client (retryable, fromStatus) treats both transports alike.
func statusOfReply(e replyError) error {
	code, detail, _ := strings.Cut(string(e), " ")
	var c codes.Code
	switch code {
	case "ERR":
		c = codes.InvalidArgument
		if detail == "internal error" {
			c = codes.Internal
		}
	case "NOTFOUND":
		c = codes.NotFound
	case "UNAVAILABLE":
		c = codes.Unavailable
	case "OVERLOADED", "QUOTA":
		c = codes.ResourceExhausted
	case "DEADLINE":
		c = codes.DeadlineExceeded
	case "NOAUTH", "WRONGPASS":
		c = codes.Unauthenticated
	case "NOPERM":
		c = codes.PermissionDenied
	default:
		return fmt.Errorf("client: RESP endpoint answered %q", string(e))
	}
	return status.Error(c, detail)
}
