package main

import (
	"context"
	"slices"

	"github.com/weir-rl/weir/api/client"
)

// suiteSpec is one target of the suite: its table entry, how to connect
// it for a workload, and the server processes behind it.
type suiteSpec struct {
	info    targetInfo
	open    func(ctx context.Context, wl workload) (target, error)
	servers []*proc  // must be alive for the cell to count
	pids    []int    // server CPU is summed over these
	metrics []string // /metrics read around each cell (Weir nodes)
	resp    bool     // speaks the nodes' Redis protocol (--resp-addr)
}

// skipped is a target the suite could not run, and why.
type skipped struct{ name, why string }

// suiteSpecs lists the targets in the order they run at each number of
// callers, and the ones that cannot run in this build, with why.
func suiteSpecs(cfg suiteConfig, b bucketSpec, env *suiteEnv, redisAddr string, solo *weirNode, trio, trioOff []*weirNode, resp bool) ([]suiteSpec, []skipped) {
	maxC := slices.Max(cfg.Callers)
	all := beforeTheirCeilings(oneNodeSpecs(cfg, env, solo, maxC), aaSpecs(cfg, env, maxC))
	all = append(all, redisSpecs(cfg, b, env, redisAddr, solo, maxC)...)
	all = append(all, trioSpecs(cfg, trio, trioOff, maxC)...)
	if len(env.gubernator) == 3 {
		lim, err := guberLimitOf(cfg.Limit, b, 1)
		if err != nil {
			env.guberWhyNot = err.Error()
		} else {
			all = append(all, gubernatorSpecs(cfg, env.gubernator, lim, maxC)...)
		}
	}
	specs, skips := selectSpecs(cfg, all, resp)
	if env.guberWhyNot != "" {
		for _, name := range gubernatorTargets {
			skips = append(skips, skipped{name, env.guberWhyNot})
		}
	}
	return specs, skips
}

// selectSpecs keeps the targets of all that cfg.Targets names (all of them
// when it names none), in order. weir-resp is skipped when the weir binary
// has no RESP listener (resp false), and so are the other targets over
// RESP, with why.
func selectSpecs(cfg suiteConfig, all []suiteSpec, resp bool) ([]suiteSpec, []skipped) {
	var specs []suiteSpec
	var skips []skipped
	for _, s := range all {
		switch {
		case len(cfg.Targets) > 0 && !slices.Contains(cfg.Targets, s.info.Name):
			continue
		case s.resp && !resp:
			skips = append(skips, skipped{s.info.Name, "`weir serve` has no `--resp-addr` in this build"})
		default:
			specs = append(specs, s)
		}
	}
	return specs, skips
}

// soloSpec is a target served by the single node solo, in the group
// "weir 1 node", compared with the ceiling named ceiling ("" for none)
// and with Redis.
func soloSpec(solo *weirNode, name, ceiling string, open func(ctx context.Context, wl workload) (target, error)) suiteSpec {
	return suiteSpec{
		info: targetInfo{Name: name, Group: "weir 1 node", Ceiling: ceiling, VsRedis: true, Weir: true},
		open: open, servers: []*proc{solo.proc}, pids: pidsOf(solo), metrics: metricsOf(solo),
	}
}

// ceilingSpec is the ceiling c, an empty server in its own process.
func ceilingSpec(name string, c *ceilingProc, open func(ctx context.Context, wl workload) (target, error)) suiteSpec {
	return suiteSpec{
		info: targetInfo{Name: name, Group: "ceiling"},
		open: open, servers: []*proc{c.proc}, pids: []int{c.pid()},
	}
}

// openCeiling connects to the ceiling c as the node's target of its kind
// is connected: HTTP with a connection per caller (up to maxC), gRPC over
// one connection.
func openCeiling(cfg suiteConfig, c *ceilingProc, maxC int) func(ctx context.Context, wl workload) (target, error) {
	return func(_ context.Context, wl workload) (target, error) {
		if c.kind == ceilingHTTPKind {
			return newHTTPTarget([]string{c.addr}, maxC, cfg.Limit, wl.Keys, 1)
		}
		return newGRPCTarget([]string{c.addr}, 1, cfg.Limit, wl.Keys, 1, false)
	}
}

