package gossip

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/weir-rl/weir/ring"
)

// Config configures a Membership. Start from DefaultConfig or LocalConfig,
// set Name (and usually Join), and call Validate.
type Config struct {
	// Name is this member's unique name in the cluster. Required.
	Name string
	// BindAddr is the IP address gossip listens on (UDP and TCP). Default
	// "0.0.0.0". Ignored when Transport is set.
	BindAddr string
	// BindPort is the gossip port; 0 picks a free one (tests). Default 7946.
	// Ignored when Transport is set; also the port assumed for a Join entry
	// without one.
	BindPort int
	// AdvertiseAddr is the IP address other members use to reach this one;
	// "" lets memberlist pick (BindAddr, or a private address when binding
	// 0.0.0.0). Default "".
	AdvertiseAddr string
	// AdvertisePort is the advertised gossip port; 0 means BindPort.
	AdvertisePort int
	// Join lists seeds: "host:port", "host" (BindPort) or a DNS name that
	// resolves to several members. Names are re-resolved on every rejoin
	// attempt. Empty: a cluster of one until someone joins this member.
	Join []string
	// GossipKey encrypts and authenticates gossip (AES-GCM, memberlist's
	// keyring). The caller derives it from the cluster secret: 32 bytes
	// (16 and 24 are accepted). nil: plaintext. Members with different keys
	// cannot join each other.
	GossipKey []byte
	// Timing holds memberlist's failure-detection timings (ring.LANTiming,
	// ring.LocalTiming).
	Timing ring.Timing
	// ForgetAfter is how long a failed (dead) member stays known, and so
	// keeps its share of the ring on a minority side and its weight in the
	// majority rule, before it is forgotten. Default 10m. Must be positive.
	ForgetAfter time.Duration
	// RebuildDebounce is the quiet period after a membership event before
	// the ring is rebuilt, so a burst of events (a flapping member, a
	// merge) moves ownership once; a steady stream of events delays a
	// rebuild by at most 4 × RebuildDebounce. 0 rebuilds on every event.
	// Default 250ms, local 50ms.
	RebuildDebounce time.Duration
	// RejoinInterval is the mean time between rejoin rounds (jittered
	// ±25%; a quarter of it while this member is alone or not yet joined).
	// Each round joins the seeds that are not live members and the known
	// failed members, which heals partitions that outlive
	// Timing.GossipToTheDeadTime. Default 10s, local 500ms.
	RejoinInterval time.Duration
	// Transport carries gossip; nil uses memberlist's UDP/TCP transport on
	// BindAddr:BindPort. Tests pass a simnet transport.
	Transport memberlist.Transport
	// Logger receives membership and memberlist logs; nil discards them.
	// Packets and streams that fail to decrypt are logged at most once per
	// 10 s, with the number suppressed since.
	Logger *slog.Logger
	// KeyHint names, for an operator, where the gossip key comes from
	// (the node: its --cluster-secret-file flag). A member that has never
	// joined and whose every join fails logs a warning naming it as the
	// likely cause, at most every 10 s. "" says "the gossip key".
	KeyHint string
	// OnDecryptFailure, when not nil, is called once for every gossip
	// packet or stream that failed to decrypt (its sender lacks GossipKey),
	// logged or not; the node counts weir_gossip_decrypt_failures_total.
	// It must not block.
	OnDecryptFailure func()
}

// keyHint is KeyHint, or "the gossip key" when unset.
func (c Config) keyHint() string {
	if c.KeyHint == "" {
		return "the gossip key"
	}
	return c.KeyHint
}

// DefaultConfig returns the production defaults: gossip on 0.0.0.0:7946
// with ring.LANTiming, ForgetAfter 10m, RebuildDebounce 250ms,
// RejoinInterval 10s. Name must still be set.
func DefaultConfig() Config {
	return Config{
		BindAddr:        "0.0.0.0",
		BindPort:        7946,
		Timing:          ring.LANTiming(),
		ForgetAfter:     10 * time.Minute,
		RebuildDebounce: 250 * time.Millisecond,
		RejoinInterval:  10 * time.Second,
	}
}

// LocalConfig returns a fast profile for tests: DefaultConfig with gossip
// on 127.0.0.1 and a free port, ring.LocalTiming, RebuildDebounce 50ms and
// RejoinInterval 500ms (ForgetAfter stays 10m). Name must still be set.
func LocalConfig() Config {
	c := DefaultConfig()
	c.BindAddr = "127.0.0.1"
	c.BindPort = 0
	c.Timing = ring.LocalTiming()
	c.RebuildDebounce = 50 * time.Millisecond
	c.RejoinInterval = 500 * time.Millisecond
	return c
}

// Validate reports the first bad field; it changes nothing.
func (c Config) Validate() error {
	switch {
	case c.Name == "":
		return errors.New("gossip: Config.Name is required")
	case c.BindPort < 0 || c.BindPort > 65535:
		return fmt.Errorf("gossip: Config.BindPort %d out of range", c.BindPort)
	case c.AdvertisePort < 0 || c.AdvertisePort > 65535:
		return fmt.Errorf("gossip: Config.AdvertisePort %d out of range", c.AdvertisePort)
	case c.Transport == nil && c.BindAddr == "":
		return errors.New("gossip: Config.BindAddr is required without a Transport")
	case len(c.GossipKey) != 0 && len(c.GossipKey) != 16 && len(c.GossipKey) != 24 && len(c.GossipKey) != 32:
		return fmt.Errorf("gossip: Config.GossipKey must be 32 bytes (or 16 or 24), not %d", len(c.GossipKey))
	case c.ForgetAfter <= 0:
		return errors.New("gossip: Config.ForgetAfter must be positive")
	case c.RebuildDebounce < 0:
		return errors.New("gossip: Config.RebuildDebounce must not be negative")
	case c.RejoinInterval <= 0:
		return errors.New("gossip: Config.RejoinInterval must be positive")
	}
	for _, j := range c.Join {
		if j == "" {
			return errors.New("gossip: Config.Join has an empty entry")
		}
	}
	return c.Timing.Validate()
}

// memberlistConfig translates c for memberlist.Create.
func (c Config) memberlistConfig() *memberlist.Config {
	mc := memberlist.DefaultLANConfig()
	mc.Name = c.Name
	mc.BindAddr = c.BindAddr
	mc.BindPort = c.BindPort
	mc.AdvertiseAddr = c.AdvertiseAddr
	mc.AdvertisePort = c.AdvertisePort
	if mc.AdvertisePort == 0 {
		mc.AdvertisePort = c.BindPort
	}
	t := c.Timing
	mc.ProbeInterval = t.ProbeInterval
	mc.ProbeTimeout = t.ProbeTimeout
	mc.SuspicionMult = t.SuspicionMult
	mc.SuspicionMaxTimeoutMult = t.SuspicionMaxTimeoutMult
	mc.IndirectChecks = t.IndirectChecks
	mc.RetransmitMult = t.RetransmitMult
	mc.GossipInterval = t.GossipInterval
	mc.GossipNodes = t.GossipNodes
	mc.GossipToTheDeadTime = t.GossipToTheDeadTime
	mc.PushPullInterval = t.PushPullInterval
	mc.TCPTimeout = t.TCPTimeout
	mc.DeadNodeReclaimTime = t.DeadNodeReclaimTime
	if len(c.GossipKey) > 0 {
		mc.SecretKey = append([]byte(nil), c.GossipKey...)
	}
	mc.Transport = c.Transport
	return mc
}
