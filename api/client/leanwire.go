package client

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weir-rl/weir/api"
)

// This file is the client's side of the RESP framing it speaks to a
// member's WEIR.CTAKE (package api/resp documents the command): the request
// encoder and the mapping of error replies to status errors. The reply
// decoder, which reads only what WEIR.CTAKE, AUTH and the handshake's probe
// answer, within bounds, is in leanread.go.

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