// oneNodeSpecs lists the ceilings and the single node's HTTP and gRPC
// targets, each protocol's ceiling just before the node's targets over
// it. maxC is the most callers of any cell.
func oneNodeSpecs(cfg suiteConfig, env *suiteEnv, solo *weirNode, maxC int) []suiteSpec {
	one := []string{solo.grpcAddr}
	return []suiteSpec{
		ceilingSpec("ceiling-http", env.ceilHTTP, openCeiling(cfg, env.ceilHTTP, maxC)),
		soloSpec(solo, "weir-http", "ceiling-http", func(_ context.Context, wl workload) (target, error) {
			return newHTTPTarget([]string{solo.httpAddr}, maxC, cfg.Limit, wl.Keys, 1)
		}),
		ceilingSpec("ceiling-grpc", env.ceilGRPC, openCeiling(cfg, env.ceilGRPC, maxC)),
		soloSpec(solo, "weir-grpc", "ceiling-grpc", func(_ context.Context, wl workload) (target, error) {
			return newGRPCTarget(one, 1, cfg.Limit, wl.Keys, 1, false)
		}),
		soloSpec(solo, "weir-stream", "ceiling-grpc", func(_ context.Context, wl workload) (target, error) {
			t, err := newGRPCTarget(one, 1, cfg.Limit, wl.Keys, 1, false)
			if err != nil {
				return nil, err
			}
			return streamTarget{t}, nil
		}),
		soloSpec(solo, "weir-client", "ceiling-grpc", func(ctx context.Context, wl workload) (target, error) {
			return newGoClientTarget(ctx, one, cfg.Limit, wl.Keys, 1, client.Options{})
		}),
		// The same client with its takes held to gRPC: weir-client's takes go
		// over the node's RESP endpoint when it serves one (--resp-addr).
		soloSpec(solo, "weir-client-grpc", "ceiling-grpc", func(ctx context.Context, wl workload) (target, error) {
			return newGoClientTarget(ctx, one, cfg.Limit, wl.Keys, 1, client.Options{Transport: client.TransportGRPC})
		}),
		allotted(soloSpec(solo, "weir-client-allot", "", func(ctx context.Context, wl workload) (target, error) {
			return newGoClientTarget(ctx, one, cfg.AllotLimit, wl.Keys, 1, client.Options{Allot: client.AllotOptions{On: true}})
		}), "weir-client"),
	}
}

// redisSpecs lists Redis running the Lua token bucket b at redisAddr, and
// the single node spoken to over RESP, Redis's own protocol.
func redisSpecs(cfg suiteConfig, b bucketSpec, env *suiteEnv, redisAddr string, solo *weirNode, maxC int) []suiteSpec {
	return []suiteSpec{
		{
			info:    targetInfo{Name: redisName, Group: "redis"},
			servers: []*proc{env.redis}, pids: []int{env.redis.pid()},
			open: func(ctx context.Context, wl workload) (target, error) {
				return newGoRedisLuaTarget(ctx, redisAddr, cfg.Limit, wl.Keys, maxC, b, 1)
			},
		},
		overRESP(soloSpec(solo, "weir-resp", "", func(ctx context.Context, wl workload) (target, error) {
			return newRESPTarget(ctx, []string{solo.respAddr}, cfg.Limit, wl.Keys, maxC, 1, false)
		})),
	}
}

