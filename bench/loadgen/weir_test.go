package main

import (
	"context"
	"testing"
	"time"

	"github.com/weir-rl/weir/internal/nodetest"
	"github.com/weir-rl/weir/node"
)

// startNode runs an in-process Weir node on bench/limits.yaml with a frozen
// clock, so no bucket refills during the test.
func startNode(t *testing.T) *node.Node {
	t.Helper()
	return runNode(t, frozenClock)
}

// frozenClock is the clock of startNode's nodes: it never moves.
func frozenClock() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }

// startBenchNode runs an in-process node on bench/limits.yaml on the wall
// clock.
func startBenchNode(tb testing.TB) *node.Node {
	tb.Helper()
	return runNode(tb, nil)
}

func runNode(t testing.TB, clock func() time.Time) *node.Node {
	t.Helper()
	return runNodeOn(t, "../limits.yaml", clock)
}

// startRESPNode is startNode that also serves the Redis protocol.
func startRESPNode(t *testing.T) *node.Node {
	t.Helper()
	return runNodeWith(t, "../limits.yaml", frozenClock, func(c *node.Config) { c.RESPAddr = "127.0.0.1:0" })
}

// runNodeOn runs an in-process node on the limits file at path.
func runNodeOn(t testing.TB, path string, clock func() time.Time) *node.Node {
	t.Helper()
	return runNodeWith(t, path, clock, func(*node.Config) {})
}

// runNodeWith is runNodeOn with the node's configuration changed by edit.
func runNodeWith(t testing.TB, path string, clock func() time.Time, edit func(*node.Config)) *node.Node {
	t.Helper()
	cfg := node.LocalConfig()
	cfg.LimitsPath = path
	edit(&cfg)
	return nodetest.Start(t, cfg, node.Deps{Clock: clock})
}

// TestWeirTargets drives a real node over both protocols: the bench limit
// allows everything; bench-small (capacity 100, clock frozen) allows
// exactly 100 of 300 requests on one key and denies the rest, as
// decisions, not errors. Each case gets a fresh node.
func TestWeirTargets(t *testing.T) {
	ctx := context.Background()
	targets := map[string]func(n *node.Node, limit string) (target, error){
		"weir-grpc": func(n *node.Node, limit string) (target, error) {
			return newGRPCTarget([]string{n.GRPCAddr()}, 2, limit, 1, 1, false)
		},
		"weir-http": func(n *node.Node, limit string) (target, error) {
			return newHTTPTarget([]string{"http://" + n.HTTPAddr() + "/"}, 4, limit, 1, 1)
		},
	}
	for name, mk := range targets {
		for _, tc := range []struct {
			limit           string
			allowed, denied uint64
		}{{"bench", 300, 0}, {"bench-small", 100, 200}} {
			t.Run(name+"/"+tc.limit, func(t *testing.T) {
				tgt, err := mk(startNode(t), tc.limit)
				if err != nil {
					t.Fatal(err)
				}
				defer tgt.close()
				res, err := runCell(ctx, tgt, cellConfig{Concurrency: 4, Requests: 300, Keys: 1, Timeout: 10 * time.Second})
				if err != nil {
					t.Fatal(err)
				}
				if res.Allowed != tc.allowed || res.Denied != tc.denied || res.Errors != 0 {
					t.Fatalf("allowed/denied/errors = %d/%d/%d (%s), want %d/%d/0",
						res.Allowed, res.Denied, res.Errors, res.FirstError, tc.allowed, tc.denied)
				}
			})
		}
	}
}

// TestWeirUnknownLimitIsAnError checks that a request the node refuses
// counts as an error, not as a denial.
func TestWeirUnknownLimitIsAnError(t *testing.T) {
	n := startNode(t)
	ctx := context.Background()
	for _, mk := range []func() (target, error){
		func() (target, error) { return newGRPCTarget([]string{n.GRPCAddr()}, 1, "nope", 1, 1, false) },
		func() (target, error) { return newHTTPTarget([]string{n.HTTPAddr()}, 1, "nope", 1, 1) },
	} {
		tgt, err := mk()
		if err != nil {
			t.Fatal(err)
		}
		res, err := runCell(ctx, tgt, cellConfig{Concurrency: 1, Requests: 3, Keys: 1, Timeout: 10 * time.Second})
		_ = tgt.close()
		if err != nil {
			t.Fatal(err)
		}
		if res.Errors != 3 || res.Decisions != 0 || res.FirstError == "" {
			t.Fatalf("unknown limit: decisions %d errors %d (%q), want 0 and 3", res.Decisions, res.Errors, res.FirstError)
		}
	}
}

// TestRotate checks rotation over gRPC (-rotate) and over RESP on two
// separate nodes, each with its own bench-small bucket (capacity 100,
// clock frozen): one caller that rotates reaches both and gets 200 of 300
// allowed; one that does not reaches only the first and gets 100.
func TestRotate(t *testing.T) {
	open := map[string]func(a, b *node.Node, rotate bool) (target, error){
		"grpc": func(a, b *node.Node, rotate bool) (target, error) {
			return newGRPCTarget([]string{a.GRPCAddr(), b.GRPCAddr()}, 1, "bench-small", 1, 1, rotate)
		},
		"resp": func(a, b *node.Node, rotate bool) (target, error) {
			return newRESPTarget(context.Background(), []string{a.RESPAddr(), b.RESPAddr()}, "bench-small", 1, 1, 1, rotate)
		},
	}
	for proto, mk := range open {
		for _, tc := range []struct {
			rotate  bool
			allowed uint64
		}{{true, 200}, {false, 100}} {
			a, b := startRESPNode(t), startRESPNode(t)
			tgt, err := mk(a, b, tc.rotate)
			if err != nil {
				t.Fatal(err)
			}
			res, err := runCell(context.Background(), tgt, cellConfig{Concurrency: 1, Requests: 300, Keys: 1, Timeout: 10 * time.Second})
			_ = tgt.close()
			if err != nil {
				t.Fatal(err)
			}
			if res.Allowed != tc.allowed || res.Denied != 300-tc.allowed || res.Errors != 0 {
				t.Fatalf("%s, rotate %v: allowed/denied/errors = %d/%d/%d (%s), want %d/%d/0",
					proto, tc.rotate, res.Allowed, res.Denied, res.Errors, res.FirstError, tc.allowed, 300-tc.allowed)
			}
		}
	}
}
