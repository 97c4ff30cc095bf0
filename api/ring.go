package api

import (
	"context"
	"net/http"

	"github.com/weir-rl/weir/api/weirv1"
	"github.com/weir-rl/weir/ring/ownership"
)

// ringResponse builds the GetRing answer from a node's cluster info.
func ringResponse(info ClusterInfo) *weirv1.RingResponse {
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
		out.Members[i] = &weirv1.RingMember{Name: m.Name, GrpcAddr: m.GRPCAddr, HttpAddr: m.HTTPAddr, State: m.State}
	}
	return out
}

// GetRing implements weirv1.LimiterServer.
func (s *grpcServer) GetRing(ctx context.Context, _ *weirv1.GetRingRequest) (*weirv1.RingResponse, error) {
	info, err := s.d.Cluster(ForRing(ctx), "", "")
	if err != nil {
		return nil, grpcStatus(err).Err()
	}
	return ringResponse(info), nil
}

// ringMemberJSON is a RingMember on the wire.
type ringMemberJSON struct {
	Name     string `json:"name"`
	GRPCAddr string `json:"grpc_addr"`
	HTTPAddr string `json:"http_addr"`
	State    string `json:"state"`
}

// ringJSON is GET /v1/ring's body: weir.v1.RingResponse's fields.
type ringJSON struct {
	Node            string           `json:"node"`
	Epoch           uint64           `json:"epoch"`
	Members         []ringMemberJSON `json:"members"`
	Ring            []string         `json:"ring"`
	PartitionOwners []uint32         `json:"partition_owners"`
	Hash            string           `json:"hash"`
	HashTag         string           `json:"hash_tag"`
	Replication     uint32           `json:"replication"`
	Load            float64          `json:"load"`
	Majority        bool             `json:"majority"`
}

// ring serves GET /v1/ring: the node's ring view for clients (GetRing).
func (h *httpHandler) ring(w http.ResponseWriter, r *http.Request) {
	info, err := h.d.Cluster(ForRing(r.Context()), "", "")
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	pb := ringResponse(info)
	out := ringJSON{
		Node: pb.Node, Epoch: pb.Epoch, Members: make([]ringMemberJSON, len(pb.Members)),
		Ring: pb.Ring, PartitionOwners: pb.PartitionOwners, Hash: pb.Hash, HashTag: pb.HashTag,
		Replication: pb.Replication, Load: pb.Load, Majority: pb.Majority,
	}
	if out.Ring == nil {
		out.Ring = []string{}
	}
	for i, m := range pb.Members {
		out.Members[i] = ringMemberJSON{Name: m.Name, GRPCAddr: m.GrpcAddr, HTTPAddr: m.HttpAddr, State: m.State}
	}
	w.Header().Set("Cache-Control", "no-store")
	WriteJSON(w, http.StatusOK, out)
}
