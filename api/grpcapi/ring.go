package grpcapi

import (
	"context"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/api/weirv1"
	"github.com/weir-rl/weir/ring/ownership"
)

// ringResponse builds the GetRing answer from a node's cluster info: its
// ring members and partition table, and the owner rule's parameters
// (ring/ownership), from which a client computes owners as the node does.
func ringResponse(info api.ClusterInfo) *weirv1.RingResponse {
	p := ownership.DefaultParams()
	out := &weirv1.RingResponse{
		Node:            info.Node,
		Epoch:           info.Epoch,
		Members:         make([]*weirv1.RingMember, len(info.Ring.Members)),
		Ring:            info.Ring.Table.Members(),
		PartitionOwners: info.Ring.Table.Owners(),
		Hash:            ownership.Hash,
		HashTag:         ownership.HashTagRule,
		Replication:     uint32(p.Replication),
		Load:            p.Load,
		Majority:        info.Ring.Majority,
	}
	for i, m := range info.Ring.Members {
		out.Members[i] = &weirv1.RingMember{Name: m.Name, GrpcAddr: m.GRPCAddr, HttpAddr: m.HTTPAddr, RespAddr: m.RESPAddr, State: m.State}
	}
	return out
}

// GetRing implements weirv1.LimiterServer. It asks the Decider's Cluster
// with a context marked by api.ForRing.
func (s *Server) GetRing(ctx context.Context, _ *weirv1.GetRingRequest) (*weirv1.RingResponse, error) {
	info, err := s.d.Cluster(api.ForRing(ctx), "", "")
	if err != nil {
		return nil, Status(err).Err()
	}
	return ringResponse(info), nil
}