// trioSpecs lists the 3-node targets: round-robin gRPC and RESP, the Go
// client and TakeStream on trio, and the Go client on trioOff, the
// cluster with replication off. maxC is the most callers of any cell.
func trioSpecs(cfg suiteConfig, trio, trioOff []*weirNode, maxC int) []suiteSpec {
	trioGRPC, trioOffGRPC := grpcAddrs(trio), grpcAddrs(trioOff)
	trioRESP := make([]string, len(trio))
	for i, n := range trio {
		trioRESP[i] = n.respAddr
	}
	trioProcs := []*proc{trio[0].proc, trio[1].proc, trio[2].proc}
	trioOffProcs := []*proc{trioOff[0].proc, trioOff[1].proc, trioOff[2].proc}
	return []suiteSpec{
		{
			info:    targetInfo{Name: "weir3-grpc-rr", Group: "weir 3 nodes", Ceiling: "ceiling-grpc", OneNode: "weir-grpc", VsRedis: true, Weir: true},
			servers: trioProcs, pids: pidsOf(trio...), metrics: metricsOf(trio...),
			open: func(_ context.Context, wl workload) (target, error) {
				return newGRPCTarget(trioGRPC, 1, cfg.Limit, wl.Keys, 1, true)
			},
		},
		{
			info: targetInfo{
				Name: "weir3-client", Group: "weir 3 nodes", Ceiling: "ceiling-grpc", OneNode: "weir-client",
				ReplOff: "weir3-client-norepl", VsRedis: true, Weir: true,
			},
			servers: trioProcs, pids: pidsOf(trio...), metrics: metricsOf(trio...),
			open: func(ctx context.Context, wl workload) (target, error) {
				return newGoClientTarget(ctx, trioGRPC, cfg.Limit, wl.Keys, 1, client.Options{})
			},
		},
		{
			info:    targetInfo{Name: "weir3-client-norepl", Group: "weir 3 nodes", Ceiling: "ceiling-grpc", OneNode: "weir-client", VsRedis: true, Weir: true},
			servers: trioOffProcs, pids: pidsOf(trioOff...), metrics: metricsOf(trioOff...),
			open: func(ctx context.Context, wl workload) (target, error) {
				return newGoClientTarget(ctx, trioOffGRPC, cfg.Limit, wl.Keys, 1, client.Options{})
			},
		},
		{
			info: targetInfo{
				Name: "weir3-grpc-rr-allot", Group: "weir 3 nodes", Ceiling: "ceiling-grpc", OneNode: "weir-grpc",
				AllotOff: "weir3-grpc-rr", VsRedis: true, Weir: true,
			},
			servers: trioProcs, pids: pidsOf(trio...), metrics: metricsOf(trio...),
			open: func(_ context.Context, wl workload) (target, error) {
				return newGRPCTarget(trioGRPC, 1, cfg.AllotLimit, wl.Keys, 1, true)
			},
		},
		{
			info:    targetInfo{Name: "weir3-stream", Group: "weir 3 nodes", Ceiling: "ceiling-grpc", OneNode: "weir-stream", VsRedis: true, Weir: true},
			servers: trioProcs, pids: pidsOf(trio...), metrics: metricsOf(trio...),
			open: func(_ context.Context, wl workload) (target, error) {
				return newTrioStream(trioGRPC, cfg.Limit, wl.Keys)
			},
		},
		{
			info: targetInfo{
				Name: "weir3-stream-allot", Group: "weir 3 nodes", Ceiling: "ceiling-grpc", OneNode: "weir-stream",
				AllotOff: "weir3-stream", VsRedis: true, Weir: true,
			},
			servers: trioProcs, pids: pidsOf(trio...), metrics: metricsOf(trio...),
			open: func(_ context.Context, wl workload) (target, error) {
				return newTrioStream(trioGRPC, cfg.AllotLimit, wl.Keys)
			},
		},
		// WEIR.TAKE round robin over the nodes through go-redis: the
		// unrouted hot key of the gRPC pair above, behind a cheaper front,
		// so that the forwards, not the front, are what allotments save.
		overRESP(suiteSpec{
			info:    targetInfo{Name: "weir3-resp-rr", Group: "weir 3 nodes", OneNode: "weir-resp", VsRedis: true, Weir: true},
			servers: trioProcs, pids: pidsOf(trio...), metrics: metricsOf(trio...),
			open: func(ctx context.Context, wl workload) (target, error) {
				return newRESPTarget(ctx, trioRESP, cfg.Limit, wl.Keys, maxC, 1, true)
			},
		}),
		overRESP(suiteSpec{
			info: targetInfo{
				Name: "weir3-resp-rr-allot", Group: "weir 3 nodes", OneNode: "weir-resp",
				AllotOff: "weir3-resp-rr", VsRedis: true, Weir: true,
			},
			servers: trioProcs, pids: pidsOf(trio...), metrics: metricsOf(trio...),
			open: func(ctx context.Context, wl workload) (target, error) {
				return newRESPTarget(ctx, trioRESP, cfg.AllotLimit, wl.Keys, maxC, 1, true)
			},
		}),
	}
}

// overRESP marks s as a target over the nodes' Redis protocol, run only
// when weir serve has --resp-addr.
func overRESP(s suiteSpec) suiteSpec {
	s.resp = true
	return s
}

// newTrioStream is TakeStream over the three nodes, callers spread over
// them in turn (caller i on node i mod 3): no client routing.
func newTrioStream(addrs []string, limit string, keys int) (target, error) {
	t, err := newGRPCTarget(addrs, 1, limit, keys, 1, false)
	if err != nil {
		return nil, err
	}
	return streamTarget{t}, nil
}

// allotted marks s as the allotments-on twin of the target named off.
func allotted(s suiteSpec, off string) suiteSpec {
	s.info.AllotOff = off
	return s
}

// grpcAddrs returns the gRPC address of each node, in order.
func grpcAddrs(nodes []*weirNode) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.grpcAddr
	}
	return out
}
