package node

import (
	"context"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/weir-rl/weir/api/weirv1"
	"github.com/weir-rl/weir/internal/tracing"
	"github.com/weir-rl/weir/internal/tracing/otlptest"
)

// Caller trace contexts: two sampled ones (HTTP, gRPC) and one a caller
// chose not to sample.
const (
	httpTrace    = "0af7651916cd43dd8448eb211c80319c"
	httpParent   = "b7ad6b7169203331"
	grpcTrace    = "4bf92f3577b34da6a3ce929d0e0e4736"
	grpcParent   = "00f067aa0ba902b7"
	unsampledTID = "11111111111111111111111111111111"
	envoyTrace   = "22222222222222222222222222222222"
	envoyParent  = "3333333333333333"
)

// startTracedCluster starts two simulated members exporting to a fresh
// in-process OTLP receiver, with the sampling ratio given, and returns a
// key of limit "hot" that n2 owns.
func startTracedCluster(t *testing.T, ratio float64) (*simCluster, *otlptest.Receiver, string) {
	t.Helper()
	recv, err := otlptest.Start("127.0.0.1:0", false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(recv.Stop) // after the nodes' cleanups: they flush to it
	c := newSimCluster(t)
	c.tracing = tracing.Config{Endpoint: recv.Endpoint(), SampleRatio: ratio}
	c.start(2)
	return c, recv, keyOwnedBy(c.nodes["n1"], "hot", "n2", "trace")
}

// httpTake posts one take of limit hot to n's HTTP API with the given
// traceparent header ("" for none).
func httpTake(t *testing.T, n *Node, key, traceparent string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+n.HTTPAddr()+"/v1/take",
		strings.NewReader(`{"checks":[{"limit":"hot","key":"`+key+`","cost":1}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if traceparent != "" {
		req.Header.Set("traceparent", traceparent)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /v1/take = %d", resp.StatusCode)
	}
}

// grpcTake sends one gRPC Take of limit hot to n with traceparent metadata.
func grpcTake(t *testing.T, n *Node, key, traceparent string) {
	t.Helper()
	conn, err := grpc.NewClient(n.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx := metadata.AppendToOutgoingContext(context.Background(), "traceparent", traceparent)
	resp, err := weirv1.NewLimiterClient(conn).Take(ctx, &weirv1.TakeRequest{Checks: []*weirv1.Check{{Limit: "hot", Key: key, Cost: 1}}})
	if err != nil || !resp.GetAllowed() {
		t.Fatalf("Take = %v, %v; want allowed", resp, err)
	}
}

// envoyTake asks n's Envoy rate limit service for one take of limit hot
// with traceparent metadata, as Envoy sends it when it traces.
func envoyTake(t *testing.T, n *Node, traceparent string) {
	t.Helper()
	conn, err := grpc.NewClient(n.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx := metadata.AppendToOutgoingContext(context.Background(), "traceparent", traceparent)
	req := &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*rlcommon.RateLimitDescriptor{{
		Entries: []*rlcommon.RateLimitDescriptor_Entry{{Key: "generic_key", Value: "hot"}, {Key: "tenant", Value: "acme"}},
	}}}
	if resp, err := rlsv3.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx, req); err != nil || resp.GetOverallCode() != rlsv3.RateLimitResponse_OK {
		t.Fatalf("ShouldRateLimit = %v, %v; want OK", resp, err)
	}
}

// stopAll shuts every member down, which flushes its spans to the
// receiver: after it, the receiver holds every span the take produced.
func (c *simCluster) stopAll() {
	c.t.Helper()
	for _, n := range c.nodes {
		if err := n.Shutdown(context.Background()); err != nil {
			c.t.Fatal(err)
		}
	}
}

// A take entering n1 for a key n2 owns is one trace: the caller's span is
// the parent of n1's decision, which is the parent of n1's forward, which
// is the parent of n2's owner step; over HTTP and over gRPC (and Envoy's
// rate limit service has its decision under Envoy's span). With ratio 0,
// a take without a traceparent and one whose caller did not sample it
// export nothing.
func TestTracingFollowsATakeToItsOwner(t *testing.T) {
	c, recv, key := startTracedCluster(t, 0)
	n1 := c.nodes["n1"]
	httpTake(t, n1, key, "")                                      // no parent, ratio 0: not traced
	httpTake(t, n1, key, "00-"+unsampledTID+"-"+httpParent+"-00") // the caller did not sample it
	httpTake(t, n1, key, "00-"+httpTrace+"-"+httpParent+"-01")    // traced over HTTP
	grpcTake(t, n1, key, "00-"+grpcTrace+"-"+grpcParent+"-01")    // traced over gRPC
	httpTake(t, c.nodes["n2"], key, "")                           // at the owner, untraced
	envoyTake(t, n1, "00-"+envoyTrace+"-"+envoyParent+"-01")      // Envoy's rate limit service
	c.stopAll()

	byTrace := map[string][]otlptest.Span{}
	for _, s := range recv.Spans() {
		id := hex.EncodeToString(s.GetTraceId())
		byTrace[id] = append(byTrace[id], s)
		for _, kv := range s.GetAttributes() {
			if strings.Contains(kv.GetValue().String(), key) {
				t.Errorf("span %s attribute %s holds the key", s.GetName(), kv.GetKey())
			}
		}
	}
	if len(byTrace) != 3 {
		t.Fatalf("spans of %d traces exported; want the 3 sampled ones only: %v", len(byTrace), byTrace)
	}
	var envoyDecision bool
	for _, s := range byTrace[envoyTrace] {
		envoyDecision = envoyDecision || (s.GetName() == tracing.SpanDecision && hex.EncodeToString(s.GetParentSpanId()) == envoyParent)
	}
	if !envoyDecision {
		t.Errorf("Envoy's trace %v has no decision span under Envoy's", byTrace[envoyTrace])
	}
	for _, want := range []struct{ trace, parent string }{{httpTrace, httpParent}, {grpcTrace, grpcParent}} {
		checkChain(t, byTrace[want.trace], want.parent)
	}
}

// checkChain asserts spans are exactly decision (n1, child of parent) →
// forward (n1) → owner (n2), each with its attributes.
func checkChain(t *testing.T, spans []otlptest.Span, parent string) {
	t.Helper()
	byName := map[string]otlptest.Span{}
	for _, s := range spans {
		byName[s.GetName()] = s
	}
	if len(spans) != 3 || len(byName) != 3 {
		t.Fatalf("trace has %d spans %v; want weir.take, weir.forward, weir.owner", len(spans), byName)
	}
	dec, fwd, own := byName[tracing.SpanDecision], byName[tracing.SpanForward], byName[tracing.SpanOwner]
	for _, link := range []struct {
		child   otlptest.Span
		parent  string
		node    string
		attrs   map[string]string
		display string
	}{
		{dec, parent, "n1", map[string]string{"weir.limit": "hot", "weir.allowed": "true", "weir.source": "forward", "weir.checks": "1"}, "decision"},
		{fwd, hex.EncodeToString(dec.GetSpanId()), "n1", map[string]string{"weir.op": "take", "weir.peer": "10.0.0.2:7947"}, "forward"},
		{own, hex.EncodeToString(fwd.GetSpanId()), "n2", map[string]string{"weir.op": "take", "weir.from": "n1", "weir.limit": "hot", "weir.allowed": "true", "weir.source": "owner", "weir.batch_size": "1"}, "owner"},
	} {
		if got := hex.EncodeToString(link.child.GetParentSpanId()); got != link.parent {
			t.Errorf("%s span's parent = %s; want %s", link.display, got, link.parent)
		}
		if got := link.child.Resource["service.instance.id"]; got != link.node {
			t.Errorf("%s span recorded by %q; want %s", link.display, got, link.node)
		}
		link.attrs["weir.node"] = link.node
		for k, want := range link.attrs {
			if got, _ := link.child.Attr(k); got != want {
				t.Errorf("%s span %s = %q; want %q", link.display, k, got, want)
			}
		}
	}
}

// With a ratio of 1, a take without a traceparent starts a trace of its
// own: the ratio decides roots, and the owner follows the forward.
func TestTracingRatioOneTracesRoots(t *testing.T) {
	c, recv, key := startTracedCluster(t, 1)
	httpTake(t, c.nodes["n1"], key, "")
	c.stopAll()
	spans := recv.Spans()
	if len(spans) != 3 {
		t.Fatalf("%d spans exported; want decision, forward and owner", len(spans))
	}
	for _, s := range spans {
		if s.GetName() == tracing.SpanDecision && len(s.GetParentSpanId()) != 0 {
			t.Errorf("the decision span has a parent %x; want a root", s.GetParentSpanId())
		}
	}
}
