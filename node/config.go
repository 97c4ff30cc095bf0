package node

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/weir-rl/weir/api/envoyrls"
	"github.com/weir-rl/weir/api/httpapi"
	"github.com/weir-rl/weir/api/resp"
	"github.com/weir-rl/weir/bucket"
	"github.com/weir-rl/weir/internal/dedup"
	"github.com/weir-rl/weir/lease"
	"github.com/weir-rl/weir/ring"
	"github.com/weir-rl/weir/transport"
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
	// RESPAddr is the listen address of the Redis-protocol endpoint
	// (package api/resp). Default "": off. Port 6379 is Redis's own; pick
	// another when a Redis runs on the same host.
	RESPAddr string
	// RESP configures the Redis-protocol endpoint (per-connection bounds,
	// timeouts, the CL.THROTTLE limit name).
	RESP resp.Config
	// LimitsPath is the limits file. Empty means the embedded default file.
	LimitsPath string
	// Store bounds the owner's live buckets (docs/architecture.md §8.3).
	Store bucket.Config
	// FallbackStore bounds the buckets of local ceilings used when an owner is unreachable.
	FallbackStore bucket.Config
	// Leases bounds the lease table (leases and parked waiters).
	Leases lease.Config
	// Envoy configures Envoy's rate limit service on the gRPC port (the
	// domain it accepts; "" accepts any). Its Rules and Now are set by the
	// node, and its MaxKeyBytes is replaced by HTTP.MaxKeyBytes, the one
	// key bound.
	Envoy envoyrls.Config
	// EnvoyConfigDir is a directory of envoyproxy/ratelimit configuration
	// files (*.yaml, *.yml; package envoyconf), watched and reloaded like
	// the limits file. With it, Envoy's rate limit service decides by those
	// rules; empty (the default) keeps the generic_key mapping. Every node
	// of a cluster must load the same files.
	EnvoyConfigDir string
	// HTTP configures the public HTTP handlers (legacy headers, body and
	// key limits). Its MaxKeyBytes (default 512; 0 means the default) is
	// the key bound of every surface: HTTP, gRPC, Envoy and peers' forwards
	// are all checked against it by the engine.
	HTTP httpapi.Config
	// SweepInterval is how often idle, fully refilled buckets are evicted. Default 10s; 0 disables.
	SweepInterval time.Duration
	// Clustered turns on gossip and the peer service. Off, the node is a
	// cluster of one with no gossip port (tests of the single-node API).
	Clustered bool
	// PeerAddr is the listen address of the peer gRPC service that owners
	// are forwarded to. Empty (the default) means the gossip bind address
	// with the gossip port + 1 (":7947" for the default gossip port 7946;
	// port 0, a free one, when the gossip port is 0), so nodes on one host
	// need distinct gossip addresses only. See PeerListenAddr.
	PeerAddr string
	// PeerAdvertise is the peer address other members dial; "" uses the
	// gossip advertise address (or the bound address) with PeerAddr's port.
	PeerAdvertise string
	// ClusterSecretFile holds the cluster secret: any passphrase, whitespace
	// trimmed. Gossip encryption and peer authentication keys are derived
	// from it. Empty: no secret (gossip in clear, peer calls unauthenticated).
	ClusterSecretFile string
	// Security configures TLS, caller tokens and server bounds.
	Security Security
	// Ring configures membership; Name is set from NodeName.
	Ring ring.Config
	// Forward configures forwarding to owners (batching window, size cap,
	// the 50ms forward deadline).
	Forward transport.Config
	// HandoffWindow is how long after a view change a new owner pulls a
	// bucket it does not hold from the key's previous owner before deciding
	// it, and how long a node that handed a key over keeps passing its
	// requests on. Default 5s; it must exceed the time views take to
	// converge after a change (RebuildDebounce plus gossip).
	HandoffWindow time.Duration
	// TakeoverDelay is how long the keys of a member that failed are served
	// from local ceilings before their new owner decides them, so that a
	// node which loses its peers one at a time never takes over keys in the
	// moment it wrongly believes itself a majority. Default 4s; LocalConfig
	// 1.2s. The delay in force is never below the ring's DetectionSpread
	// for the known members (LAN 22.5 s for 3, local 2.35 s), the span over
	// which one member can declare several simultaneous failures, and it
	// runs from the latest of failures detected less than it apart.
	TakeoverDelay time.Duration
	// Replication streams each owned key's changes to its successor.
	Replication ReplicationConfig
	// LeaveTimeout bounds the graceful leave on shutdown. Default 5s.
	LeaveTimeout time.Duration
	// ShutdownTimeout bounds a graceful shutdown: in-flight requests get this long. Default 10s.
	ShutdownTimeout time.Duration
	// TakeDedup bounds the owner's memory of takes' request ids, which
	// answers a caller's retry with the first decision (package
	// internal/dedup). Default a 10 s window over 65,536 ids; the zero
	// value means the default.
	TakeDedup dedup.Config
}

