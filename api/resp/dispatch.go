package resp

import (
	"context"
	"errors"
	"runtime/debug"
	"strconv"

	"github.com/tidwall/redcon"

	"github.com/weir-rl/weir/api"
)

// session is one connection's protocol state. Only the connection's
// goroutine touches it.
type session struct {
	id        int64
	proto     int // 2 or 3, as negotiated by HELLO
	name      string
	authed    bool
	principal any // what Config.Authenticate returned
	quit      bool
	tx        transaction // MULTI state
}

// handler runs one command whose name, argument count and sizes were
// checked, writing exactly one reply.
type handler func(ctx context.Context, st *session, args [][]byte, w *redcon.Writer)

// command is one entry of the command table: what it runs and what
// COMMAND tells clients about it.
type command struct {
	name    string // lower case
	arity   int    // Redis's convention: N exactly N arguments, -N at least N
	flags   []string
	first   int // key positions, for COMMAND
	last    int
	step    int
	group   string // for COMMAND DOCS
	summary string
	preAuth bool // may run before AUTH
	now     bool // runs at once inside MULTI instead of being queued
	noMulti bool // refused inside MULTI (it changes who the connection is)
	run     handler
}

// commands builds the command table of s. It is built once, in New, and
// never modified.
func (s *Server) commands() map[string]*command {
	list := []*command{
		{
			name: "weir.take", arity: -3, flags: []string{"write", "fast"}, first: 2, last: 2, step: 1, group: "weir",
			summary: "Spends cost (default 1) from the bucket (limit, key): [allowed, remaining, retry_after_ms, reset_after_ms]", run: s.take,
		},
		{
			name: "weir.mtake", arity: -4, flags: []string{"write", "fast"}, first: 2, last: -1, step: 3, group: "weir",
			summary: "Spends every (limit, key, cost) or none: [allowed, retry_after_ms, [allowed, remaining, retry_after_ms, reset_after_ms]...]", run: s.mtake,
		},
		{
			name: "weir.ctake", arity: -6, flags: []string{"write", "fast"}, first: 4, last: -1, step: 3, group: "weir",
			summary: "The Go client's take: request id, budget, checks; [allowed, retry_after_ms, rules_version, ring_epoch, forwarded, per check: limit, allowed, remaining, capacity, retry_after_ms, reset_after_ms, source, window_ms]", run: s.ctake,
		},
		{
			name: "cl.throttle", arity: -5, flags: []string{"write", "fast"}, first: 1, last: 1, step: 1, group: "weir",
			summary: "redis-cell's GCRA throttle: [limited, limit, remaining, retry_after_s, reset_after_s]", run: s.throttle,
		},
		{
			name: "weir.acquire", arity: -3, flags: []string{"write"}, first: 2, last: 2, step: 1, group: "weir",
			summary: "Acquires a concurrency lease: [granted, id, fencing_token, ttl_ms, retry_after_ms]", run: s.acquire,
		},
		{
			name: "weir.renew", arity: -2, flags: []string{"write", "fast"}, group: "weir",
			summary: "Renews a lease: its new ttl_ms", run: s.renew,
		},
		{
			name: "weir.release", arity: 2, flags: []string{"write", "fast"}, group: "weir",
			summary: "Releases a lease", run: s.release,
		},
		{name: "ping", arity: -1, flags: []string{"fast", "stale"}, group: "connection", summary: "Returns PONG, or the message", preAuth: true, run: s.ping},
		{name: "echo", arity: 2, flags: []string{"fast"}, group: "connection", summary: "Returns the message", run: s.echo},
		{
			name: "hello", arity: -1, flags: []string{"noscript", "loading", "stale", "fast", "no_auth"}, group: "connection",
			summary: "Negotiates the protocol (2 or 3), optionally authenticates and names the connection", preAuth: true, noMulti: true, run: s.hello,
		},
		{
			name: "auth", arity: -2, flags: []string{"noscript", "loading", "stale", "fast", "no_auth"}, group: "connection",
			summary: "Authenticates the connection", preAuth: true, noMulti: true, run: s.auth,
		},
		{
			name: "client", arity: -2, flags: []string{"noscript", "loading", "stale"}, group: "connection",
			summary: "CLIENT SETNAME, GETNAME, SETINFO, ID", run: s.client,
		},
		{
			name: "select", arity: 2, flags: []string{"loading", "stale", "fast"}, group: "connection",
			summary: "Selects database 0, the only one", run: s.selectDB,
		},
		{
			name: "quit", arity: -1, flags: []string{"noscript", "loading", "stale", "fast", "no_auth"}, group: "connection",
			summary: "Closes the connection", preAuth: true, now: true, run: s.quit,
		},
		{
			name: "command", arity: -1, flags: []string{"loading", "stale"}, group: "server",
			summary: "COMMAND, COMMAND COUNT, INFO, DOCS, LIST", run: s.command,
		},
		s.infoCommand(),
	}
	list = append(list, s.txCommands()...)
	m := make(map[string]*command, len(list))
	for _, c := range list {
		m[c.name] = c
	}
	return m
}

// maxNameBytes bounds a command name worth looking up; longer is unknown.
const maxNameBytes = 32

