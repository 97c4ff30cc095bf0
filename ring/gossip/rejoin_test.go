package gossip

import (
	"testing"

	"github.com/weir-rl/weir/ring"
)

func TestSplitSeed(t *testing.T) {
	for _, tc := range []struct{ in, host, port string }{
		{"10.0.0.1:7000", "10.0.0.1", "7000"},
		{"10.0.0.1", "10.0.0.1", "7946"},
		{"weir.svc", "weir.svc", "7946"},
		{"weir.svc:1", "weir.svc", "1"},
		{"::1", "::1", "7946"},
		{"[::1]:5", "::1", "5"},
	} {
		h, p, err := splitSeed(tc.in, 7946)
		if err != nil || h != tc.host || p != tc.port {
			t.Errorf("splitSeed(%q) = %q %q %v", tc.in, h, p, err)
		}
	}
}

func TestResolveSeeds(t *testing.T) {
	cfg := LocalConfig()
	cfg.Name = "a"
	cfg.BindPort = 7946
	cfg.Join = []string{"10.0.0.1", "localhost:7000", "[::ffff:10.0.0.2]:5", "no-such-host.invalid"}
	r, err := New(cfg, ring.Meta{})
	if err != nil {
		t.Fatal(err)
	}
	got, all := r.resolveSeeds(t.Context())
	if all {
		t.Error("an unresolvable name reported as resolved")
	}
	want := map[string]bool{"10.0.0.1:7946": true, "127.0.0.1:7000": true, "10.0.0.2:5": true}
	for _, a := range got {
		if a == "[::1]:7000" {
			continue // localhost may also resolve to ::1
		}
		if !want[a] {
			t.Errorf("unexpected seed %s", a)
		}
		delete(want, a)
	}
	if len(want) != 0 {
		t.Errorf("seeds %v missing %v", got, want)
	}
}
