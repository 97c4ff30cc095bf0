package main

import (
	"context"
	"slices"
)

// A/A targets: each ceiling measured against a second copy of itself.
//
// A same-run ratio between two server processes on a shared machine moves
// with whatever else the machine does while they take turns. The A/A
// targets put a number on that: ceiling-http-aa and ceiling-grpc-aa are a
// second process of the same empty server, compared (vs_ceiling) with the
// first, in the same rounds as the node's targets. Both serve exactly the
// same work, so any distance of their ratio from 1 is the method's own
// scatter, to read beside weir-http's and weir-grpc's ratios to the same
// ceilings. They run only when -targets names them, so make bench's table
// and time stay as they were.

// aaTargets are the A/A targets' names, each with the ceiling it copies.
var aaTargets = map[string]string{
	"ceiling-http-aa": "ceiling-http",
	"ceiling-grpc-aa": "ceiling-grpc",
}

// named reports whether -targets names target.
func named(cfg suiteConfig, target string) bool { return slices.Contains(cfg.Targets, target) }

// startAACeilings starts the second ceiling of each A/A target that
// -targets names, and adds it to env.
func startAACeilings(ctx context.Context, cfg suiteConfig, dir string, env *suiteEnv) error {
	var err error
	if named(cfg, "ceiling-http-aa") {
		if env.ceilHTTPAA, err = startCeiling(ctx, cfg.Self, dir, ceilingHTTPKind); err != nil {
			return err
		}
	}
	if named(cfg, "ceiling-grpc-aa") {
		if env.ceilGRPCAA, err = startCeiling(ctx, cfg.Self, dir, ceilingGRPCKind); err != nil {
			return err
		}
	}
	return nil
}

// aaSpecs lists the A/A targets whose second ceiling env started: each in
// the group "ceiling", its ratio taken to the ceiling it copies, which
// must be among the specs they join (beforeTheirCeilings).
func aaSpecs(cfg suiteConfig, env *suiteEnv, maxC int) []suiteSpec {
	var specs []suiteSpec
	if c := env.ceilHTTPAA; c != nil {
		specs = append(specs, aaSpec("ceiling-http-aa", c, func(_ context.Context, wl workload) (target, error) {
			return newHTTPTarget([]string{c.addr}, maxC, cfg.Limit, wl.Keys, 1)
		}))
	}
	if c := env.ceilGRPCAA; c != nil {
		specs = append(specs, aaSpec("ceiling-grpc-aa", c, func(_ context.Context, wl workload) (target, error) {
			return newGRPCTarget([]string{c.addr}, 1, cfg.Limit, wl.Keys, 1, false)
		}))
	}
	return specs
}

// beforeTheirCeilings returns specs with each A/A target of aa just before
// the ceiling it copies, so that in rounds (A B C, C B A, ...) it stands
// as far from that ceiling as the node's target just after it does.
func beforeTheirCeilings(specs, aa []suiteSpec) []suiteSpec {
	out := make([]suiteSpec, 0, len(specs)+len(aa))
	for _, s := range specs {
		for _, a := range aa {
			if a.info.Ceiling == s.info.Name {
				out = append(out, a)
			}
		}
		out = append(out, s)
	}
	return out
}

// aaSpec is the A/A target name served by the second ceiling c.
func aaSpec(name string, c *ceilingProc, open func(ctx context.Context, wl workload) (target, error)) suiteSpec {
	s := ceilingSpec(name, c, open)
	s.info.Ceiling = aaTargets[name]
	return s
}
