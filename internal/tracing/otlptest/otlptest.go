// Package otlptest is an in-process OTLP/gRPC trace receiver: a real gRPC
// server implementing the collector's TraceService, which records the
// spans it is sent (or, with Discard, only counts them). Tests assert on
// what a node exported; the load generator points a node at a discarding
// one to measure tracing's cost without a collector.
package otlptest

import (
	"context"
	"net"
	"strconv"
	"sync"

	collectorpb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
)

// Span is one exported span with the resource attributes of its sender.
type Span struct {
	*tracepb.Span
	// Resource holds the sender's string resource attributes
	// (service.name, service.instance.id).
	Resource map[string]string
}

// Attr returns the span's attribute key as a string (its string, bool or
// int value formatted), and whether it is set.
func (s Span) Attr(key string) (string, bool) {
	for _, kv := range s.GetAttributes() {
		if kv.GetKey() != key {
			continue
		}
		switch v := kv.GetValue().GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			return v.StringValue, true
		case *commonpb.AnyValue_BoolValue:
			return strconv.FormatBool(v.BoolValue), true
		case *commonpb.AnyValue_IntValue:
			return strconv.FormatInt(v.IntValue, 10), true
		}
		return kv.GetValue().String(), true
	}
	return "", false
}

// Receiver is a started OTLP/gRPC trace receiver. Its methods are safe for
// concurrent use.
type Receiver struct {
	collectorpb.UnimplementedTraceServiceServer
	gs      *grpc.Server
	ln      net.Listener
	discard bool

	mu    sync.Mutex // guards spans and count
	spans []Span
	count int
}

// Start listens on addr ("127.0.0.1:0" picks a free port) and serves until
// Stop. With discard it keeps no span, only their number.
func Start(addr string, discard bool) (*Receiver, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	r := &Receiver{gs: grpc.NewServer(), ln: ln, discard: discard}
	collectorpb.RegisterTraceServiceServer(r.gs, r)
	go func() { _ = r.gs.Serve(ln) }()
	return r, nil
}

// Endpoint is the URL a node's OTLP exporter is given: http://host:port.
func (r *Receiver) Endpoint() string { return "http://" + r.ln.Addr().String() }

// Stop stops serving at once.
func (r *Receiver) Stop() { r.gs.Stop() }

// Export implements the collector's TraceService.
func (r *Receiver) Export(_ context.Context, req *collectorpb.ExportTraceServiceRequest) (*collectorpb.ExportTraceServiceResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		res := map[string]string{}
		for _, kv := range rs.GetResource().GetAttributes() {
			res[kv.GetKey()] = kv.GetValue().GetStringValue()
		}
		for _, ss := range rs.GetScopeSpans() {
			r.count += len(ss.GetSpans())
			if r.discard {
				continue
			}
			for _, s := range ss.GetSpans() {
				r.spans = append(r.spans, Span{Span: s, Resource: res})
			}
		}
	}
	return &collectorpb.ExportTraceServiceResponse{}, nil
}

// Spans returns the spans received so far (none with discard).
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Count returns how many spans were received.
func (r *Receiver) Count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.count
}
