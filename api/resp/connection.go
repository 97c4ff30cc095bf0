package resp

import (
	"context"
	"slices"
	"strings"

	"github.com/tidwall/redcon"
)

// ping serves PING [message].
func (s *Server) ping(_ context.Context, _ *session, args [][]byte, w *redcon.Writer) {
	switch len(args) {
	case 1:
		w.WriteString("PONG")
	case 2:
		w.WriteBulk(args[1])
	default:
		w.WriteError("ERR wrong number of arguments for 'ping' command")
	}
}

// echo serves ECHO message.
func (s *Server) echo(_ context.Context, _ *session, args [][]byte, w *redcon.Writer) {
	w.WriteBulk(args[1])
}

// hello serves HELLO [protover [AUTH username password] [SETNAME name]]:
// it switches the connection to RESP2 or RESP3 and answers the server's
// description as a map (RESP3) or a flat array (RESP2).
func (s *Server) hello(ctx context.Context, st *session, args [][]byte, w *redcon.Writer) {
	proto := st.proto
	if len(args) >= 2 {
		n, ok := parseInt(args[1])
		if !ok {
			w.WriteError("ERR Protocol version is not an integer or out of range")
			return
		}
		if n != 2 && n != 3 {
			w.WriteError("NOPROTO unsupported protocol version")
			return
		}
		proto = int(n)
	}
	var name string
	var setName bool
	for rest := args[min(2, len(args)):]; len(rest) > 0; {
		switch strings.ToLower(string(rest[0])) {
		case "auth":
			if len(rest) < 3 {
				w.WriteError("ERR Syntax error in HELLO option 'auth'")
				return
			}
			if !s.authenticate(ctx, st, string(rest[1]), string(rest[2]), w) {
				return
			}
			rest = rest[3:]
		case "setname":
			if len(rest) < 2 {
				w.WriteError("ERR Syntax error in HELLO option 'setname'")
				return
			}
			if !validClientName(rest[1]) {
				w.WriteError("ERR Client names cannot contain spaces, newlines or special characters.")
				return
			}
			name, setName = string(rest[1]), true
			rest = rest[2:]
		default:
			w.WriteError("ERR Syntax error in HELLO option '" + printable(rest[0]) + "'")
			return
		}
	}
	if !st.authed {
		w.WriteError("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time")
		return
	}
	st.proto = proto
	if setName {
		st.name = name
	}
	writeMapHeader(w, st, 7)
	w.WriteBulkString("server")
	w.WriteBulkString("weir")
	w.WriteBulkString("version")
	w.WriteBulkString(s.cfg.Version)
	w.WriteBulkString("proto")
	w.WriteInt(st.proto)
	w.WriteBulkString("id")
	w.WriteInt64(st.id)
	w.WriteBulkString("mode")
	w.WriteBulkString("standalone")
	w.WriteBulkString("role")
	w.WriteBulkString("master")
	w.WriteBulkString("modules")
	w.WriteArray(0)
}

// auth serves AUTH [username] password.
func (s *Server) auth(ctx context.Context, st *session, args [][]byte, w *redcon.Writer) {
	if len(args) > 3 {
		w.WriteError("ERR syntax error")
		return
	}
	if s.cfg.Authenticate == nil && len(args) == 2 {
		w.WriteError("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?")
		return
	}
	user, pass := "default", string(args[1])
	if len(args) == 3 {
		user, pass = string(args[1]), string(args[2])
	}
	if s.authenticate(ctx, st, user, pass, w) {
		w.WriteString("OK")
	}
}

// authenticate checks credentials with Config.Authenticate and marks the
// session authenticated; on failure it writes the error reply. Without an
// Authenticate hook every connection is already authenticated, and only
// the user "default" exists, as in a Redis without passwords.
func (s *Server) authenticate(ctx context.Context, st *session, user, pass string, w *redcon.Writer) bool {
	if s.cfg.Authenticate == nil {
		if user != "default" {
			w.WriteError("WRONGPASS invalid username-password pair or user is disabled.")
			return false
		}
		return true
	}
	p, err := s.cfg.Authenticate(ctx, user, pass)
	if err != nil {
		w.WriteError("WRONGPASS " + err.Error())
		return false
	}
	st.authed, st.principal = true, p
	return true
}

