package main

import (
	"context"
	"slices"

	"github.com/weir-rl/weir/internal/tracing/otlptest"
)

// traceTarget is weir-grpc against a node of its own with tracing on at 0 %
// sampling (--otlp-endpoint at a receiver that discards, --trace-sample-ratio
// 0): beside weir-grpc, what tracing costs a decision no caller sampled.
const traceTarget = "weir-grpc-trace0"

// tracedSpecs starts, when traceTarget is selected and the weir binary
// has --otlp-endpoint, a discarding OTLP receiver in this process and a
// node exporting to it, adds both to env, and returns traceTarget's spec.
func tracedSpecs(ctx context.Context, cfg suiteConfig, dir string, env *suiteEnv) ([]suiteSpec, error) {
	if (len(cfg.Targets) > 0 && !slices.Contains(cfg.Targets, traceTarget)) || !weirHasFlag(cfg.WeirBin, "otlp-endpoint") {
		return nil, nil
	}
	recv, err := otlptest.Start("127.0.0.1:0", true)
	if err != nil {
		return nil, err
	}
	env.stops = append(env.stops, recv.Stop)
	n, err := startWeir(ctx, weirNodeConfig{
		bin: cfg.WeirBin, limits: cfg.LimitsPath, dir: dir, name: "trace0",
		args: []string{"--otlp-endpoint", recv.Endpoint(), "--trace-sample-ratio", "0"},
	})
	if err != nil {
		return nil, err
	}
	env.nodes = append(env.nodes, n)
	return []suiteSpec{soloSpec(n, traceTarget, "ceiling-grpc", func(_ context.Context, wl workload) (target, error) {
		return newGRPCTarget([]string{n.grpcAddr}, 1, cfg.Limit, wl.Keys, 1, false)
	})}, nil
}
