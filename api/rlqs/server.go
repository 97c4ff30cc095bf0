package rlqs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weir-rl/weir/api"
)

// Config configures the quota server. Start from DefaultConfig; a zero
// field means its default.
type Config struct {
	// Domain is the only domain accepted; "" accepts any.
	Domain string
	// MaxKeyBytes bounds a limit name and a rendered key. Default 512.
	MaxKeyBytes int
	// MaxEntries bounds the entries of one bucket id. Default 16.
	MaxEntries int
	// MaxUsages bounds the bucket usages of one report. Default 1000.
	MaxUsages int
	// MaxBucketsPerStream bounds the buckets one stream tracks; a report
	// of a bucket beyond it is answered DENY_ALL for RefusedTTL and not
	// tracked. Default 10,000.
	MaxBucketsPerStream int
	// MaxBuckets bounds the buckets all streams track together, the same
	// way. Default 100,000.
	MaxBuckets int
	// MaxStreams bounds the open streams; one more is refused with
	// ResourceExhausted. Default 1000.
	MaxStreams int
	// Margin is the longest an answer may take to reach the proxy after
	// it is sent. Envoy counts an assignment's time to live from when it
	// receives it, so every assignment ends Margin before the allotment
	// it spends could end at the owner. Default 500ms.
	Margin time.Duration
	// RefusedTTL is the time to live of the DENY_ALL sent for a bucket
	// Weir cannot assign (an unknown limit, a limit without allotments, a
	// bucket the caller's token may not use, a bucket over the bounds).
	// Default 10s.
	RefusedTTL time.Duration
	// AbandonAfter is how long a bucket may report no request before the
	// server abandons it (abandon_action) and forgets it. Default 60s.
	AbandonAfter time.Duration
	// MinRefresh is the shortest interval between two allotment asks for
	// one bucket: reports in between only count demand. Default 100ms.
	MinRefresh time.Duration
	// DefaultTTL is the allotment TTL assumed for a bucket's first ask,
	// before the owner has said the limit's. Default 10s.
	DefaultTTL time.Duration
	// Parallel bounds the allotment asks of one report in flight at once.
	// Default 16.
	Parallel int
	// Now is the server's clock. Nil is time.Now.
	Now func() time.Time
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{
		MaxKeyBytes: api.DefaultMaxKeyBytes, MaxEntries: 16, MaxUsages: 1000,
		MaxBucketsPerStream: 10_000, MaxBuckets: 100_000, MaxStreams: 1000,
		Margin: 500 * time.Millisecond, RefusedTTL: 10 * time.Second, AbandonAfter: time.Minute,
		MinRefresh: 100 * time.Millisecond, DefaultTTL: 10 * time.Second, Parallel: 16,
	}
}

// withDefaults fills zero fields from DefaultConfig.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	pick := func(v *int, def int) {
		if *v <= 0 {
			*v = def
		}
	}
	pickD := func(v *time.Duration, def time.Duration) {
		if *v <= 0 {
			*v = def
		}
	}
	pick(&c.MaxKeyBytes, d.MaxKeyBytes)
	pick(&c.MaxEntries, d.MaxEntries)
	pick(&c.MaxUsages, d.MaxUsages)
	pick(&c.MaxBucketsPerStream, d.MaxBucketsPerStream)
	pick(&c.MaxBuckets, d.MaxBuckets)
	pick(&c.MaxStreams, d.MaxStreams)
	pick(&c.Parallel, d.Parallel)
	pickD(&c.Margin, d.Margin)
	pickD(&c.RefusedTTL, d.RefusedTTL)
	pickD(&c.AbandonAfter, d.AbandonAfter)
	pickD(&c.MinRefresh, d.MinRefresh)
	pickD(&c.DefaultTTL, d.DefaultTTL)
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Validate reports a negative field. It changes nothing.
func (c Config) Validate() error {
	for _, v := range []int{c.MaxKeyBytes, c.MaxEntries, c.MaxUsages, c.MaxBucketsPerStream, c.MaxBuckets, c.MaxStreams, c.Parallel} {
		if v < 0 {
			return errors.New("rlqs: a Config bound is negative")
		}
	}
	for _, d := range []time.Duration{c.Margin, c.RefusedTTL, c.AbandonAfter, c.MinRefresh, c.DefaultTTL} {
		if d < 0 {
			return errors.New("rlqs: a Config duration is negative")
		}
	}
	return nil
}

