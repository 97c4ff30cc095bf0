package gossip

import (
	"context"
	"fmt"
	"testing"

	"github.com/weir-rl/weir/ring"
)

// TestLoopbackSmoke runs three rings on real UDP/TCP loopback sockets
// (memberlist's own transport, free ports) and waits for one view.
func TestLoopbackSmoke(t *testing.T) {
	var rings []*Membership
	t.Cleanup(func() {
		for _, r := range rings {
			r.Close()
		}
	})
	var seed string
	for i := range 3 {
		cfg := LocalConfig()
		cfg.Name = fmt.Sprintf("lo%d", i)
		if seed != "" {
			cfg.Join = []string{seed}
		}
		r, err := New(cfg, ring.Meta{GRPCAddr: fmt.Sprintf("127.0.0.1:%d", 9000+i)})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		rings = append(rings, r)
		if i == 0 {
			waitFor(t, "own address", func() bool {
				m, _ := r.View().Member(cfg.Name)
				seed = m.Addr
				return seed != ""
			})
		}
	}
	took := waitFor(t, "loopback convergence", func() bool { return converged(rings...) })
	t.Logf("3 rings on loopback converged in %v (seed %s)", took, seed)
	for _, r := range rings {
		if !r.Joined() {
			t.Errorf("%s not joined", r.cfg.Name)
		}
	}
}
