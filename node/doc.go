// Package node wires one Weir member together: configuration, the limits
// in force (the limits file, and the envoy rules' limits), the decision
// engine (node/engine), the member's part in the cluster (node/cluster, or
// a cluster of one), the public HTTP, gRPC and Redis-protocol listeners,
// security and metrics. It is the only package that knows all the others
// (docs/architecture.md §2); cmd/weir, jepsen and bench build on it.
//
// Node implements api.Decider and api.Operator by handing each call to the
// engine (takes and leases) or to its members (cluster status, hot keys
// and stats across members). Its Config is a documented struct with
// DefaultConfig and LocalConfig presets and a Validate that changes
// nothing; Timing is the one failure-detection and handover profile
// (LANTiming, LocalTiming).
//
// # Concurrency
//
// Node's methods are safe for concurrent use. New starts no goroutine and
// opens no socket; Start binds the listeners, joins the cluster and starts
// serving; every goroutine the node, its engine and its cluster member
// started has ended when Shutdown returns.
package node
