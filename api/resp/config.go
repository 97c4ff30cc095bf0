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
	// read buffer, one command's arguments and MaxPipeline answers.
	MaxRequestBytes int
	// MaxPipeline is how many pipelined commands are answered before the
	// answers are written out, bounding the output a connection buffers.
	// Default 1024.
	MaxPipeline int
	// IdleTimeout closes a connection that sends nothing for this long.
	// Default 0: never, as Redis does (clients keep pooled connections).
	IdleTimeout time.Duration
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

// DefaultConfig returns the defaults documented on each field.
func DefaultConfig() Config {
	return Config{
		MaxKeyBytes:     api.DefaultMaxKeyBytes,
		MaxChecks:       api.DefaultMaxChecks,
		MaxArgs:         512,
		MaxBulkBytes:    4096,
		MaxRequestBytes: 1 << 20,
		MaxPipeline:     1024,
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
	case c.IdleTimeout < 0 || c.WriteTimeout < 0:
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
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = d.WriteTimeout
	}
	if c.ThrottleLimit == "" {
		c.ThrottleLimit = d.ThrottleLimit
	}
	if c.Version == "" {
		c.Version = d.Version
	}
	return c
}
