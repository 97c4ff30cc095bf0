package cluster

import (
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/weir-rl/weir/ring"
	"github.com/weir-rl/weir/transport"
)

// TestProtocolFollowsMembership: a member advertises the versions its
// build speaks, and sends in the highest version every live member speaks,
// which the weir_peer_protocol_version gauge shows; a member of an older
// release (no versions advertised: version 1) holds the cluster at 1
// while it is live, and stops holding it once it has failed.
func TestProtocolFollowsMembership(t *testing.T) {
	c, _ := member(t)
	self, ok := c.View().Member("n1")
	if !ok {
		t.Fatal("n1 is not in its own view")
	}
	if want := (ring.Versions{Min: transport.MinVersion, Max: transport.MaxVersion}); self.Meta.Protocol != want {
		t.Fatalf("n1 advertises %+v, want %+v", self.Meta.Protocol, want)
	}
	old := ring.Member{Name: "n0", Addr: "127.0.0.1:1", Meta: ring.Meta{GRPCAddr: "127.0.0.1:2"}, State: ring.Alive}
	newer := ring.Member{
		Name: "n9", Addr: "127.0.0.1:3", State: ring.Alive,
		Meta: ring.Meta{GRPCAddr: "127.0.0.1:4", Protocol: ring.Versions{Min: transport.MinVersion, Max: transport.MaxVersion + 1}},
	}
	for _, tc := range []struct {
		name    string
		members []ring.Member
		want    transport.Version
	}{
		{"alone", []ring.Member{self}, transport.MaxVersion},
		{"with a newer member", []ring.Member{self, newer}, transport.MaxVersion},
		{"with an older member", []ring.Member{old, self, newer}, 1},
	} {
		c.observe(ring.NewView(1, "n1", tc.members))
		if got := c.pool.Protocol(); got != tc.want {
			t.Errorf("%s: sends in %d, want %d", tc.name, got, tc.want)
		}
		var g dto.Metric
		if err := c.m.protocol.Write(&g); err != nil || g.GetGauge().GetValue() != float64(tc.want) {
			got := g.GetGauge().GetValue()
			t.Errorf("%s: gauge %v, want %d", tc.name, got, tc.want)
		}
	}
	// Nothing in common (a release skipped): the gauge says 0, and the
	// node sends in a version it speaks, which a peer refuses by name.
	future := newer
	future.Meta.Protocol = ring.Versions{Min: transport.MaxVersion + 1, Max: transport.MaxVersion + 2}
	c.observe(ring.NewView(2, "n1", []ring.Member{self, future}))
	var g dto.Metric
	if err := c.m.protocol.Write(&g); err != nil || g.GetGauge().GetValue() != 0 {
		t.Errorf("no common version: gauge %v, %v; want 0", g.GetGauge().GetValue(), err)
	}
	if got := c.pool.Protocol(); got < transport.MinVersion || got > transport.MaxVersion {
		t.Errorf("no common version: sends in %d, which this build does not speak", got)
	}
	old.State = ring.Dead
	c.observe(ring.NewView(3, "n1", []ring.Member{old, self}))
	if got := c.pool.Protocol(); got != transport.MaxVersion {
		t.Errorf("a failed older member still holds the cluster at %d", got)
	}
}
