package httpapi

import (
	"net/http"

	"github.com/weir-rl/weir/api"

	"github.com/weir-rl/weir/ring/ownership"
)

// ringMemberJSON is a RingMember on the wire.
type ringMemberJSON struct {
	Name     string `json:"name"`
	GRPCAddr string `json:"grpc_addr"`
	HTTPAddr string `json:"http_addr"`
	RESPAddr string `json:"resp_addr,omitempty"`
	State    string `json:"state"`
}

// ringJSON is GET /v1/ring's body: weir.v1.RingResponse's fields, with the
// same values GetRing sends.
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

// ring serves GET /v1/ring: the node's ring view for clients (GetRing), the
// Cluster call marked by ForRing.
func (h *handler) ring(w http.ResponseWriter, r *http.Request) {
	info, err := h.d.Cluster(api.ForRing(r.Context()), "", "")
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	p := ownership.DefaultParams()
	out := ringJSON{
		Node: info.Node, Epoch: info.Epoch, Members: make([]ringMemberJSON, len(info.Ring.Members)),
		Ring: info.Ring.Table.Members(), PartitionOwners: info.Ring.Table.Owners(),
		Hash: ownership.Hash, HashTag: ownership.HashTagRule,
		Replication: uint32(p.Replication), Load: p.Load, Majority: info.Ring.Majority,
	}
	if out.Ring == nil {
		out.Ring = []string{}
	}
	for i, m := range info.Ring.Members {
		out.Members[i] = ringMemberJSON(m)
	}
	w.Header().Set("Cache-Control", "no-store")
	api.WriteJSON(w, http.StatusOK, out)
}
