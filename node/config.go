package node

import (
	"errors"
	"fmt"
	"time"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/bucket"
	"github.com/weir-rl/weir/lease"
)

// Config is everything one member needs. Only cmd reads flags and the
// environment; it fills a Config and calls Validate.
type Config struct {
	// NodeName names this member in the cluster and in logs. Default: the host name.
	NodeName string
	// HTTPAddr is the public HTTP listen address. Default ":8080"; "127.0.0.1:0" picks a free port.
	HTTPAddr string
	// GRPCAddr is the public gRPC listen address. Default ":8081".
	GRPCAddr string
	// LimitsPath is the limits file. Empty means the embedded default file.
	LimitsPath string
	// Store bounds the owner's live buckets (DESIGN §8).
	Store bucket.Config
	// FallbackStore bounds the buckets of local ceilings used when an owner is unreachable.
	FallbackStore bucket.Config
	// Leases bounds the lease table (leases and parked waiters).
	Leases lease.Config
	// HTTP configures the public HTTP handlers (legacy headers, body and key limits).
	HTTP api.HTTPConfig
	// SweepInterval is how often idle, fully refilled buckets are evicted. Default 10s; 0 disables.
	SweepInterval time.Duration
	// ShutdownTimeout bounds a graceful shutdown: in-flight requests get this long. Default 10s.
	ShutdownTimeout time.Duration
}

// DefaultConfig returns the production defaults of DESIGN §5 and §8.
func DefaultConfig() Config {
	fb := bucket.DefaultConfig()
	fb.MaxBuckets = 100_000
	return Config{
		NodeName:        "weir",
		HTTPAddr:        ":8080",
		GRPCAddr:        ":8081",
		Store:           bucket.DefaultConfig(),
		FallbackStore:   fb,
		Leases:          lease.DefaultConfig(),
		HTTP:            api.DefaultHTTPConfig(),
		SweepInterval:   10 * time.Second,
		ShutdownTimeout: 10 * time.Second,
	}
}

// LocalConfig returns a Config for tests: loopback listeners on free ports
// and small stores.
func LocalConfig() Config {
	c := DefaultConfig()
	c.HTTPAddr = "127.0.0.1:0"
	c.GRPCAddr = "127.0.0.1:0"
	c.Store.MaxBuckets = 10_000
	c.FallbackStore.MaxBuckets = 10_000
	c.Leases = lease.LocalConfig()
	c.ShutdownTimeout = 2 * time.Second
	return c
}

// Validate reports the first problem with c. It changes nothing.
func (c Config) Validate() error {
	var errs []error
	if c.NodeName == "" {
		errs = append(errs, errors.New("node: empty node name"))
	}
	if c.HTTPAddr == "" || c.GRPCAddr == "" {
		errs = append(errs, errors.New("node: http and grpc addresses are required"))
	}
	if err := c.Store.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("node: store: %w", err))
	}
	if err := c.FallbackStore.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("node: fallback store: %w", err))
	}
	if err := c.Leases.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("node: leases: %w", err))
	}
	if c.SweepInterval < 0 || c.ShutdownTimeout < 0 {
		errs = append(errs, errors.New("node: negative interval"))
	}
	return errors.Join(errs...)
}