// client serves CLIENT SETNAME, GETNAME, SETINFO and ID.
func (s *Server) client(_ context.Context, st *session, args [][]byte, w *redcon.Writer) {
	sub := strings.ToLower(string(args[1]))
	switch {
	case sub == "setname" && len(args) == 3:
		if !validClientName(args[2]) {
			w.WriteError("ERR Client names cannot contain spaces, newlines or special characters.")
			return
		}
		st.name = string(args[2])
		w.WriteString("OK")
	case sub == "getname" && len(args) == 2:
		if st.name == "" {
			writeNull(w, st)
			return
		}
		w.WriteBulkString(st.name)
	case sub == "setinfo" && len(args) == 4:
		attr := strings.ToLower(string(args[2]))
		if attr != "lib-name" && attr != "lib-ver" {
			w.WriteError("ERR Unrecognized option '" + printable(args[2]) + "'")
			return
		}
		if !validClientName(args[3]) {
			w.WriteError("ERR " + attr + " cannot contain spaces, newlines or special characters.")
			return
		}
		w.WriteString("OK")
	case sub == "id" && len(args) == 2:
		w.WriteInt64(st.id)
	case slices.Contains([]string{"setname", "getname", "setinfo", "id"}, sub):
		w.WriteError("ERR wrong number of arguments for 'client|" + sub + "' command")
	default:
		w.WriteError("ERR unknown subcommand '" + printable(args[1]) + "'. Try CLIENT HELP.")
	}
}

// validClientName reports whether b may name a client: printable ASCII
// without spaces, as Redis requires.
func validClientName(b []byte) bool {
	for _, c := range b {
		if c <= ' ' || c > '~' {
			return false
		}
	}
	return true
}

// selectDB serves SELECT 0; Weir has no other database.
func (s *Server) selectDB(_ context.Context, _ *session, args [][]byte, w *redcon.Writer) {
	if string(args[1]) != "0" {
		w.WriteError("ERR DB index is out of range")
		return
	}
	w.WriteString("OK")
}

// quit serves QUIT: OK, then the connection closes.
func (s *Server) quit(_ context.Context, st *session, _ [][]byte, w *redcon.Writer) {
	w.WriteString("OK")
	st.quit = true
}

// command serves COMMAND, COMMAND COUNT, COMMAND INFO name..., COMMAND
// DOCS [name...] and COMMAND LIST, in Redis 7's formats.
func (s *Server) command(_ context.Context, st *session, args [][]byte, w *redcon.Writer) {
	if len(args) == 1 {
		w.WriteArray(len(s.order))
		for _, c := range s.order {
			writeCommandInfo(w, c)
		}
		return
	}
	switch sub := strings.ToLower(string(args[1])); sub {
	case "count":
		w.WriteInt(len(s.order))
	case "list":
		w.WriteArray(len(s.order))
		for _, c := range s.order {
			w.WriteBulkString(c.name)
		}
	case "info":
		w.WriteArray(len(args) - 2)
		for _, a := range args[2:] {
			if c := s.lookup(a); c != nil {
				writeCommandInfo(w, c)
			} else {
				writeNull(w, st)
			}
		}
	case "docs":
		var cs []*command
		if len(args) == 2 {
			cs = s.order
		} else {
			for _, a := range args[2:] {
				if c := s.lookup(a); c != nil {
					cs = append(cs, c)
				}
			}
		}
		writeMapHeader(w, st, len(cs))
		for _, c := range cs {
			w.WriteBulkString(c.name)
			writeMapHeader(w, st, 3)
			w.WriteBulkString("summary")
			w.WriteBulkString(c.summary)
			w.WriteBulkString("since")
			w.WriteBulkString("1.0.0")
			w.WriteBulkString("group")
			w.WriteBulkString(c.group)
		}
	default:
		w.WriteError("ERR unknown subcommand '" + printable(args[1]) + "'. Try COMMAND HELP.")
	}
}

// lookup finds a command by name, in any case.
func (s *Server) lookup(name []byte) *command {
	var buf [maxNameBytes]byte
	n, ok := lower(buf[:0], name)
	if !ok {
		return nil
	}
	return s.cmds[string(n)]
}

// writeCommandInfo writes one command in COMMAND's 10-element Redis 7
// form: name, arity, flags, first key, last key, key step, ACL
// categories, tips, key specifications, subcommands.
func writeCommandInfo(w *redcon.Writer, c *command) {
	w.WriteArray(10)
	w.WriteBulkString(c.name)
	w.WriteInt(c.arity)
	w.WriteArray(len(c.flags))
	for _, f := range c.flags {
		w.WriteString(f)
	}
	w.WriteInt(c.first)
	w.WriteInt(c.last)
	w.WriteInt(c.step)
	w.WriteArray(1)
	w.WriteString("@" + c.group)
	w.WriteArray(0)
	w.WriteArray(0)
	w.WriteArray(0)
}
