package tracing

import (
	"context"
	"net/http"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/tap"

	"github.com/weir-rl/weir/api"
)

const (
	sampled   = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	unsampled = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"
)

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		cfg Config
		ok  bool
	}{
		{Config{}, true},
		{Config{Endpoint: "http://127.0.0.1:4317"}, true},
		{Config{Endpoint: "https://collector:4317", SampleRatio: 1}, true},
		{Config{Endpoint: "collector:4317"}, false}, // no scheme
		{Config{Endpoint: "grpc://collector:4317"}, false},
		{Config{Endpoint: "http://"}, false},
		{Config{SampleRatio: -0.1}, false},
		{Config{SampleRatio: 1.5}, false},
	} {
		if err := tc.cfg.Validate(); (err == nil) != tc.ok {
			t.Errorf("%+v.Validate() = %v; want ok %v", tc.cfg, err, tc.ok)
		}
		if _, err := New(tc.cfg, "n1"); (err == nil) != tc.ok {
			t.Errorf("New(%+v) = %v; want ok %v", tc.cfg, err, tc.ok)
		}
	}
}

// The zero Tracer, and one on at ratio 0 for a request without a sampled
// parent, return the context they were given and allocate nothing.
func TestOffAndUnsampledCostNothing(t *testing.T) {
	on, err := New(Config{Endpoint: "http://127.0.0.1:1"}, "n1") // never started: nothing is sent
	if err != nil {
		t.Fatal(err)
	}
	unsampledCtx := FromHTTP(context.Background(), http.Header{"Traceparent": {unsampled}})
	for name, tc := range map[string]struct {
		tr  *Tracer
		ctx context.Context
	}{
		"off":                {&Tracer{}, context.Background()},
		"off, sampled":       {&Tracer{}, FromHTTP(context.Background(), http.Header{"Traceparent": {sampled}})},
		"ratio 0, no parent": {on, context.Background()},
		"ratio 0, unsampled": {on, unsampledCtx},
	} {
		checks := []api.Check{{Limit: "l", Key: "k", Cost: 1}}
		allocs := testing.AllocsPerRun(100, func() {
			ctx, span := tc.tr.Decision(tc.ctx)
			fctx, fspan, parent := tc.tr.Forward(ctx, "peer", "take")
			fspan.EndForward(nil, false)
			_, ospan := tc.tr.Owner(fctx, parent, "take", "n1", 1)
			ospan.EndOwner(checks, true, false, "")
			span.EndTake(checks, api.TakeResponse{Allowed: true}, nil)
			if ctx != tc.ctx || span.Recording() || parent != "" {
				t.Fatalf("%s: a span was started", name)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per decision; want 0", name, allocs)
		}
	}
}

// On, a sampled caller's context is recorded: the decision is its child,
// the forward the decision's, and the traceparent the forward hands on
// names the forward span.
func TestSampledParentIsFollowed(t *testing.T) {
	tr, err := New(Config{Endpoint: "http://127.0.0.1:1"}, "n1")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tr.Shutdown(context.Background()) }()
	ctx := FromHTTP(context.Background(), http.Header{"Traceparent": {sampled}})
	ctx, dec := tr.Decision(ctx)
	if !dec.Recording() {
		t.Fatal("a sampled parent's decision is not recorded")
	}
	_, fwd, parent := tr.Forward(ctx, "10.0.0.2:7947", "take")
	sc, ok := ParseParent(parent)
	if !ok || sc.TraceID().String() != "0af7651916cd43dd8448eb211c80319c" || !sc.IsSampled() ||
		sc.SpanID() != fwd.s.SpanContext().SpanID() {
		t.Fatalf("forward's traceparent %q = %v; want the forward span in the caller's trace", parent, sc)
	}
	_, own := tr.Owner(context.Background(), parent, "take", "n1", 3)
	if !own.Recording() {
		t.Fatal("the owner did not record a sampled forward")
	}
	if _, bad := tr.Owner(context.Background(), "00-zz-1-01", "take", "n1", 1); bad.Recording() {
		t.Fatal("a malformed traceparent started an owner span")
	}
	own.EndOwner(nil, false, true, "unknown limit")
	fwd.EndForward(nil, false)
	dec.EndTake(nil, api.TakeResponse{}, nil)
}

// Ratio 1 starts roots; ignoring parents at ratio 0 records nothing even
// for a sampled caller.
func TestRatioAndIgnoreParent(t *testing.T) {
	root, _ := New(Config{Endpoint: "http://127.0.0.1:1", SampleRatio: 1}, "n1")
	if _, s := root.Decision(context.Background()); !s.Recording() {
		t.Error("ratio 1: a root decision is not recorded")
	}
	never, _ := New(Config{Endpoint: "http://127.0.0.1:1", IgnoreParent: true}, "n1")
	ctx := FromHTTP(context.Background(), http.Header{"Traceparent": {sampled}})
	if _, s := never.Decision(ctx); s.Recording() {
		t.Error("ratio 0 ignoring parents: a sampled caller's decision was recorded")
	}
}

func TestParentRoundTripAndGRPC(t *testing.T) {
	sc, ok := ParseParent(sampled)
	if !ok || FormatParent(sc) != sampled {
		t.Fatalf("ParseParent/FormatParent(%q) = %q, %v", sampled, FormatParent(sc), ok)
	}
	for _, bad := range []string{"", "garbage", "00-00000000000000000000000000000000-b7ad6b7169203331-01"} {
		if _, ok := ParseParent(bad); ok {
			t.Errorf("ParseParent(%q) ok; want rejected", bad)
		}
	}
	ctx, err := fromGRPC(context.Background(), &tap.Info{Header: metadata.Pairs("traceparent", sampled, "tracestate", "vendor=x")})
	got := trace.SpanContextFromContext(ctx)
	if err != nil || got.TraceID() != sc.TraceID() || !got.IsRemote() || got.TraceState().Get("vendor") != "x" {
		t.Fatalf("fromGRPC = %v, %v; want the caller's remote context with its tracestate", got, err)
	}
	plain := context.Background()
	if ctx, _ := fromGRPC(plain, &tap.Info{Header: metadata.Pairs("user-agent", "x")}); ctx != plain || FromHTTP(plain, http.Header{}) != plain {
		t.Fatal("without trace context the context changed")
	}
	if len((&Tracer{}).GRPCServerOptions()) != 0 {
		t.Fatal("tracing off installs a gRPC tap")
	}
}

// A decision span names who decided: the owner here, an owner elsewhere
// (forward), a local ceiling (fallback) or an allotment; an error sets
// the span's status and no outcome.
func TestEndTakeSource(t *testing.T) {
	tr, err := New(Config{Endpoint: "http://127.0.0.1:1", SampleRatio: 1}, "n1")
	if err != nil {
		t.Fatal(err)
	}
	rec := tracetest.NewSpanRecorder()
	tr.tp.RegisterSpanProcessor(rec)
	checks := []api.Check{{Limit: "l", Key: "secret-key", Cost: 1}, {Limit: "m", Key: "k2", Cost: 1}}
	for _, tc := range []struct {
		resp api.TakeResponse
		err  error
		want string
	}{
		{api.TakeResponse{Allowed: true, Results: []api.Result{{Source: api.SourceOwner}}}, nil, "owner"},
		{api.TakeResponse{Allowed: true, Forwarded: true, Results: []api.Result{{Source: api.SourceOwner}}}, nil, "forward"},
		{api.TakeResponse{Forwarded: true, Results: []api.Result{{Source: api.SourceFallback}}}, nil, "fallback"},
		{api.TakeResponse{Allowed: true, Results: []api.Result{{Source: api.SourceAllotment}}}, nil, "allotment"},
		{api.TakeResponse{}, &api.Error{Code: api.CodeInvalid, Detail: "unknown limit"}, ""},
	} {
		_, span := tr.Decision(context.Background())
		span.EndTake(checks, tc.resp, tc.err)
		ended := rec.Ended()
		s := ended[len(ended)-1]
		attrs := map[attribute.Key]attribute.Value{}
		for _, kv := range s.Attributes() {
			attrs[kv.Key] = kv.Value
			if kv.Value.String() == "secret-key" {
				t.Errorf("the key is in attribute %s", kv.Key)
			}
		}
		if got := attrs[AttrSource].AsString(); got != tc.want {
			t.Errorf("%+v: source %q; want %q", tc.resp, got, tc.want)
		}
		if attrs[AttrLimit].AsString() != "l" || attrs[AttrChecks].AsInt64() != 2 || attrs[AttrNode].AsString() != "n1" {
			t.Errorf("attributes %v; want limit l, 2 checks, node n1", attrs)
		}
		if (tc.err != nil) != (s.Status().Code == codes.Error) || (tc.err != nil && s.Status().Description != "unknown limit") {
			t.Errorf("status %v for error %v", s.Status(), tc.err)
		}
	}
}
