package node_test

import (
	"context"
	"runtime"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/weir-rl/weir/api/weirv1"
	"github.com/weir-rl/weir/internal/ceiling"
	"github.com/weir-rl/weir/node"
)

// BenchmarkGRPCServeTake is a started node's public gRPC server answering
// unary takes over loopback from 64 concurrent callers, on 100,000 keys in
// turn: the server's own goroutines run each call, as in production, so a
// profile shows what a call costs beyond its handler (the goroutine it
// runs on, its stack growth, the transport). Client and server share the
// process.
func BenchmarkGRPCServeTake(b *testing.B) {
	n := startedBenchNode(b)
	benchGRPCTakes(b, n.GRPCAddr(), 64)
}

// BenchmarkGRPCServeVsCeiling is make bench's gRPC cell on uniform keys at
// 16 callers in one process, as BenchmarkHTTPServeVsCeiling is its HTTP
// cell: a started node's public gRPC server, and beside it the empty gRPC
// method make bench measures it against (package ceiling), each answering
// takes over loopback through the same client. The two rows' cpu-ns/op
// ratio is make bench's "÷ ceiling" with the client's cost held equal
// (run them interleaved, a process per run):
//
//	go test -run '^$' -bench GRPCServeVsCeiling -benchtime 100000x ./node
func BenchmarkGRPCServeVsCeiling(b *testing.B) {
	b.Run("target=ceiling", func(b *testing.B) {
		srv := ceiling.NewGRPCServer()
		benchGRPCTakes(b, serveOnLoopback(b, srv.Serve, srv.Stop), 16)
	})
	b.Run("target=weir", func(b *testing.B) {
		n := startedBenchNode(b)
		benchGRPCTakes(b, n.GRPCAddr(), 16)
	})
}

// benchGRPCTakes calls Take on the gRPC server at addr once per iteration
// from callers concurrent goroutines over one connection, on 100,000 keys
// in turn, and reports the process's CPU per take.
func benchGRPCTakes(b *testing.B, addr string, callers int) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Close() })
	c := weirv1.NewLimiterClient(conn)
	ctx := context.Background()
	parallelTakes(b, callers, func(key string) bool {
		resp, err := c.Take(ctx, &weirv1.TakeRequest{Checks: []*weirv1.Check{{Limit: "bench", Key: key, Cost: 1}}})
		if err != nil || !resp.GetAllowed() {
			b.Error(err)
			return false
		}
		return true
	})
}

// parallelTakes calls take from callers concurrent goroutines, once per
// iteration of b, each time with the next of 100,000 keys ("k0" …) in
// turn, until b is done or a take reports false; then it reports the
// process's CPU time per take, client and server: on a shared machine a
// steadier measure than the wall clock, which waits on the connections'
// readers and writers as much as on the CPU.
func parallelTakes(b *testing.B, callers int, take func(key string) bool) {
	var next atomic.Uint64
	b.ReportAllocs()
	cpu0 := processCPU(b)
	b.SetParallelism(max(1, callers/runtime.GOMAXPROCS(0)))
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if !take("k" + strconv.FormatUint(next.Add(1)%100_000, 10)) {
				return
			}
		}
	})
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
}

// startedBenchNode is benchNode started, its public servers on loopback
// ports, and shut down when b ends.
func startedBenchNode(b *testing.B) *node.Node {
	b.Helper()
	n := benchNode(b)
	if err := n.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = n.Shutdown(ctx)
	})
	return n
}

// processCPU is the CPU time, user and system, this process used so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
