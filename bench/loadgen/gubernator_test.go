package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// TestGuberLimitOf checks that the suite's limits become Gubernator token
// buckets of the same capacity and refill, and that a refill period that
// is not whole milliseconds is refused.
func TestGuberLimitOf(t *testing.T) {
	for _, c := range []struct {
		b    bucketSpec
		want guberLimit
	}{
		{bucketSpec{Capacity: 1e12, N: 1e12, Per: time.Second}, guberLimit{Name: "x", Limit: 1e12, DurationMs: 1000, Hits: 1}},
		{bucketSpec{Capacity: 1e7, N: 1, Per: time.Second}, guberLimit{Name: "x", Limit: 1e7, DurationMs: 1e10, Hits: 1}},
		{bucketSpec{Capacity: 100, N: 100, Per: time.Minute}, guberLimit{Name: "x", Limit: 100, DurationMs: 60000, Hits: 1}},
	} {
		got, err := guberLimitOf("x", c.b, 1)
		if err != nil || got != c.want {
			t.Errorf("%+v: got %+v, %v; want %+v", c.b, got, err, c.want)
		}
	}
	for _, b := range []bucketSpec{
		{Capacity: 1, N: 3, Per: time.Second},        // a refill every 333.3 ms
		{Capacity: 10, N: 10, Per: time.Microsecond}, // below a millisecond
		{Capacity: 0, N: 1, Per: time.Second},
	} {
		if got, err := guberLimitOf("x", b, 1); err == nil {
			t.Errorf("%+v: got %+v, want an error", b, got)
		}
	}
}

// TestGuberRequestEncoding decodes the hand-encoded GetRateLimitsReq
// field by field against gubernator.proto's numbering.
func TestGuberRequestEncoding(t *testing.T) {
	l := guberLimit{Name: "bench", Limit: 1e12, DurationMs: 1000, Hits: 1}
	b := l.appendRequest([]byte("keep"), "k42")
	if string(b[:4]) != "keep" {
		t.Fatal("appendRequest overwrote its buffer")
	}
	b = b[4:]
	num, typ, n := protowire.ConsumeTag(b)
	if num != 1 || typ != protowire.BytesType || n < 0 {
		t.Fatalf("outer tag %d %d", num, typ)
	}
	inner, m := protowire.ConsumeBytes(b[n:])
	if m < 0 || n+m != len(b) {
		t.Fatalf("outer message: %d of %d bytes", n+m, len(b))
	}
	strs, ints := map[protowire.Number]string{}, map[protowire.Number]uint64{}
	for len(inner) > 0 {
		num, typ, n := protowire.ConsumeTag(inner)
		inner = inner[n:]
		switch typ {
		case protowire.BytesType:
			v, m := protowire.ConsumeBytes(inner)
			strs[num], inner = string(v), inner[m:]
		case protowire.VarintType:
			v, m := protowire.ConsumeVarint(inner)
			ints[num], inner = v, inner[m:]
		default:
			t.Fatalf("field %d of type %d", num, typ)
		}
	}
	if strs[1] != "bench" || strs[2] != "k42" || ints[3] != 1 || ints[4] != 1e12 || ints[5] != 1000 || len(strs)+len(ints) != 5 {
		t.Errorf("fields: %v %v", strs, ints)
	}
}

// guberResp encodes a GetRateLimitsResp of the given answers, each a
// status and an error text.
func guberResp(answers ...[2]any) []byte {
	var b []byte
	for _, a := range answers {
		var r []byte
		r = protowire.AppendTag(r, 1, protowire.VarintType)
		r = protowire.AppendVarint(r, uint64(a[0].(int)))
		r = protowire.AppendTag(r, 2, protowire.VarintType) // limit, skipped
		r = protowire.AppendVarint(r, 7)
		if e := a[1].(string); e != "" {
			r = protowire.AppendTag(r, 5, protowire.BytesType)
			r = protowire.AppendString(r, e)
		}
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendBytes(b, r)
	}
	return b
}

// TestGuberAllowed reads answers: under and over the limit, an error, the
// wrong number of answers, and bytes that are not protobuf.
func TestGuberAllowed(t *testing.T) {
	if ok, err := guberAllowed(guberResp([2]any{0, ""})); !ok || err != nil {
		t.Errorf("UNDER_LIMIT: %v %v", ok, err)
	}
	if ok, err := guberAllowed(guberResp([2]any{1, ""})); ok || err != nil {
		t.Errorf("OVER_LIMIT: %v %v", ok, err)
	}
	if _, err := guberAllowed(guberResp([2]any{0, "no such limit"})); err == nil || !strings.Contains(err.Error(), "no such limit") {
		t.Errorf("error answer: %v", err)
	}
	for _, b := range [][]byte{nil, guberResp([2]any{0, ""}, [2]any{0, ""}), {0xff, 0xff}, {0x0a, 0x05, 0x08}} {
		if _, err := guberAllowed(b); err == nil {
			t.Errorf("%x: want an error", b)
		}
	}
}

