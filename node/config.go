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
	"github.com/weir-rl/weir/api/rlqs"
	"github.com/weir-rl/weir/bucket"
	"github.com/weir-rl/weir/internal/dedup"
	"github.com/weir-rl/weir/internal/tracing"
	"github.com/weir-rl/weir/lease"
	"github.com/weir-rl/weir/node/cluster"
	"github.com/weir-rl/weir/ring"
	"github.com/weir-rl/weir/ring/gossip"
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
	// RLQS configures Envoy's rate limit quota service on the gRPC port
	// (package api/rlqs: the domain it accepts, its bounds). Its Now is
	// the node's clock and its MaxKeyBytes is HTTP.MaxKeyBytes, the one
	// key bound.
	RLQS rlqs.Config
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
	// SweepInterval is how often idle, fully refilled buckets are evicted
	// and expired request ids forgotten. Default 10s; 0 disables.
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
	// Ring configures membership; Name is set from NodeName, and Timing,
	// RebuildDebounce and RejoinInterval from Config.Timing.
	Ring gossip.Config
	// Forward configures forwarding to owners (batching window, size cap,
	// the 250ms forward deadline, 750ms while the ring settles).
	Forward transport.Config
	// Timing is the failure-detection and handover profile: memberlist's
	// timings, the ring's rebuild debounce and rejoin interval, the handoff
	// window and the takeover delay, which must agree with one another.
	// Default LANTiming(); LocalConfig uses LocalTiming().
	Timing Timing
	// Replication streams each owned key's changes to its successor.
	Replication cluster.ReplicationConfig
	// LeaveTimeout bounds each step of the graceful leave on shutdown: the
	// handoff, the leave's broadcast, the handoff of what arrived
	// meanwhile. The leave as a whole, after the in-flight requests, gets
	// 3×LeaveTimeout (Node.Shutdown). Default 5s.
	LeaveTimeout time.Duration
	// ShutdownTimeout bounds the first part of a graceful shutdown:
	// in-flight requests get this long. The handoff and the leave come
	// after, within their own bound (LeaveTimeout). Default 10s.
	ShutdownTimeout time.Duration
	// StateDir is a directory the node keeps its owner state in across a
	// restart (statefile.go): written on a graceful Shutdown, read and
	// removed on Start. Empty (the default) keeps nothing.
	StateDir string
	// TakeDedup bounds the owner's memory of takes' request ids, which
	// answers a caller's retry with the first decision (package
	// internal/dedup). Default a 10 s window over 65,536 ids; the zero
	// value means the default.
	TakeDedup dedup.Config
	// Tracing exports OpenTelemetry spans of decisions, forwards and owner
	// steps over OTLP/gRPC (package internal/tracing). The zero value (no
	// endpoint, the default) is off and costs nothing.
	Tracing tracing.Config
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
		RLQS:            rlqs.DefaultConfig(),
		SweepInterval:   10 * time.Second,
		ShutdownTimeout: 10 * time.Second,
		Clustered:       true,
		Ring:            gossip.DefaultConfig(),
		Forward:         transport.DefaultConfig(),
		Timing:          LANTiming(),
		LeaveTimeout:    5 * time.Second,
		TakeDedup:       dedup.DefaultConfig(),
		Replication:     cluster.DefaultReplicationConfig(),
	}
}