// dispatch runs one command and writes its one reply. Malformed commands
// (too many or too long arguments, an unknown name, a wrong count) get an
// error reply and run nothing; inside MULTI they also make EXEC abort, and
// the other commands are queued (see multi.go). A panic becomes -ERR
// internal error.
func (s *Server) dispatch(ctx context.Context, st *session, args [][]byte, w *redcon.Writer) {
	defer func() {
		if v := recover(); v != nil {
			s.log.Error("resp: panic serving a command", "panic", v, "stack", string(debug.Stack()))
			w.WriteError("ERR internal error")
		}
	}()
	s.stats.commands.Add(1)
	cmd, refusal := s.resolve(st, args)
	if refusal != "" {
		st.tx.refuse()
		w.WriteError(refusal)
		return
	}
	if st.tx.open && !cmd.now {
		s.enqueue(st, cmd, args, w)
		return
	}
	if st.principal != nil && s.cfg.Context != nil {
		ctx = s.cfg.Context(ctx, st.principal)
	}
	cmd.run(ctx, st, args, w)
}

// resolve finds the command args name and checks what can be checked
// before running it: sizes, name, authentication, argument count, and
// whether it may be queued. A refusal is the error reply, without "-".
func (s *Server) resolve(st *session, args [][]byte) (*command, string) {
	if len(args) == 0 {
		return nil, "ERR empty command"
	}
	if len(args) > s.cfg.MaxArgs {
		return nil, "ERR command has " + strconv.Itoa(len(args)) + " arguments, over the " + strconv.Itoa(s.cfg.MaxArgs) + " maximum"
	}
	for i, a := range args {
		if len(a) > s.cfg.MaxBulkBytes {
			return nil, "ERR argument " + strconv.Itoa(i) + " is " + strconv.Itoa(len(a)) + " bytes, over the " +
				strconv.Itoa(s.cfg.MaxBulkBytes) + "-byte maximum"
		}
	}
	cmd := s.lookup(args[0])
	if cmd == nil {
		return nil, "ERR unknown command '" + printable(args[0]) + "'"
	}
	if !st.authed && !cmd.preAuth {
		return nil, "NOAUTH Authentication required."
	}
	if cmd.arity > 0 && len(args) != cmd.arity || cmd.arity < 0 && len(args) < -cmd.arity {
		return nil, "ERR wrong number of arguments for '" + cmd.name + "' command"
	}
	if st.tx.open && cmd.noMulti {
		return nil, "ERR Command not allowed inside a transaction"
	}
	return cmd, ""
}

// lower appends the ASCII lower case of b to dst; ok is false when b is
// too long to be a command name.
func lower(dst, b []byte) ([]byte, bool) {
	if len(b) > maxNameBytes {
		return dst, false
	}
	for _, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return dst, true
}

// printable quotes at most 32 bytes of a caller's command name for an
// error, with anything outside printable ASCII (and quotes) as '?'.
func printable(b []byte) string {
	if len(b) > maxNameBytes {
		b = b[:maxNameBytes]
	}
	out := make([]byte, len(b))
	for i, c := range b {
		if c < 0x20 || c > 0x7e || c == '\'' {
			c = '?'
		}
		out[i] = c
	}
	return string(out)
}

// writeError writes the reply for an error from the api checks or the
// Decider, with the same detail as HTTP and gRPC:
//
//	ERR <detail>          invalid input (HTTP 400)
//	NOTFOUND <detail>     unknown or expired lease (HTTP 404)
//	UNAVAILABLE <detail>  fail-closed limit, owner unreachable, deadline (HTTP 503 limiter_unavailable)
//	OVERLOADED <detail>   bucket cap reached (HTTP 503 limiter_overloaded)
//	ERR internal error    anything else, logged
func (s *Server) writeError(w *redcon.Writer, err error) {
	if e, ok := errors.AsType[*api.Error](err); ok {
		if p := errorPrefix(e.Code); p != "" {
			w.WriteError(p + " " + e.Detail)
			return
		}
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		w.WriteError("UNAVAILABLE deadline exceeded")
	case errors.Is(err, context.Canceled):
		w.WriteError("UNAVAILABLE request canceled")
	default:
		s.log.Error("resp: unexpected decider error", "err", err)
		w.WriteError("ERR internal error")
	}
}

// parseInt parses a decimal integer argument strictly (no spaces, no
// sign other than '-', no fraction).
func parseInt(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	return n, err == nil
}

// bool01 is a boolean as Redis integers carry one.
func bool01(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// writeMapHeader starts a map of n pairs: a RESP3 map, or in RESP2 the
// flat array of 2n elements Redis sends instead.
func writeMapHeader(w *redcon.Writer, st *session, n int) {
	if st.proto == 3 {
		w.WriteRaw([]byte("%" + strconv.Itoa(n) + "\r\n"))
		return
	}
	w.WriteArray(2 * n)
}

// writeNull writes the null of the session's protocol.
func writeNull(w *redcon.Writer, st *session) {
	if st.proto == 3 {
		w.WriteRaw([]byte("_\r\n"))
		return
	}
	w.WriteNull()
}

// errorPrefix is the reply prefix of an *api.Error's code, "" for a code
// with none of its own.
func errorPrefix(c api.Code) string {
	switch c {
	case api.CodeInvalid, api.CodeQuota:
		return "ERR"
	case api.CodeNotFound:
		return "NOTFOUND"
	case api.CodeUnavailable:
		return "UNAVAILABLE"
	case api.CodeOverloaded:
		return "OVERLOADED"
	case api.CodeUnauthenticated:
		return "NOAUTH"
	case api.CodeForbidden:
		return "NOPERM"
	}
	return ""
}
