package cluster

import (
	"time"

	"github.com/weir-rl/weir/bucket"
	"github.com/weir-rl/weir/node/placement"
)

// This file answers questions about a member's state for status pages,
// tools and the node's cluster tests. Nothing here changes state.

// Failures returns the failure log the placement rules use: members that
// failed, when this node noticed, and the view in which they still owned
// their keys. The slice must not be modified.
func (c *Cluster) Failures() []placement.Failure { return c.placement().Failures() }

// Settling reports whether this member's view changed within
// HandoffWindow: keys' state may still be moving, and a forward whose
// caller set no deadline waits up to Forward.Settle() rather than the
// transport's Deadline (see settling).
func (c *Cluster) Settling() bool { return c.placement().Recent(c.now()) }

// Successor names the member that keeps the replica of (limit, key), a key
// this node owns; "" when this node does not own it or its successor is
// not alive.
func (c *Cluster) Successor(limit, key string) string {
	p, _ := c.placement().Successor(limit, key)
	return p.Peer
}

// Replica returns this node's replica of bucket (limit, key) as of now
// (false when it keeps none) and the number of leases its replica of the
// key holds. With replication off it keeps nothing.
func (c *Cluster) Replica(now time.Time, limit, key string) (bucket.Entry, bool, int) {
	return c.replicas.inspect(now, limit, key)
}
