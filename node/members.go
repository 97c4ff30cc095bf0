package node

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/node/cluster"
	"github.com/weir-rl/weir/ring"
	"github.com/weir-rl/weir/transport"
)

// members is the node's part in its cluster: *cluster.Cluster, or alone
// for a cluster of one (Config.Clustered false).
type members interface {
	// Start starts serving what s names (the peer service, gossip).
	Start(ctx context.Context, s cluster.Serve) error
	// Stop hands state off, leaves and stops.
	Stop(ctx context.Context) error
	// Epoch is the epoch of the view requests are routed by.
	Epoch() uint64
	// Ready reports whether this node has joined its cluster.
	Ready() bool
	// Forget removes a failed member from the known members.
	Forget(name string) (bool, error)
	// SetLimitsVersion gossips the limits version in force.
	SetLimitsVersion(v int64)
	// Info reports membership and the ring (the owner of (limit, key)
	// when either is set).
	Info(limit, key string) api.ClusterInfo
	// Reports returns every member's report, this node's being self.
	Reports(ctx context.Context, req transport.ReportRequest, self transport.Report) (*ring.View, []cluster.PeerReport)
}

var _ members = (*cluster.Cluster)(nil)

// alone is a cluster of one: this node owns every key, no gossip runs,
// and its ring is itself. Safe for concurrent use.
type alone struct {
	name    string
	view    *ring.View // this node alone, epoch 1
	version atomic.Int64

	mu               sync.Mutex // guards the addresses, known after Start
	grpc, http, resp string
}

var _ members = (*alone)(nil)

func newAlone(name string, version int64) *alone {
	a := &alone{name: name, view: ring.NewView(1, name, []ring.Member{{Name: name, State: ring.Alive}})}
	a.version.Store(version)
	return a
}

// Start records the public addresses the ring publishes.
func (a *alone) Start(_ context.Context, s cluster.Serve) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.grpc, a.http, a.resp = s.APIAddr, s.HTTPAddr, s.RESPAddr
	return nil
}

// Stop has nothing to hand off.
func (a *alone) Stop(context.Context) error { return nil }

// Epoch is zero: a node that is not clustered has no ring epochs.
func (a *alone) Epoch() uint64 { return 0 }

// Ready is always true: there is nobody to join.
func (a *alone) Ready() bool { return true }

// Forget knows no other member.
func (a *alone) Forget(string) (bool, error) { return false, nil }

// SetLimitsVersion records the version Info reports.
func (a *alone) SetLimitsVersion(v int64) { a.version.Store(v) }

// Info reports this node as the only member and owner.
func (a *alone) Info(limit, key string) api.ClusterInfo {
	a.mu.Lock()
	grpcAddr, httpAddr, respAddr := a.grpc, a.http, a.resp
	a.mu.Unlock()
	info := api.ClusterInfo{
		Node:  a.name,
		Epoch: 1,
		Members: []api.Member{{
			Name: a.name, Addr: httpAddr, State: "alive", LimitsVersion: a.version.Load(),
		}},
		Ring: api.RingInfo{
			Members:  []api.RingMember{{Name: a.name, GRPCAddr: grpcAddr, HTTPAddr: httpAddr, RESPAddr: respAddr, State: "alive"}},
			Table:    a.view.Table(),
			Majority: true,
		},
	}
	if limit != "" || key != "" {
		info.Owner = a.name
	}
	return info
}

// Reports is this node's own report alone, in its view of itself.
func (a *alone) Reports(_ context.Context, _ transport.ReportRequest, self transport.Report) (*ring.View, []cluster.PeerReport) {
	return a.view, []cluster.PeerReport{{Member: ring.Member{Name: self.Node, State: ring.Alive}, Report: self, OK: true}}
}
