package node

import (
	"errors"
	"fmt"
	"time"

	"github.com/weir-rl/weir/internal/tlsreload"
)

// Security configures what protects the node's public listeners: TLS,
// caller tokens, and the bounds that keep a hostile caller from exhausting
// the node. The zero value of each field means its default, except the
// file names (empty: off).
type Security struct {
	// TLS serves the public HTTP and gRPC APIs over TLS (1.2 or later)
	// from certificate files that reload when they change. Zero: plaintext.
	TLS tlsreload.Config
	// TokensFile names the caller tokens file (see package api/auth);
	// empty leaves the API open to anyone who can reach it, logged once at
	// start.
	TokensFile string
	// ProtectMetrics requires a token with the read scope for GET /metrics
	// when a tokens file is configured. Default false: /metrics is open.
	ProtectMetrics bool
	// PeerTLS names operator-supplied peer certificates. Empty (the
	// default): the peer channel's TLS credentials are derived from the
	// cluster secret.
	PeerTLS PeerTLSFiles
	// Limits bound connections, requests and streams.
	Limits ServerLimits
}

// PeerTLSFiles are operator-supplied peer credentials: every member
// presents CertFile/KeyFile (PEM) and accepts peers whose certificate
// chains to a CA in CAFile. All three or none.
type PeerTLSFiles struct {
	CertFile, KeyFile, CAFile string
}

// ServerLimits bound what one caller can hold of the public listeners. A
// zero field means its default (DefaultServerLimits).
type ServerLimits struct {
	// HTTPReadHeaderTimeout bounds reading a request's headers (slowloris
	// headers), and how long a new connection may stay silent. Default 5s.
	HTTPReadHeaderTimeout time.Duration
	// HTTPReadTimeout bounds reading a whole request, body included
	// (slowloris bodies). Default 15s.
	HTTPReadTimeout time.Duration
	// HTTPWriteTimeout bounds writing a response, from the end of the
	// request's headers. A lease acquire that waits in a queue gets its
	// wait on top. Default 30s.
	HTTPWriteTimeout time.Duration
	// HTTPIdleTimeout closes a keep-alive connection idle this long.
	// Default 2m.
	HTTPIdleTimeout time.Duration
	// HTTPMaxHeaderBytes bounds a request's headers; more is 431.
	// Default 64 KiB.
	HTTPMaxHeaderBytes int
	// MaxConns caps the open connections of each public listener (HTTP,
	// gRPC); connections past it wait in the kernel's accept queue until
	// one closes. Default 16384.
	MaxConns int
	// GRPCMaxConcurrentStreams caps concurrent streams (calls) on one
	// gRPC connection. Default 256.
	GRPCMaxConcurrentStreams uint32
	// GRPCMaxRecvBytes bounds one received gRPC message; larger is
	// ResourceExhausted before it is decoded. Default 256 KiB (a take of
	// 100 checks with 512-byte keys is about 105 KiB).
	GRPCMaxRecvBytes int
	// GRPCKeepaliveMinTime is the shortest interval between client pings
	// the server tolerates; a client pinging more often is disconnected
	// (GOAWAY "too_many_pings"). Default 10s.
	GRPCKeepaliveMinTime time.Duration
	// GRPCMaxConnectionIdle closes a gRPC connection without calls for
	// this long. Default 5m.
	GRPCMaxConnectionIdle time.Duration
}

// DefaultServerLimits returns the defaults documented on ServerLimits.
func DefaultServerLimits() ServerLimits {
	return ServerLimits{
		HTTPReadHeaderTimeout:    5 * time.Second,
		HTTPReadTimeout:          15 * time.Second,
		HTTPWriteTimeout:         30 * time.Second,
		HTTPIdleTimeout:          2 * time.Minute,
		HTTPMaxHeaderBytes:       64 << 10,
		MaxConns:                 16384,
		GRPCMaxConcurrentStreams: 256,
		GRPCMaxRecvBytes:         256 << 10,
		GRPCKeepaliveMinTime:     10 * time.Second,
		GRPCMaxConnectionIdle:    5 * time.Minute,
	}
}

// withDefaults replaces zero fields by their defaults.
func (l ServerLimits) withDefaults() ServerLimits {
	d := DefaultServerLimits()
	set := func(v *time.Duration, def time.Duration) {
		if *v == 0 {
			*v = def
		}
	}
	set(&l.HTTPReadHeaderTimeout, d.HTTPReadHeaderTimeout)
	set(&l.HTTPReadTimeout, d.HTTPReadTimeout)
	set(&l.HTTPWriteTimeout, d.HTTPWriteTimeout)
	set(&l.HTTPIdleTimeout, d.HTTPIdleTimeout)
	set(&l.GRPCKeepaliveMinTime, d.GRPCKeepaliveMinTime)
	set(&l.GRPCMaxConnectionIdle, d.GRPCMaxConnectionIdle)
	if l.HTTPMaxHeaderBytes == 0 {
		l.HTTPMaxHeaderBytes = d.HTTPMaxHeaderBytes
	}
	if l.MaxConns == 0 {
		l.MaxConns = d.MaxConns
	}
	if l.GRPCMaxConcurrentStreams == 0 {
		l.GRPCMaxConcurrentStreams = d.GRPCMaxConcurrentStreams
	}
	if l.GRPCMaxRecvBytes == 0 {
		l.GRPCMaxRecvBytes = d.GRPCMaxRecvBytes
	}
	return l
}

// Validate reports a negative bound or an incomplete file set. It changes
// nothing and reads no file.
func (s Security) Validate() error {
	var errs []error
	if err := s.TLS.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("node: %w", err))
	}
	if p := s.PeerTLS; (p.CertFile == "") != (p.KeyFile == "") || (p.CertFile == "") != (p.CAFile == "") {
		errs = append(errs, errors.New("node: peer TLS needs a certificate, a key and a CA file, or none"))
	}
	l := s.Limits
	if l.HTTPReadHeaderTimeout < 0 || l.HTTPReadTimeout < 0 || l.HTTPWriteTimeout < 0 || l.HTTPIdleTimeout < 0 ||
		l.GRPCKeepaliveMinTime < 0 || l.GRPCMaxConnectionIdle < 0 {
		errs = append(errs, errors.New("node: server timeouts must not be negative"))
	}
	if l.HTTPMaxHeaderBytes < 0 || l.MaxConns < 0 || l.GRPCMaxRecvBytes < 0 {
		errs = append(errs, errors.New("node: server size limits must not be negative"))
	}
	if l.GRPCMaxRecvBytes > 0 && l.GRPCMaxRecvBytes < 4<<10 {
		errs = append(errs, fmt.Errorf("node: gRPC receive limit %d bytes is below 4 KiB: no take would fit", l.GRPCMaxRecvBytes))
	}
	return errors.Join(errs...)
}
