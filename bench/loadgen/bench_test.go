package main

import (
	"context"
	"testing"
)

// BenchmarkInProcess drives an in-process node (wall clock, bench limit)
// through the real gRPC and HTTP clients of the load generator, serially
// and in parallel: the cost of one decision end to end over loopback, in
// one process, for profiling with -cpuprofile.
func BenchmarkInProcess(b *testing.B) {
	n := startBenchNode(b)
	mk := map[string]func() (target, error){
		"weir-grpc": func() (target, error) { return newGRPCTarget([]string{n.GRPCAddr()}, 1, "bench", 1, 1, false) },
		"weir-http": func() (target, error) { return newHTTPTarget([]string{n.HTTPAddr()}, 64, "bench", 1, 1) },
	}
	for _, name := range []string{"weir-grpc", "weir-http"} {
		tgt, err := mk[name]()
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			c, _ := tgt.newCaller(context.Background(), 0)
			for b.Loop() {
				if ok, err := c.take(context.Background(), 0); err != nil || !ok {
					b.Fatal(ok, err)
				}
			}
		})
		b.Run(name+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				c, _ := tgt.newCaller(context.Background(), 0)
				for pb.Next() {
					if ok, err := c.take(context.Background(), 0); err != nil || !ok {
						b.Error(ok, err)
						return
					}
				}
			})
		})
		_ = tgt.close()
	}
}
