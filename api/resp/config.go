package resp

import (
	"context"
	"crypto/tls"
	"errors"
	"time"

	"github.com/weir-rl/weir/api"
)

// Config configures the RESP server. Start from DefaultConfig; a zero
// numeric field means its default. Validate reports negative values.
type Config struct {
	// MaxKeyBytes bounds a key, a limit name and a lease holder, in bytes,
	// as in httpapi.Config. Default 512 (api.DefaultMaxKeyBytes).
	MaxKeyBytes int
	// MaxChecks bounds the checks of one WEIR.MTAKE. Default 100.
	MaxChecks int
	// MaxArgs bounds the arguments of one command, its name included. A
	// longer command is a protocol error: the connection gets -ERR
	// Protocol error: ... and is closed, since the rest of the command
	// cannot be skipped safely. Default 512 (a WEIR.MTAKE of 100 checks
	// has 301).
	MaxArgs int
	// MaxBulkBytes bounds one argument, in bytes; a longer one is a
	// protocol error. Default 4096 (lease ids are at most 2048).
	MaxBulkBytes int
	// MaxRequestBytes bounds the arguments of one command together, in
	// bytes; more is a protocol error. Default 1 MiB, like
	// httpapi.Config.MaxBodyBytes. A connection holds at most its 16 KiB
	// read buffer, one command's arguments and MaxPipeline answers. Before
	// a connection has authenticated (Authenticate set), a command may have
	// at most PreAuthMaxArgs arguments and PreAuthMaxBytes bytes, whatever
	// MaxArgs and MaxRequestBytes say.
	MaxRequestBytes int
	// MaxPipeline is how many pipelined commands are answered before the
	// answers are written out, bounding the output a connection buffers.
	// Default 1024.
	MaxPipeline int
	// IdleTimeout closes a connection that sends nothing for this long
	// between commands. Default 5m. Redis's default is never; Weir closes
	// idle connections so that silent ones cannot hold the listener's
	// connection cap. Pooled clients notice the close and redial (go-redis
	// checks a pooled connection before reusing it).
	IdleTimeout time.Duration
	// AuthTimeout closes a connection that has not authenticated this long
	// after it was accepted, whatever it sent meanwhile (PING included),
	// when Authenticate is set. Default 10s.
	AuthTimeout time.Duration
	// CommandTimeout bounds reading one command: once its first byte has
	// arrived, the whole command must arrive within CommandTimeout or the
	// connection is closed, so a half-sent command cannot hold its
	// buffers. Default 10s.
	CommandTimeout time.Duration
	// WriteTimeout closes a connection whose answers cannot be written (a
	// client that never reads): a write that blocks is cut off after
	// between half of WriteTimeout and all of it (the deadline is moved
	// only when half of it is used up). Default 10s.
	WriteTimeout time.Duration
	// TLS, when not nil, makes the server speak TLS on every connection it
	// accepts, with this configuration (certificates, client CAs). A
	// handshake must finish within 10 s.
	TLS *tls.Config
	// Authenticate, when not nil, makes every command except AUTH, HELLO,
	// QUIT and PING answer -NOAUTH until the connection authenticated with
	// AUTH [username] password or HELLO ... AUTH username password. It is
	// called with the credentials as sent ("default" when AUTH names no
	// user) and returns what the connection acts as, kept for its lifetime,
	// or an error, sent as -WRONGPASS with its text. Nil: no AUTH needed
	// (AUTH then answers as Redis does with no password set).
	Authenticate func(ctx context.Context, username, password string) (any, error)
	// Context, when not nil, derives the context every command of an
	// authenticated connection runs under from what Authenticate returned,
	// so the Decider learns who asks (the node puts the caller's token
	// there and authorizes each check with it). Nil: commands run under
	// the connection's context.
	Context func(ctx context.Context, principal any) context.Context
	// ThrottleLimit is the limit name CL.THROTTLE's inline limits take:
	// every CL.THROTTLE bucket is (ThrottleLimit, key), so its parameters
	// may change between calls as redis-cell allows. Default "cl.throttle";
	// the limits file must not define it.
	ThrottleLimit string
	// Version is what HELLO reports as the server version. Default "0".
	Version string
}

// The bounds of a command sent before the connection authenticated: enough
// for HELLO 3 AUTH user password SETNAME name with MaxBulkBytes-long
// arguments, so an unauthenticated connection holds at most its read buffer
// and PreAuthMaxBytes, and only for AuthTimeout.
const (
	// PreAuthMaxArgs bounds the arguments of a command read before AUTH.
	PreAuthMaxArgs = 8
	// PreAuthMaxBytes bounds the bytes of a command read before AUTH.
	PreAuthMaxBytes = 16 << 10
)

// DefaultConfig returns the defaults documented on each field.
func DefaultConfig() Config {
	return Config{
		MaxKeyBytes:     api.DefaultMaxKeyBytes,
		MaxChecks:       api.DefaultMaxChecks,
		MaxArgs:         512,
		MaxBulkBytes:    4096,
		MaxRequestBytes: 1 << 20,
		MaxPipeline:     1024,
		IdleTimeout:     5 * time.Minute,
		AuthTimeout:     10 * time.Second,
		CommandTimeout:  10 * time.Second,
		WriteTimeout:    10 * time.Second,
		ThrottleLimit:   "cl.throttle",
		Version:         "0",
	}
}

// Validate reports a negative bound. It changes nothing.
func (c Config) Validate() error {
	switch {
	case c.MaxKeyBytes < 0, c.MaxChecks < 0, c.MaxArgs < 0, c.MaxBulkBytes < 0,
		c.MaxRequestBytes < 0, c.MaxPipeline < 0:
		return errors.New("resp: Config bounds must not be negative")
	case c.IdleTimeout < 0 || c.WriteTimeout < 0 || c.AuthTimeout < 0 || c.CommandTimeout < 0:
		return errors.New("resp: Config timeouts must not be negative")
	}
	return nil
}

// withDefaults replaces zero bounds by the defaults.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	set := func(v *int, def int) {
		if *v <= 0 {
			*v = def
		}
	}
	set(&c.MaxKeyBytes, d.MaxKeyBytes)
	set(&c.MaxChecks, d.MaxChecks)
	set(&c.MaxArgs, d.MaxArgs)
	set(&c.MaxBulkBytes, d.MaxBulkBytes)
	set(&c.MaxRequestBytes, d.MaxRequestBytes)
	set(&c.MaxPipeline, d.MaxPipeline)
	for _, t := range []struct{ v, def *time.Duration }{
		{&c.WriteTimeout, &d.WriteTimeout},
		{&c.IdleTimeout, &d.IdleTimeout},
		{&c.AuthTimeout, &d.AuthTimeout},
		{&c.CommandTimeout, &d.CommandTimeout},
	} {
		if *t.v <= 0 {
			*t.v = *t.def
		}
	}
	if c.ThrottleLimit == "" {
		c.ThrottleLimit = d.ThrottleLimit
	}
	if c.Version == "" {
		c.Version = d.Version
	}
	return c
}
