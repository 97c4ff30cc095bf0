package resp

import (
	"context"
	"runtime/debug"
	"strconv"

	"github.com/tidwall/redcon"
)

// transaction is a connection's MULTI state: the commands queued since
// MULTI, copied out of the reader's buffer. It holds at most
// Config.MaxPipeline commands and Config.MaxRequestBytes of their
// arguments; one more is refused and the transaction fails, so a
// connection in MULTI holds no more than those bounds. The zero value is
// no transaction. Only the connection's goroutine touches it.
type transaction struct {
	open   bool
	failed bool // a command was refused while queuing: EXEC aborts
	cmds   []queued
	bytes  int // argument bytes held by cmds
}

// queued is one command waiting for EXEC; args share one allocation.
type queued struct {
	cmd  *command
	args [][]byte
}

// refuse records that a command was refused: inside MULTI, the EXEC that
// follows aborts, as in Redis.
func (tx *transaction) refuse() {
	if tx.open {
		tx.failed = true
	}
}

// txCommands are MULTI, EXEC, DISCARD, WATCH and UNWATCH.
func (s *Server) txCommands() []*command {
	return []*command{
		{
			name: "multi", arity: 1, flags: []string{"noscript", "loading", "stale", "fast"}, group: "transactions", now: true,
			summary: "Starts queuing commands for EXEC; EXEC runs them in order, not atomically", run: s.multi,
		},
		{
			name: "exec", arity: 1, flags: []string{"noscript", "loading", "stale"}, group: "transactions", now: true,
			summary: "Runs the queued commands in order and answers each; another connection's commands may run between them", run: s.exec,
		},
		{
			name: "discard", arity: 1, flags: []string{"noscript", "loading", "stale", "fast"}, group: "transactions", now: true,
			summary: "Drops the queued commands", run: s.discard,
		},
		{
			name: "watch", arity: -2, flags: []string{"noscript", "loading", "stale", "fast"}, first: 1, last: -1, step: 1, group: "transactions", now: true,
			summary: "Not supported: Weir has no keyspace to watch", run: s.watch,
		},
		{
			name: "unwatch", arity: 1, flags: []string{"noscript", "loading", "stale", "fast"}, group: "transactions",
			summary: "Forgets watched keys; none can be watched, so it only answers OK", run: s.unwatch,
		},
	}
}

// multi serves MULTI: the commands that follow are queued, each answered
// +QUEUED, until EXEC or DISCARD.
func (s *Server) multi(_ context.Context, st *session, _ [][]byte, w *redcon.Writer) {
	if st.tx.open {
		w.WriteError("ERR MULTI calls can not be nested")
		return
	}
	st.tx = transaction{open: true}
	w.WriteString("OK")
}

// enqueue queues a command of an open transaction, copying its arguments,
// and answers +QUEUED; past the transaction's bounds it answers -ERR and
// the transaction fails.
func (s *Server) enqueue(st *session, cmd *command, args [][]byte, w *redcon.Writer) {
	size := 0
	for _, a := range args {
		size += len(a)
	}
	switch {
	case len(st.tx.cmds) >= s.cfg.MaxPipeline:
		st.tx.failed = true
		w.WriteError("ERR transaction holds " + strconv.Itoa(s.cfg.MaxPipeline) + " commands, the most it may queue")
		return
	case st.tx.bytes+size > s.cfg.MaxRequestBytes:
		st.tx.failed = true
		w.WriteError("ERR transaction's queued arguments would exceed " + strconv.Itoa(s.cfg.MaxRequestBytes) + " bytes")
		return
	}
	buf := make([]byte, 0, size)
	cp := make([][]byte, len(args))
	for i, a := range args {
		buf = append(buf, a...)
		cp[i] = buf[len(buf)-len(a) : len(buf) : len(buf)]
	}
	st.tx.cmds = append(st.tx.cmds, queued{cmd: cmd, args: cp})
	st.tx.bytes += size
	w.WriteString("QUEUED")
}

// exec serves EXEC: the queued commands run in order, their answers in
// one array. It is not atomic: each command decides on its own, as if
// sent alone, and other connections' commands may run between them (a
// denial does not undo the takes before it; WEIR.MTAKE is the
// all-or-nothing take). A transaction with a refused command answers
// -EXECABORT and runs nothing.
func (s *Server) exec(ctx context.Context, st *session, _ [][]byte, w *redcon.Writer) {
	tx := st.tx
	st.tx = transaction{}
	switch {
	case !tx.open:
		w.WriteError("ERR EXEC without MULTI")
		return
	case tx.failed:
		w.WriteError("EXECABORT Transaction discarded because of previous errors.")
		return
	}
	w.WriteArray(len(tx.cmds))
	for _, q := range tx.cmds {
		s.runQueued(ctx, st, q, w)
	}
}

// runQueued runs one command of an EXEC, turning a panic into its own
// -ERR internal error so the array keeps one answer per command. ctx is
// EXEC's, already carrying the connection's caller.
func (s *Server) runQueued(ctx context.Context, st *session, q queued, w *redcon.Writer) {
	defer func() {
		if v := recover(); v != nil {
			s.log.Error("resp: panic serving a queued command", "panic", v, "stack", string(debug.Stack()))
			w.WriteError("ERR internal error")
		}
	}()
	q.cmd.run(ctx, st, q.args, w)
}

// discard serves DISCARD: the queued commands are dropped.
func (s *Server) discard(_ context.Context, st *session, _ [][]byte, w *redcon.Writer) {
	if !st.tx.open {
		w.WriteError("ERR DISCARD without MULTI")
		return
	}
	st.tx = transaction{}
	w.WriteString("OK")
}

// watch serves WATCH, which Weir cannot honour: buckets are not keys a
// client reads and writes, and nothing else may change between a read and
// an EXEC. It answers an error and leaves any transaction as it was.
func (s *Server) watch(_ context.Context, st *session, _ [][]byte, w *redcon.Writer) {
	if st.tx.open {
		w.WriteError("ERR WATCH inside MULTI is not allowed")
		return
	}
	w.WriteError("ERR WATCH is not supported: Weir has no keyspace to watch (WEIR.MTAKE takes several buckets all or nothing)")
}

// unwatch serves UNWATCH: nothing is ever watched, so it only answers OK.
func (s *Server) unwatch(_ context.Context, _ *session, _ [][]byte, w *redcon.Writer) {
	w.WriteString("OK")
}
