package tracing

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Span names, one per step of a decision.
const (
	// SpanDecision is the decision at the node a request arrived at.
	SpanDecision = "weir.take"
	// SpanForward is the forward of one request to its key's owner.
	SpanForward = "weir.forward"
	// SpanOwner is the owner's step for one forwarded request.
	SpanOwner = "weir.owner"
)

// Attribute keys. None of them holds a key: keys are tenant data.
const (
	AttrNode      = attribute.Key("weir.node")       // the node recording the span
	AttrLimit     = attribute.Key("weir.limit")      // the first check's limit
	AttrChecks    = attribute.Key("weir.checks")     // how many checks the request has
	AttrAllowed   = attribute.Key("weir.allowed")    // the decision
	AttrSource    = attribute.Key("weir.source")     // owner, forward, fallback or allotment
	AttrOp        = attribute.Key("weir.op")         // the peer op: take, refund, acquire, ...
	AttrPeer      = attribute.Key("weir.peer")       // the owner's peer address (forward)
	AttrFrom      = attribute.Key("weir.from")       // the sender's node name (owner)
	AttrBatchSize = attribute.Key("weir.batch_size") // requests in the batch RPC (owner)
	AttrNotOwner  = attribute.Key("weir.not_owner")  // the owner's ring disagreed
)

// Tracer starts Weir's spans. The zero Tracer is off: the null object, whose
// methods return their context unchanged and a zero Span. Methods are safe
// for concurrent use.
type Tracer struct {
	cfg  Config
	tp   *sdktrace.TracerProvider // nil when off
	tr   trace.Tracer
	node attribute.KeyValue
	// roots is false when no span can be sampled without a sampled
	// parent: ratio 0, or ratio 0 ignoring parents (nothing at all).
	roots bool

	mu      sync.Mutex // guards started
	started bool

	server, client []trace.SpanStartOption
}

// New returns a Tracer for the node named node, off when cfg has no
// endpoint. It starts no goroutine and opens no connection; spans started
// before Start are recorded but exported nowhere.
func New(cfg Config, node string) (*Tracer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if !cfg.Enabled() {
		return &Tracer{}, nil
	}
	name := cfg.ServiceName
	if name == "" {
		name = "weir"
	}
	sampler := sdktrace.TraceIDRatioBased(cfg.SampleRatio)
	if !cfg.IgnoreParent {
		sampler = sdktrace.ParentBased(sampler)
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithSampler(sampler),
		sdktrace.WithResource(resource.NewSchemaless(
			attribute.String("service.name", name),
			attribute.String("service.instance.id", node),
		)),
	)
	return &Tracer{
		cfg: cfg, tp: tp, tr: tp.Tracer("github.com/weir-rl/weir"),
		node:   AttrNode.String(node),
		roots:  cfg.SampleRatio > 0,
		server: []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer)},
		client: []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient)},
	}, nil
}

// Start opens the OTLP/gRPC exporter (which connects lazily) and the batch
// processor that feeds it. Off, it does nothing. Call it once.
func (t *Tracer) Start(ctx context.Context) error {
	if t.tp == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.started {
		return errors.New("tracing: already started")
	}
	exp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpointURL(t.cfg.Endpoint))
	if err != nil {
		return fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	t.tp.RegisterSpanProcessor(sdktrace.NewBatchSpanProcessor(exp))
	t.started = true
	return nil
}

// Shutdown exports the spans that have ended and not yet left, within ctx,
// and stops the exporter. Spans ended later are dropped. Off, or never
// started, it does nothing.
func (t *Tracer) Shutdown(ctx context.Context) error {
	if t.tp == nil {
		return nil
	}
	if err := t.tp.Shutdown(ctx); err != nil {
		return fmt.Errorf("tracing: shutdown: %w", err)
	}
	return nil
}

// Decision starts the decision span for a request that arrived here, as a
// child of the caller's trace context in ctx (see FromHTTP, FromGRPC). When
// the span could not be sampled it starts nothing and returns ctx as it is.
func (t *Tracer) Decision(ctx context.Context) (context.Context, Span) {
	if !t.roots && (t.cfg.IgnoreParent || !trace.SpanContextFromContext(ctx).IsSampled()) {
		return ctx, Span{} // also the zero Tracer: roots is false, no parent
	}
	if t.tr == nil {
		return ctx, Span{}
	}
	ctx, s := t.tr.Start(ctx, SpanDecision, t.server...)
	if !s.IsRecording() {
		return ctx, Span{}
	}
	s.SetAttributes(t.node)
	return ctx, Span{s: s}
}

// Forward starts the span of one request forwarded to the owner at peer,
// a child of the recording span in ctx, and returns the traceparent the
// request carries to the owner. Without a recording span in ctx it starts
// nothing and returns "".
func (t *Tracer) Forward(ctx context.Context, peer, op string) (context.Context, Span, string) {
	parent := trace.SpanFromContext(ctx)
	if t.tr == nil || !parent.IsRecording() {
		return ctx, Span{}, ""
	}
	ctx, s := t.tr.Start(ctx, SpanForward, t.client...)
	s.SetAttributes(t.node, AttrPeer.String(peer), AttrOp.String(op))
	return ctx, Span{s: s}, FormatParent(s.SpanContext())
}

// Owner starts the owner's span for one forwarded request whose sender
// sent traceparent (see Forward); "" (the sender's span was not sampled)
// or a malformed one starts nothing. batch is the number of requests in
// the batch RPC that carried it, from the sender's node name.
func (t *Tracer) Owner(ctx context.Context, traceparent, op, from string, batch int) (context.Context, Span) {
	if t.tr == nil || traceparent == "" {
		return ctx, Span{}
	}
	sc, ok := ParseParent(traceparent)
	if !ok {
		return ctx, Span{}
	}
	ctx, s := t.tr.Start(trace.ContextWithRemoteSpanContext(ctx, sc), SpanOwner, t.server...)
	if !s.IsRecording() {
		return ctx, Span{}
	}
	s.SetAttributes(t.node, AttrOp.String(op), AttrFrom.String(from), AttrBatchSize.Int(batch))
	return ctx, Span{s: s}
}

// Span is one started span, or (its zero value) none: every method of the
// zero Span does nothing. End it exactly once with one of its End methods.
type Span struct {
	s trace.Span // nil: not sampled, or tracing off
}

// Recording reports whether the span is recorded (sampled).
func (s Span) Recording() bool { return s.s != nil }

// fail marks the span failed with err, whose text holds no key (an
// *api.Error's detail never does; transport errors name peers).
func (s Span) fail(err error) {
	if err != nil {
		s.s.SetStatus(codes.Error, err.Error())
	}
}
