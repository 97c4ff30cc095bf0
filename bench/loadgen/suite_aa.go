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

// aaCopy is an A/A target: its name, the ceiling it copies and that
// ceiling's kind.
type aaCopy struct{ name, of, kind string }

// aaCopies are the A/A targets, one per ceiling.
var aaCopies = []aaCopy{
	{name: "ceiling-http-aa", of: "ceiling-http", kind: ceilingHTTPKind},
	{name: "ceiling-grpc-aa", of: "ceiling-grpc", kind: ceilingGRPCKind},
}

// aaCeiling is an A/A target's second ceiling, started.
type aaCeiling struct {
	aaCopy
	proc *ceilingProc
}

// startAACeilings starts the second ceiling of each A/A target that
// -targets names, and adds it to env.
func startAACeilings(ctx context.Context, cfg suiteConfig, dir string, env *suiteEnv) error {
	for _, a := range aaCopies {
		if !slices.Contains(cfg.Targets, a.name) {
			continue
		}
		c, err := startCeiling(ctx, cfg.Self, dir, a.kind)
		if err != nil {
			return err
		}
		env.aa = append(env.aa, aaCeiling{a, c})
	}
	return nil
}

// aaSpecs lists the A/A targets whose second ceiling env started: each in
// the group "ceiling", its ratio taken to the ceiling it copies, which
// must be among the specs they join (beforeTheirCeilings).
func aaSpecs(cfg suiteConfig, env *suiteEnv, maxC int) []suiteSpec {
	specs := make([]suiteSpec, 0, len(env.aa))
	for _, a := range env.aa {
		s := ceilingSpec(a.name, a.proc, openCeiling(cfg, a.proc, maxC))
		s.info.Ceiling = a.of
		specs = append(specs, s)
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
