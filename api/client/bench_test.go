package client_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/api/client"
	"github.com/weir-rl/weir/internal/nodetest"
	"github.com/weir-rl/weir/node" //nolint:depguard // benchmarks against a real node, in the external test package only
)

// The client path against real in-process nodes on loopback. Compare the
// RESP path (Dial), the shared stream (Dial, TransportGRPC) and unary
// calls on one connection (New) side by side, in one run:
//
//	flock /tmp/weir-cpu.lock go test -run '^$' -bench 'ClientTake' -count 6 ./api/client/ | tee new.txt
//	benchstat -col /path new.txt

func startBenchNode(b *testing.B) *node.Node {
	b.Helper()
	cfg := node.LocalConfig()
	cfg.SweepInterval = 0
	cfg.RESPAddr = "127.0.0.1:0" // Dial's takes go over it
	return nodetest.Start(b, cfg, node.Deps{})
}

// benchClients returns the three clients of one node: Dial's over the
// node's RESP endpoint (dial), Dial's held to gRPC (dial-grpc: the shared
// stream) and New's (unary).
func benchClients(b *testing.B, n *node.Node) map[string]*client.Client {
	b.Helper()
	conn, err := grpc.NewClient(n.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Close() })
	return map[string]*client.Client{
		"path=dial": dial(b, n, client.Options{}), "path=dial-grpc": dial(b, n, client.Options{Transport: client.TransportGRPC}),
		"path=new": client.New(conn),
	}
}

// BenchmarkClientTake is one caller at a time. The embedded file's
// "search" limit (100/min) soon denies: a denial walks the same decision
// path, so the figures are decisions, allowed or not.
func BenchmarkClientTake(b *testing.B) {
	n := startBenchNode(b)
	for name, c := range benchClients(b, n) {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				if _, err := c.Take(context.Background(), api.Check{Limit: "search", Key: fmt.Sprint("k", i%1024)}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkClientTakeParallel is 16 callers per core sharing one client.
func BenchmarkClientTakeParallel(b *testing.B) {
	n := startBenchNode(b)
	for name, c := range benchClients(b, n) {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetParallelism(16) // 16 callers per GOMAXPROCS
			var seq atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				key := fmt.Sprint("k", seq.Add(1))
				for pb.Next() {
					if _, err := c.Take(context.Background(), api.Check{Limit: "search", Key: key}); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkClientTakeCluster3 is the cluster-aware client over three nodes
// (each take goes straight to its owner) against a plain connection to one
// node that forwards two of every three takes.
func BenchmarkClientTakeCluster3(b *testing.B) {
	tc := newTestCluster(b)
	tc.start(3)
	n1 := tc.running()["n1"]
	routed := dial(b, n1, client.Options{})
	tc.waitSettled(routed)
	conn, err := grpc.NewClient(n1.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Close() })
	for name, c := range map[string]*client.Client{"path=dial": routed, "path=one-node": client.New(conn)} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetParallelism(16)
			var seq atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				base := seq.Add(1) * 1_000_000
				i := int64(0)
				for pb.Next() {
					i++
					if _, err := c.Take(context.Background(), api.Check{Limit: "wide", Key: fmt.Sprint("k", base+i%4096)}); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