// Timing is a failure-detection and handover profile. The handoff window
// must exceed the time views take to converge after a change (the rebuild
// debounce plus gossip), and the takeover delay is floored by the ring's
// DetectionSpread (placement.Config), so the parts are set together.
// LANTiming is the production profile; LocalTiming starts from it, as
// memberlist builds DefaultLocalConfig from DefaultLANConfig.
type Timing struct {
	// Ring is memberlist's failure detection (ring.Timing).
	Ring ring.Timing
	// RebuildDebounce is the quiet period after a membership event before
	// the ring is rebuilt (gossip.Config.RebuildDebounce).
	RebuildDebounce time.Duration
	// RejoinInterval is the mean time between rejoin rounds
	// (gossip.Config.RejoinInterval).
	RejoinInterval time.Duration
	// HandoffWindow is how long after a view change a new owner pulls a
	// bucket it does not hold from the key's previous owner before
	// deciding it, and how long a node that handed a key over keeps
	// passing its requests on. Positive.
	HandoffWindow time.Duration
	// TakeoverDelay is how long the keys of a member that failed are served
	// from local ceilings before their new owner decides them, so that a
	// node which loses its peers one at a time never takes over keys in the
	// moment it wrongly believes itself a majority. The delay in force is
	// never below the ring's DetectionSpread for the known members (LAN
	// 22.5 s for 3, local 2.35 s), the span over which one member can
	// declare several simultaneous failures, and it runs from the latest of
	// failures detected less than it apart. Not negative.
	TakeoverDelay time.Duration
}

// LANTiming is the production profile: gossip.DefaultConfig's memberlist LAN
// timings, debounce (250 ms) and rejoin interval (10 s), a 5 s handoff
// window and a 4 s takeover delay.
func LANTiming() Timing {
	rc := gossip.DefaultConfig()
	return Timing{
		Ring: rc.Timing, RebuildDebounce: rc.RebuildDebounce, RejoinInterval: rc.RejoinInterval,
		HandoffWindow: 5 * time.Second, TakeoverDelay: 4 * time.Second,
	}
}

// LocalTiming is LANTiming made fast for one machine (tests, `weir serve
// --timing local`): gossip.LocalConfig's timings, debounce (50 ms) and rejoin
// interval (500 ms), a 2 s handoff window and a 1.2 s takeover delay. Too
// eager for a real network.
func LocalTiming() Timing {
	t := LANTiming()
	rc := gossip.LocalConfig()
	t.Ring, t.RebuildDebounce, t.RejoinInterval = rc.Timing, rc.RebuildDebounce, rc.RejoinInterval
	t.HandoffWindow = 2 * time.Second
	t.TakeoverDelay = 1200 * time.Millisecond
	return t
}

// Validate reports a bad field. It changes nothing.
func (t Timing) Validate() error {
	if t.HandoffWindow <= 0 || t.TakeoverDelay < 0 {
		return errors.New("node: handoff window must be positive and takeover delay not negative")
	}
	return t.Ring.Validate()
}

// ring returns c with t's parts applied.
func (t Timing) ring(c gossip.Config) gossip.Config {
	c.Timing, c.RebuildDebounce, c.RejoinInterval = t.Ring, t.RebuildDebounce, t.RejoinInterval
	return c
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
	c.Ring = gossip.LocalConfig()
	c.Forward = transport.DefaultConfig()
	c.Timing = LocalTiming()
	c.LeaveTimeout = 2 * time.Second
	return c
}

// leaveBound bounds Shutdown's part after the public drain: the handoff,
// the leave and the rest. 3×LeaveTimeout (the handoff, the leave's
// broadcast, the handoff of what arrived meanwhile); ShutdownTimeout when
// the node is not clustered and has no leave.
func (c Config) leaveBound() time.Duration {
	if !c.Clustered {
		return c.ShutdownTimeout
	}
	return 3 * c.LeaveTimeout
}

// ShutdownBound is the longest a graceful Node.Shutdown takes within its
// own bounds: ShutdownTimeout for the in-flight requests, then the
// handoff's and the leave's bound. A caller's context past it cuts
// nothing short.
func (c Config) ShutdownBound() time.Duration { return c.ShutdownTimeout + c.leaveBound() }

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
	if err := c.RLQS.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("node: rlqs: %w", err))
	}
	if err := c.Leases.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("node: leases: %w", err))
	}
	if err := c.Tracing.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("node: %w", err))
	}
	if c.Clustered {
		r := c.Timing.ring(c.Ring)
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
		if err := c.Timing.Validate(); err != nil {
			errs = append(errs, err)
		}
		if c.LeaveTimeout <= 0 {
			errs = append(errs, errors.New("node: leave timeout must be positive"))
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