// Server is Envoy's rate limit quota service on a Decider. Its counters
// are atomic; everything else is per stream. Safe for concurrent use.
type Server struct {
	rlqsv3.UnimplementedRateLimitQuotaServiceServer
	d         api.Decider
	cfg       Config
	streams   atomic.Int64 // open streams
	buckets   atomic.Int64 // buckets tracked by all streams
	drain     chan struct{}
	drainOnce sync.Once
}

// NewServer returns Envoy's envoy.service.rate_limit_quota.v3
// RateLimitQuotaService served from d's allotments (Decider.Allot), for
// rlqsv3.RegisterRateLimitQuotaServiceServer. Zero fields of cfg mean
// their defaults. The contract is the package documentation.
func NewServer(d api.Decider, cfg Config) *Server {
	return &Server{d: d, cfg: cfg.withDefaults(), drain: make(chan struct{})}
}

// Register registers NewServer(d, cfg) on s, typically the gRPC server of
// weir.v1.Limiter and Envoy's rate limit service, and returns it.
func Register(s grpc.ServiceRegistrar, d api.Decider, cfg Config) *Server {
	srv := NewServer(d, cfg)
	rlqsv3.RegisterRateLimitQuotaServiceServer(s, srv)
	return srv
}

// Drain ends every stream, open and new, with Unavailable: Envoy keeps its
// quota until it expires and reconnects, to another node when this one is
// leaving. A graceful gRPC stop would otherwise wait for streams that
// Envoy never closes. Calling it twice is harmless.
func (s *Server) Drain() { s.drainOnce.Do(func() { close(s.drain) }) }

// received is one Recv's result.
type received struct {
	msg *rlqsv3.RateLimitQuotaUsageReports
	err error
}

// StreamRateLimitQuotas implements the service: one stream is one holder
// of allotments, its reports answered in turn. When it ends, broken or
// closed, its allotments are left to expire at their owners (the proxy
// may still apply its assignments until they expire). A goroutine of the
// stream's own receives its messages, so that Drain ends a stream waiting
// for one; it ends as soon as the stream does.
func (s *Server) StreamRateLimitQuotas(ss grpc.BidiStreamingServer[rlqsv3.RateLimitQuotaUsageReports, rlqsv3.RateLimitQuotaResponse]) error {
	if s.streams.Add(1) > int64(s.cfg.MaxStreams) {
		s.streams.Add(-1)
		return status.Errorf(codes.ResourceExhausted, "rlqs: %d streams open, the maximum", s.cfg.MaxStreams)
	}
	defer s.streams.Add(-1)
	st := newStream(s, holderID())
	defer st.close()
	ctx, cancel := context.WithCancel(ss.Context())
	defer cancel()
	in := make(chan received)
	// The receiver cannot be waited for here: Recv returns only once the
	// stream's context ends, after this handler returns; then it sees
	// ctx done and returns.
	go func() {
		for {
			msg, err := ss.Recv()
			select {
			case in <- received{msg, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	for {
		var r received
		select {
		case <-s.drain:
			return status.Error(codes.Unavailable, "rlqs: the server is shutting down; reconnect")
		case <-ctx.Done(): // the stream broke
			return status.FromContextError(ctx.Err()).Err()
		case r = <-in:
		}
		if errors.Is(r.err, io.EOF) {
			return nil
		}
		if r.err != nil {
			return r.err
		}
		actions, err := st.handle(ctx, r.msg)
		if err != nil {
			return status.Error(codes.InvalidArgument, err.Error())
		}
		if len(actions) == 0 {
			continue
		}
		if err := ss.Send(&rlqsv3.RateLimitQuotaResponse{BucketAction: actions}); err != nil {
			return err
		}
	}
}

// holderID is a new stream's holder name: "rlqs:" and 16 random hex
// digits, so a reconnecting proxy never inherits a stream's holdings.
func holderID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return "rlqs:" + hex.EncodeToString(b[:])
}
