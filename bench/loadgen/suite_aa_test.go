package main

import (
	"context"
	"net"
	"slices"
	"testing"
	"time"
)

// The A/A ceilings start only when -targets names them, each target then
// stands just before the ceiling it copies and takes its ratio to it, and
// both are a second process of the same kind of empty server.
func TestAATargetsRunOnlyWhenNamed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := suiteConfig{Self: testSelf(t), Limit: "bench", Targets: []string{"ceiling-http", "weir-http"}}
	env := &suiteEnv{}
	if err := startAACeilings(ctx, cfg, t.TempDir(), env); err != nil {
		t.Fatal(err)
	}
	if len(env.aa) != 0 || len(aaSpecs(cfg, env, 16)) != 0 {
		t.Fatalf("A/A ceilings started though -targets %v names none", cfg.Targets)
	}

	cfg.Targets = append(cfg.Targets, "ceiling-grpc-aa", "ceiling-http-aa")
	defer env.close()
	if err := startAACeilings(ctx, cfg, t.TempDir(), env); err != nil {
		t.Fatal(err)
	}
	if len(env.aa) != len(aaCopies) {
		t.Fatalf("-targets %v: %d A/A ceilings started, want %d", cfg.Targets, len(env.aa), len(aaCopies))
	}
	for _, a := range env.aa {
		c := a.proc
		conn, err := net.Dial("tcp", c.addr)
		if err != nil {
			t.Fatalf("the A/A ceiling does not listen on %s: %v", c.addr, err)
		}
		_ = conn.Close()
	}
	specs := []suiteSpec{
		{info: targetInfo{Name: "ceiling-http"}},
		{info: targetInfo{Name: "weir-http", Ceiling: "ceiling-http"}},
		{info: targetInfo{Name: "ceiling-grpc"}},
		{info: targetInfo{Name: "weir-grpc", Ceiling: "ceiling-grpc"}},
	}
	var got []string
	for _, s := range beforeTheirCeilings(specs, aaSpecs(cfg, env, 16)) {
		got = append(got, s.info.Name+"÷"+s.info.Ceiling)
	}
	want := []string{
		"ceiling-http-aa÷ceiling-http", "ceiling-http÷", "weir-http÷ceiling-http",
		"ceiling-grpc-aa÷ceiling-grpc", "ceiling-grpc÷", "weir-grpc÷ceiling-grpc",
	}
	if !slices.Equal(got, want) {
		t.Errorf("targets in order (name÷ceiling): %v, want %v", got, want)
	}
}
