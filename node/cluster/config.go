package cluster

import (
	"errors"
	"time"
)

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