// DefaultConfig returns the production defaults of docs/architecture.md §5 and §8.
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
		HTTP:            httpapi.DefaultConfig(),
		RESP:            resp.DefaultConfig(),
		Envoy:           envoyrls.DefaultConfig(),
		SweepInterval:   10 * time.Second,
		ShutdownTimeout: 10 * time.Second,
		Clustered:       true,
		Ring:            ring.DefaultConfig(),
		Forward:         transport.DefaultConfig(),
		HandoffWindow:   5 * time.Second,
		TakeoverDelay:   4 * time.Second,
		LeaveTimeout:    5 * time.Second,
		TakeDedup:       dedup.DefaultConfig(),
		Replication:     DefaultReplicationConfig(),
	}
}

// ReplicationConfig configures the stream of each owner's changes to the
// successors of its keys (docs/placement-and-replication.md).
type ReplicationConfig struct {
	// Enabled turns the stream on. Default true; off (--replication=false)
	// a crashed owner's debits are lost (+B per crash), kept to measure
	// what replication costs.
	Enabled bool
	// Interval is how often changed keys are sent. Default 20ms, in
	// (0, 1s]: a crash loses at most the debits of one interval.
	Interval time.Duration
	// MaxBatch sends a batch before the interval ends once this many keys
	// changed. Default 1024, at least 1.
	MaxBatch int
	// MaxReplicaKeys bounds the replica state this node keeps for its
	// peers: bucket replicas, and lease keys, each. Default 1,000,000, at
	// least 1. Past it the least recently used replica bucket is evicted
	// (that key takes over from a full bucket after a crash) and new lease
	// keys are not kept (their takeover grants only a share).
	MaxReplicaKeys int
}

// DefaultReplicationConfig returns the defaults: on, every 20ms.
func DefaultReplicationConfig() ReplicationConfig {
	return ReplicationConfig{Enabled: true, Interval: 20 * time.Millisecond, MaxBatch: 1024, MaxReplicaKeys: 1_000_000}
}

// heartbeat is how often an owner with nothing to send still tells the
// successors that its stream is alive.
func (c ReplicationConfig) heartbeat() time.Duration { return max(10*c.Interval, 100*time.Millisecond) }

// Validate reports a bad field. It changes nothing.
func (c ReplicationConfig) Validate() error {
	if !c.Enabled {
		return nil
	}
	switch {
	case c.Interval <= 0 || c.Interval > time.Second:
		return errors.New("node: replication interval must be in (0, 1s]")
	case c.MaxBatch < 1 || c.MaxReplicaKeys < 1:
		return errors.New("node: replication batch and replica bounds must be at least 1")
	}
	return nil
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
	c.Clustered = false
	c.PeerAddr = "127.0.0.1:0"
	c.Ring = ring.LocalConfig()
	c.Forward = transport.DefaultConfig()
	c.HandoffWindow = 2 * time.Second
	c.TakeoverDelay = 1200 * time.Millisecond
	c.LeaveTimeout = 2 * time.Second
	return c
}

// maxKeyBytes is the key bound in force: HTTP.MaxKeyBytes, or its
// default when zero.
func (c Config) maxKeyBytes() int {
	if c.HTTP.MaxKeyBytes > 0 {
		return c.HTTP.MaxKeyBytes
	}
	return httpapi.DefaultConfig().MaxKeyBytes
}

// PeerListenAddr returns the address the peer service listens on:
// PeerAddr, or when it is empty the gossip bind address with the gossip
// port + 1 (port 0 stays 0).
func (c Config) PeerListenAddr() string {
	if c.PeerAddr != "" {
		return c.PeerAddr
	}
	port := 0
	if c.Ring.BindPort > 0 {
		port = c.Ring.BindPort + 1
	}
	host := c.Ring.BindAddr
	if host == "0.0.0.0" || host == "::" {
		host = ""
	}
	return net.JoinHostPort(host, strconv.Itoa(port))
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
	if err := c.HTTP.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("node: http: %w", err))
	}
	if err := c.RESP.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("node: resp: %w", err))
	}
	if err := c.Envoy.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("node: envoy: %w", err))
	}
	if err := c.Leases.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("node: leases: %w", err))
	}
	if c.Clustered {
		r := c.Ring
		r.Name = c.NodeName
		if err := r.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("node: ring: %w", err))
		}
		if err := c.Forward.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("node: forward: %w", err))
		}
		if err := c.Replication.Validate(); err != nil {
			errs = append(errs, err)
		}
		if c.PeerAddr == "" && c.Ring.BindPort >= 65535 {
			errs = append(errs, fmt.Errorf("node: gossip port %d leaves no port + 1 for the peer service: set the peer address", c.Ring.BindPort))
		}
		if c.HandoffWindow <= 0 || c.LeaveTimeout <= 0 || c.TakeoverDelay < 0 {
			errs = append(errs, errors.New("node: handoff window and leave timeout must be positive"))
		}
	}
	if c.TakeDedup != (dedup.Config{}) {
		if err := c.TakeDedup.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("node: take dedup: %w", err))
		}
	}
	if err := c.Security.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.SweepInterval < 0 || c.ShutdownTimeout < 0 {
		errs = append(errs, errors.New("node: negative interval"))
	}
	return errors.Join(errs...)
}
