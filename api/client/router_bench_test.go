package client

import (
	"testing"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/ring/ownership"
)

// BenchmarkOneOwner is the client's routing of a one-check take over a
// three-member ring: a short key, and one whose limit and key pass 32
// bytes together (where a built hash-key string no longer fits the
// compiler's stack buffer).
func BenchmarkOneOwner(b *testing.B) {
	v := &ringView{table: ownership.Build([]string{"n1", "n2", "n3"}, ownership.DefaultParams())}
	for _, tc := range []struct{ name, key string }{
		{"short", "tenant:12345"},
		{"long", "tenant:acme-corporation/region:eu-west-1/route:/v1/orders/export"},
	} {
		checks := []api.Check{{Limit: "bench", Key: tc.key, Cost: 1}}
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := oneOwner(v, checks); !ok {
					b.Fatal("no owner")
				}
			}
		})
	}
}
