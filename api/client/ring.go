package client

import (
	"fmt"

	"github.com/weir-rl/weir/api/weirv1"
	"github.com/weir-rl/weir/ring/ownership"
)

// ringView is an immutable ring as one node published it (GetRing): who
// owns what, and where members listen. It is safe for concurrent use.
type ringView struct {
	from     string // the answering node
	epoch    uint64
	table    ownership.Table
	addrs    map[string]string // member name → public gRPC address (live members that publish one)
	resp     map[string]string // member name → RESP address, for the members of addrs that advertise one
	majority bool
}

// viewFromProto checks and converts a GetRing answer.
func viewFromProto(r *weirv1.RingResponse) (*ringView, error) {
	if h := r.GetHash(); h != ownership.Hash {
		return nil, fmt.Errorf("client: ring hash %q, this client knows %q", h, ownership.Hash)
	}
	if h := r.GetHashTag(); h != ownership.HashTagRule {
		return nil, fmt.Errorf("client: hash-tag rule %q, this client knows %q", h, ownership.HashTagRule)
	}
	v := &ringView{from: r.GetNode(), epoch: r.GetEpoch(), addrs: map[string]string{}, resp: map[string]string{}, majority: r.GetMajority()}
	for _, m := range r.GetMembers() {
		if (m.GetState() == "alive" || m.GetState() == "suspect") && m.GetGrpcAddr() != "" {
			v.addrs[m.GetName()] = m.GetGrpcAddr()
			if a := m.GetRespAddr(); a != "" {
				v.resp[m.GetName()] = a
			}
		}
	}
	if len(r.GetRing()) > 0 {
		t, err := ownership.FromOwners(r.GetRing(), r.GetPartitionOwners())
		if err != nil {
			return nil, fmt.Errorf("client: ring from %s: %w", r.GetNode(), err)
		}
		v.table = t
	}
	return v, nil
}

// owner returns the name of the member that owns (limit, key) in v; ok is
// false when v has no ring.
func (v *ringView) owner(limit, key string) (string, bool) {
	return v.table.OwnerSum(ownership.KeySum(limit, key))
}
