package main

import (
	"flag"
	"testing"

	"github.com/weir-rl/weir/node"
)

// TestProtectedMode: `weir serve` with no tokens file and no public
// address serves its open API on loopback only, and with no cluster secret
// and no gossip address or seed keeps plaintext gossip on loopback; naming
// an address, a tokens file or a secret (flag or WEIR_ variable) leaves the
// node as configured.
func TestProtectedMode(t *testing.T) {
	tests := []struct {
		name                   string
		args                   []string
		env                    map[string]string
		http, grpc, gossipBind string
		confinements           int
	}{
		{"no flags", nil, nil, "127.0.0.1:8080", "127.0.0.1:8081", "127.0.0.1", 2},
		{"tokens file", []string{"--tokens-file", "t.yaml"}, nil, ":8080", ":8081", "127.0.0.1", 1},
		{"named address", []string{"--http-addr", ":9080"}, nil, ":9080", ":8081", "127.0.0.1", 1},
		{"address by environment", nil, map[string]string{"WEIR_GRPC_ADDR": "0.0.0.0:8081"}, ":8080", "0.0.0.0:8081", "127.0.0.1", 1},
		{"Redis port named", []string{"--resp-addr", ":6380"}, nil, ":8080", ":8081", "127.0.0.1", 1},
		{"cluster secret", []string{"--cluster-secret-file", "s"}, nil, "127.0.0.1:8080", "127.0.0.1:8081", "", 1},
		{"seeds", []string{"--join", "10.0.0.2:7946"}, nil, "127.0.0.1:8080", "127.0.0.1:8081", "", 1},
		{"gossip address", []string{"--gossip-addr", "10.0.0.1:7946"}, nil, "127.0.0.1:8080", "127.0.0.1:8081", "10.0.0.1", 1},
		{"no cluster", []string{"--cluster=false", "--tokens-file", "t"}, nil, ":8080", ":8081", "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := node.DefaultConfig()
			pf := processFlags{logFormat: "text"}
			var cf clusterFlags
			fs := newFlagSet("serve")
			serveFlags(fs, &cfg, &cf, &pf)
			if err := parseWithEnv(fs, tt.args, func(k string) string { return tt.env[k] }); err != nil {
				t.Fatal(err)
			}
			if err := cf.apply(&cfg); err != nil {
				t.Fatal(err)
			}
			given := map[string]bool{}
			fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
			got := protectedMode(&cfg, func(n string) bool { return given[n] })
			if cfg.HTTPAddr != tt.http || cfg.GRPCAddr != tt.grpc || len(got) != tt.confinements {
				t.Fatalf("http %q grpc %q, %d confinements %q; want %q %q %d", cfg.HTTPAddr, cfg.GRPCAddr, len(got), got, tt.http, tt.grpc, tt.confinements)
			}
			if cfg.Clustered && tt.gossipBind != "" && cfg.Ring.BindAddr != tt.gossipBind {
				t.Fatalf("gossip binds %q, want %q", cfg.Ring.BindAddr, tt.gossipBind)
			}
			if cfg.Clustered && tt.gossipBind == "" && cfg.Ring.BindAddr == "127.0.0.1" {
				t.Fatalf("gossip confined to loopback though %v names its way out", tt.args)
			}
		})
	}
}