// TestGuberJSONAllowed reads the gateway's JSON answers.
func TestGuberJSONAllowed(t *testing.T) {
	var r guberJSONResp
	for body, want := range map[string]bool{
		`{"responses":[{"status":"UNDER_LIMIT","limit":"5","remaining":"4","reset_time":"1","error":"","metadata":{}}]}`: true,
		`{"responses":[{"status":"OVER_LIMIT","limit":"5","remaining":"0","error":""}]}`:                                 false,
	} {
		if ok, err := guberJSONAllowed([]byte(body), &r); ok != want || err != nil {
			t.Errorf("%s: %v %v", body, ok, err)
		}
	}
	for _, body := range []string{`{"responses":[]}`, `{"responses":[{"status":"UNDER_LIMIT","error":"bad"}]}`, `{"responses":[{"status":"MAYBE"}]}`, `nope`} {
		if _, err := guberJSONAllowed([]byte(body), &r); err == nil {
			t.Errorf("%s: want an error", body)
		}
	}
}

// TestGubernatorWhyNot says why a Gubernator binary cannot run.
func TestGubernatorWhyNot(t *testing.T) {
	dir := t.TempDir()
	exe, plain := filepath.Join(dir, "gubernator"), filepath.Join(dir, "plain")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(plain, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if why := gubernatorWhyNot(exe); why != "" {
		t.Errorf("executable: %q", why)
	}
	for _, bin := range []string{"", filepath.Join(dir, "missing"), plain, dir} {
		if gubernatorWhyNot(bin) == "" {
			t.Errorf("%q: want a reason", bin)
		}
	}
	if err := os.WriteFile(exe+".version", []byte("v9 (test)\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if v := gubernatorVersion(exe); v != "v9 (test)" {
		t.Errorf("version %q", v)
	}
}

// TestGubernatorCluster starts three real Gubernator nodes, as the suite
// does, and takes through both APIs until a small limit denies. It needs
// the binary `make gubernator` builds, named by LOADGEN_GUBERNATOR (for
// example LOADGEN_GUBERNATOR=$PWD/bin/gubernator); without it the test is
// skipped, since building Gubernator is not part of Weir's own build.
func TestGubernatorCluster(t *testing.T) {
	bin := os.Getenv("LOADGEN_GUBERNATOR")
	if bin == "" {
		t.Skip("LOADGEN_GUBERNATOR is not set (make gubernator builds bin/gubernator)")
	}
	if why := gubernatorWhyNot(bin); why != "" {
		t.Fatal(why)
	}
	ctx := context.Background()
	env := &suiteEnv{dir: t.TempDir()}
	defer env.close()
	nodes, err := startGubernatorTrio(ctx, bin, env.dir, env)
	if err != nil {
		t.Fatal(err)
	}
	addrs := func(grpc bool) []string {
		var out []string
		for _, n := range nodes {
			if grpc {
				out = append(out, n.grpcAddr)
			} else {
				out = append(out, n.httpAddr)
			}
		}
		return out
	}
	small := guberLimit{Name: "small", Limit: 3, DurationMs: 600_000, Hits: 1}
	hg, err := newGuberGRPCTarget(addrs(true), small)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = hg.close() }()
	hh, err := newGuberHTTPTarget(addrs(false), 4, small)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = hh.close() }()
	// Key 7 through every node, alternating the APIs: three takes are
	// allowed wherever they land, the fourth and fifth are denied.
	var got []bool
	for i := range 5 {
		var tg target = hg
		if i%2 == 1 {
			tg = hh
		}
		c, err := tg.newCaller(ctx, i)
		if err != nil {
			t.Fatal(err)
		}
		ok, err := c.take(ctx, 7)
		if err != nil {
			t.Fatalf("take %d: %v", i, err)
		}
		got = append(got, ok)
	}
	if want := []bool{true, true, true, false, false}; !slices.Equal(got, want) {
		t.Errorf("takes on one key: %v, want %v", got, want)
	}
}

// TestStartGubernatorSkips checks when the suite does not start
// Gubernator: no Gubernator target selected (nothing to say), or no
// binary (a reason for the header's "not run" lines).
func TestStartGubernatorSkips(t *testing.T) {
	ctx := context.Background()
	missing := filepath.Join(t.TempDir(), "gubernator")
	env := &suiteEnv{}
	if err := startGubernator(ctx, suiteConfig{GubernatorBin: missing, Targets: []string{"weir-grpc"}}, t.TempDir(), env); err != nil || env.guberWhyNot != "" || env.gubernator != nil {
		t.Errorf("not selected: %v, %q, %d nodes", err, env.guberWhyNot, len(env.gubernator))
	}
	for _, targets := range [][]string{nil, {"gubernator3-grpc"}} {
		env := &suiteEnv{}
		err := startGubernator(ctx, suiteConfig{GubernatorBin: missing, Targets: targets}, t.TempDir(), env)
		if err != nil || !strings.Contains(env.guberWhyNot, "make gubernator") || env.gubernator != nil {
			t.Errorf("targets %v without a binary: %v, %q, %d nodes", targets, err, env.guberWhyNot, len(env.gubernator))
		}
	}
}
