package envoyrls

import (
	"context"
	"errors"
	"math"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/api/grpcapi"
	"github.com/weir-rl/weir/internal/apitest"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/weir-rl/weir/api/weirv1"
)

// fuzzLimits are the bounds FuzzEnvoy converts requests with.
var fuzzLimits = inputLimits{maxKeyBytes: apitest.FuzzMaxKeyBytes, maxChecks: apitest.FuzzMaxChecks}

// newEnvoy serves f as both weir.v1.Limiter and Envoy's RateLimitService on
// one real listener on 127.0.0.1:0, and returns a client of each.
func newEnvoy(t *testing.T, f *apitest.Decider, cfg Config) (rlsv3.RateLimitServiceClient, weirv1.LimiterClient) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	grpcapi.Register(s, f, grpcapi.DefaultConfig())
	Register(s, f, cfg)
	served := make(chan error, 1)
	go func() { served <- s.Serve(lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		s.Stop()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return rlsv3.NewRateLimitServiceClient(conn), weirv1.NewLimiterClient(conn)
}

// desc builds a descriptor from key, value pairs.
func desc(kv ...string) *ratelimitv3.RateLimitDescriptor {
	d := &ratelimitv3.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

func envoyReq(descs ...*ratelimitv3.RateLimitDescriptor) *rlsv3.RateLimitRequest {
	return &rlsv3.RateLimitRequest{Domain: "weir", Descriptors: descs}
}

func wantProto(t *testing.T, got, want proto.Message) {
	t.Helper()
	if !proto.Equal(got, want) {
		t.Fatalf("got\n  %v\nwant\n  %v", got, want)
	}
}

func wantChecks(t *testing.T, f *apitest.Decider, want ...api.Check) {
	t.Helper()
	f.Mu.Lock()
	n := len(f.Takes)
	f.Mu.Unlock()
	if n != 1 {
		t.Fatalf("Decider.Take called %d times, want once", n)
	}
	if got := f.LastTake(t); !reflect.DeepEqual(got, want) {
		t.Fatalf("checks %+v, want %+v", got, want)
	}
}

func hdrs(kv ...string) []*corev3.HeaderValue {
	var out []*corev3.HeaderValue
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, &corev3.HeaderValue{Key: kv[i], Value: kv[i+1]})
	}
	return out
}

// exportStatus is the DescriptorStatus of exportAllowed or exportDenied: a
// 3 s window is exactly SECOND × 3.
func exportStatus(code rlsv3.RateLimitResponse_Code, remaining uint32, reset time.Duration) *rlsv3.RateLimitResponse_DescriptorStatus {
	return &rlsv3.RateLimitResponse_DescriptorStatus{
		Code: code,
		CurrentLimit: &rlsv3.RateLimitResponse_RateLimit{
			Name: "export", RequestsPerUnit: 6,
			Unit: rlsv3.RateLimitResponse_RateLimit_SECOND, UnitMultiplier: wrapperspb.UInt32(3),
		},
		LimitRemaining:     remaining,
		DurationUntilReset: durationpb.New(reset),
	}
}

func TestEnvoyOK(t *testing.T) {
	f := &apitest.Decider{}
	c, _ := newEnvoy(t, f, Config{Domain: "weir"})
	resp, err := c.ShouldRateLimit(apitest.Ctx(t), envoyReq(desc("generic_key", "export", "tenant", "acme")))
	if err != nil {
		t.Fatal(err)
	}
	wantChecks(t, f, api.Check{Limit: "export", Key: "tenant=acme", Cost: 1})
	wantProto(t, resp, &rlsv3.RateLimitResponse{
		OverallCode: rlsv3.RateLimitResponse_OK,
		Statuses:    []*rlsv3.RateLimitResponse_DescriptorStatus{exportStatus(rlsv3.RateLimitResponse_OK, 5, 500*time.Millisecond)},
		ResponseHeadersToAdd: hdrs(
			"RateLimit-Policy", `"export";q=6;w=3`,
			"RateLimit", `"export";r=5;t=1`,
		),
	})
}

func TestEnvoyOverLimit(t *testing.T) {
	f := &apitest.Decider{TakeFn: func(_ context.Context, checks []api.Check) (api.TakeResponse, error) {
		ok := apitest.ExportAllowed()
		denied := apitest.ExportDenied()
		denied.RetryAfter = 1500 * time.Millisecond
		return api.TakeResponse{Allowed: false, RetryAfter: denied.RetryAfter, RulesVersion: 3, Results: []api.Result{ok, denied}}, nil
	}}
	c, _ := newEnvoy(t, f, DefaultConfig())
	resp, err := c.ShouldRateLimit(apitest.Ctx(t), envoyReq(
		desc("generic_key", "export", "tenant", "acme"),
		desc("generic_key", "export", "user", "bob"),
	))
	if err != nil {
		t.Fatal(err)
	}
	wantProto(t, resp, &rlsv3.RateLimitResponse{
		OverallCode: rlsv3.RateLimitResponse_OVER_LIMIT,
		Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{
			exportStatus(rlsv3.RateLimitResponse_OK, 5, 500*time.Millisecond),
			exportStatus(rlsv3.RateLimitResponse_OVER_LIMIT, 0, 3*time.Second),
		},
		ResponseHeadersToAdd: hdrs( // the denied descriptor's figures; 1.5 s rounds up to 2
			"RateLimit-Policy", `"export";q=6;w=3`,
			"RateLimit", `"export";r=0;t=2`,
			"Retry-After", "2",
		),
	})
	if len(resp.GetRequestHeadersToAdd()) != 0 || resp.GetRawBody() != nil {
		t.Fatalf("request headers %v, raw body %q", resp.GetRequestHeadersToAdd(), resp.GetRawBody())
	}
}

// TestEnvoySamePort checks that weir.v1.Limiter still answers beside the
// Envoy service on one server.
func TestEnvoySamePort(t *testing.T) {
	f := &apitest.Decider{}
	_, weir := newEnvoy(t, f, DefaultConfig())
	if _, err := weir.Take(apitest.Ctx(t), &weirv1.TakeRequest{Checks: []*weirv1.Check{{Limit: "export", Key: "k"}}}); err != nil {
		t.Fatal(err)
	}
}

func TestEnvoyDeciderErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		code codes.Code
		msg  string
	}{
		{"unavailable", api.Errorf(api.CodeUnavailable, "limit export fails closed: owner unreachable"), codes.Unavailable, "limit export fails closed: owner unreachable"},
		{"overloaded", api.Errorf(api.CodeOverloaded, ""), codes.Unavailable, "limiter overloaded"},
		{"unknown limit", api.Errorf(api.CodeInvalid, `unknown limit "nope"`), codes.InvalidArgument, `unknown limit "nope"`},
		{"deadline from decider", context.DeadlineExceeded, codes.Unavailable, "no decision: context deadline exceeded"},
		{"bug", errors.New("boom"), codes.Internal, "internal error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &apitest.Decider{TakeFn: func(context.Context, []api.Check) (api.TakeResponse, error) { return api.TakeResponse{}, tc.err }}
			c, _ := newEnvoy(t, f, DefaultConfig())
			resp, err := c.ShouldRateLimit(apitest.Ctx(t), envoyReq(desc("generic_key", "export", "tenant", "acme")))
			if resp != nil {
				t.Fatalf("answer %v with an error", resp)
			}
			apitest.WantCode(t, err, tc.code, tc.msg)
		})
	}
}

// TestEnvoyContextEnded calls the server directly: over the network the
// client would see its own deadline, not the server's answer.
func TestEnvoyContextEnded(t *testing.T) {
	f := &apitest.Decider{TakeFn: func(ctx context.Context, _ []api.Check) (api.TakeResponse, error) {
		<-ctx.Done()
		return api.TakeResponse{}, api.Errorf(api.CodeInvalid, "late")
	}}
	s := NewServer(f, DefaultConfig())
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := s.ShouldRateLimit(ctx, envoyReq(desc("generic_key", "export", "k", "v")))
	// A CodeInvalid from the Decider stays InvalidArgument even late; an
	// unclassified error after the context ended is Unavailable.
	apitest.WantCode(t, err, codes.InvalidArgument, "late")
	f.TakeFn = func(ctx context.Context, _ []api.Check) (api.TakeResponse, error) {
		return api.TakeResponse{}, errors.New("forward aborted")
	}
	_, err = s.ShouldRateLimit(ctx, envoyReq(desc("generic_key", "export", "k", "v")))
	apitest.WantCode(t, err, codes.Unavailable, "no decision: context canceled")
}

func TestEnvoyBadDeciderAnswer(t *testing.T) {
	f := &apitest.Decider{TakeFn: func(context.Context, []api.Check) (api.TakeResponse, error) {
		return api.TakeResponse{Allowed: true, Results: []api.Result{apitest.ExportAllowed()}}, nil
	}}
	c, _ := newEnvoy(t, f, DefaultConfig())
	_, err := c.ShouldRateLimit(apitest.Ctx(t), envoyReq(desc("generic_key", "a", "k", "v"), desc("generic_key", "b", "k", "v")))
	apitest.WantCode(t, err, codes.Internal, "internal error")
}

func TestEnvoyInvalid(t *testing.T) {
	long := strings.Repeat("s", 600)
	tooMany := make([]*ratelimitv3.RateLimitDescriptor, 101)
	for i := range tooMany {
		tooMany[i] = desc("generic_key", "export", "k", "v")
	}
	negative := desc("generic_key", "export", "k", "v")
	negative.IsNegativeHits = true
	huge := desc("generic_key", "export", "k", "v")
	huge.HitsAddend = wrapperspb.UInt64(math.MaxInt64 + 1)
	for _, tc := range []struct {
		name string
		req  *rlsv3.RateLimitRequest
		msg  string
	}{
		{
			"no generic_key", envoyReq(desc("generic_key", "export", "k", "v"), desc("tenant", "acme")),
			`descriptors[1] has no "generic_key" or "limit" entry naming the limit`,
		},
		{"no entries", envoyReq(desc()), `descriptors[0] has no "generic_key" or "limit" entry naming the limit`},
		{"no descriptors", envoyReq(), "descriptors is empty"},
		{"too many", envoyReq(tooMany...), "descriptors has 101 entries, over the 100 maximum"},
		{
			"wrong domain", &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("generic_key", "export")}},
			`domain "edge" is not served; this service serves "weir"`,
		},
		{
			"empty domain", &rlsv3.RateLimitRequest{Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("generic_key", "export")}},
			`domain "" is not served; this service serves "weir"`,
		},
		{"two generic_keys", envoyReq(desc("generic_key", "a", "generic_key", "b")), `descriptors[0] has more than one "generic_key" entry`},
		{"two limits", envoyReq(desc("limit", "a", "k", "v", "limit", "b")), `descriptors[0] has more than one "limit" entry`},
		{"empty limit", envoyReq(desc("k", "v", "generic_key", "")), "descriptors[0].generic_key is empty"},
		{"long limit", envoyReq(desc("limit", long)), "descriptors[0].limit is 600 bytes, over the 512-byte maximum"},
		{"empty entry key", envoyReq(desc("generic_key", "export", "k", "v", "", "secret")), "descriptors[0].entries[2].key is empty"},
		{"long key", envoyReq(desc("generic_key", "export", "k", long)), "descriptors[0] key is 602 bytes, over the 512-byte maximum"},
		{
			"long escaped key", envoyReq(desc("generic_key", "export", "k", strings.Repeat(",", 200))),
			"descriptors[0] key is 602 bytes, over the 512-byte maximum",
		},
		{"negative hits", envoyReq(negative), "descriptors[0].is_negative_hits is not supported: a take cannot be refunded"},
		{"huge hits", envoyReq(huge), "descriptors[0].hits_addend is too large"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &apitest.Decider{}
			c, _ := newEnvoy(t, f, Config{Domain: "weir"})
			_, err := c.ShouldRateLimit(apitest.Ctx(t), tc.req)
			apitest.WantCode(t, err, codes.InvalidArgument, tc.msg)
			if n := f.Calls(); n != 0 {
				t.Fatalf("Decider called %d times for an invalid request", n)
			}
		})
	}
}

func TestEnvoyDomain(t *testing.T) {
	for _, tc := range []struct{ served, asked string }{{"weir", "weir"}, {"", "edge"}, {"", ""}} {
		f := &apitest.Decider{}
		_, err := NewServer(f, Config{Domain: tc.served}).ShouldRateLimit(t.Context(),
			&rlsv3.RateLimitRequest{Domain: tc.asked, Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("generic_key", "export")}})
		if err != nil {
			t.Fatalf("served %q, asked %q: %v", tc.served, tc.asked, err)
		}
	}
}

func TestEnvoyCost(t *testing.T) {
	withHits := func(d *ratelimitv3.RateLimitDescriptor, h uint64) *ratelimitv3.RateLimitDescriptor {
		d.HitsAddend = wrapperspb.UInt64(h)
		return d
	}
	for _, tc := range []struct {
		name string
		hits uint32
		d    *ratelimitv3.RateLimitDescriptor
		cost int64
	}{
		{"default", 0, desc("generic_key", "export", "k", "v"), 1},
		{"request hits_addend", 5, desc("generic_key", "export", "k", "v"), 5},
		{"descriptor overrides", 5, withHits(desc("generic_key", "export", "k", "v"), 7), 7},
		{"descriptor zero means 1", 5, withHits(desc("generic_key", "export", "k", "v"), 0), 1},
		{"max uint32", math.MaxUint32, desc("generic_key", "export", "k", "v"), math.MaxUint32},
		{"max int64", 0, withHits(desc("generic_key", "export", "k", "v"), math.MaxInt64), math.MaxInt64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &apitest.Decider{}
			c, _ := newEnvoy(t, f, DefaultConfig())
			req := envoyReq(tc.d)
			req.HitsAddend = tc.hits
			if _, err := c.ShouldRateLimit(apitest.Ctx(t), req); err != nil {
				t.Fatal(err)
			}
			wantChecks(t, f, api.Check{Limit: "export", Key: "k=v", Cost: tc.cost})
		})
	}
}

func TestEnvoyDescriptors(t *testing.T) {
	f := &apitest.Decider{}
	c, _ := newEnvoy(t, f, DefaultConfig())
	resp, err := c.ShouldRateLimit(apitest.Ctx(t), envoyReq(
		desc("remote_address", "10.0.0.7", "generic_key", "search", "path", "/a"),
		desc("limit", "export", "tenant", "acme"),
		desc("generic_key", "global"),
		desc("limit", "x", "generic_key", "export", "h", "a,b=c%", "h", ""),
	))
	if err != nil {
		t.Fatal(err)
	}
	wantChecks(t, f,
		api.Check{Limit: "search", Key: "remote_address=10.0.0.7,path=/a", Cost: 1},
		api.Check{Limit: "export", Key: "tenant=acme", Cost: 1},
		api.Check{Limit: "global", Key: "*", Cost: 1},
		api.Check{Limit: "export", Key: "limit=x,h=a%2Cb%3Dc%25,h=", Cost: 1},
	)
	var names []string
	for _, s := range resp.GetStatuses() {
		names = append(names, s.GetCurrentLimit().GetName())
	}
	if want := []string{"search", "export", "global", "export"}; !reflect.DeepEqual(names, want) {
		t.Fatalf("statuses for %v, want %v", names, want)
	}
}

// TestEnvoyKeyInjective pins that values holding the separators cannot
// reach another descriptor's bucket.
func TestEnvoyKeyInjective(t *testing.T) {
	descs := []*ratelimitv3.RateLimitDescriptor{
		desc("generic_key", "l", "a", "1,b=2"),
		desc("generic_key", "l", "a", "1", "b", "2"),
		desc("generic_key", "l", "a=1", "b"),
		desc("generic_key", "l", "a", "1=b"),
		desc("generic_key", "l", "a", "1%2Cb%3D2"),
		desc("generic_key", "l", "*", ""),
	}
	checks, err := envoyChecks(envoyReq(descs...), "", fuzzLimits)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for i, c := range checks {
		if j, dup := seen[c.Key]; dup {
			t.Fatalf("descriptors %d and %d share the key %q", j, i, c.Key)
		}
		seen[c.Key] = i
	}
}

func TestEnvoyUnit(t *testing.T) {
	const (
		sec  = rlsv3.RateLimitResponse_RateLimit_SECOND
		min  = rlsv3.RateLimitResponse_RateLimit_MINUTE
		hour = rlsv3.RateLimitResponse_RateLimit_HOUR
		day  = rlsv3.RateLimitResponse_RateLimit_DAY
	)
	for _, tc := range []struct {
		w    time.Duration
		unit rlsv3.RateLimitResponse_RateLimit_Unit
		mult uint32
	}{
		{time.Nanosecond, sec, 1},
		{400 * time.Millisecond, sec, 1},
		{time.Second, sec, 1},
		{1500 * time.Millisecond, sec, 2},
		{3 * time.Second, sec, 3},
		{7700 * time.Millisecond, sec, 8}, // √60 ≈ 7.746 s
		{7800 * time.Millisecond, min, 1},
		{29 * time.Second, min, 1}, // under half a minute still rounds to 1
		{30 * time.Second, min, 1},
		{90 * time.Second, min, 2},
		{2 * time.Minute, min, 2},
		{7 * time.Minute, min, 7},
		{464 * time.Second, min, 8}, // √(60·3600) ≈ 464.8 s
		{465 * time.Second, hour, 1},
		{4 * time.Hour, hour, 4},
		{17635 * time.Second, hour, 5}, // √(3600·86400) ≈ 17636 s
		{17637 * time.Second, day, 1},
		{7 * 24 * time.Hour, day, 7},
		{math.MaxInt64, day, 106752},
	} {
		unit, mult := envoyUnit(tc.w)
		if unit != tc.unit || mult != tc.mult {
			t.Errorf("envoyUnit(%v) = %v × %d, want %v × %d", tc.w, unit, mult, tc.unit, tc.mult)
		}
	}
	l := envoyLimit(api.Result{Limit: "x", Capacity: math.MaxInt64, Window: 0})
	wantProto(t, l, &rlsv3.RateLimitResponse_RateLimit{Name: "x", RequestsPerUnit: math.MaxUint32})
	l = envoyLimit(api.Result{Limit: "x", Capacity: 10, Window: time.Minute})
	wantProto(t, l, &rlsv3.RateLimitResponse_RateLimit{Name: "x", RequestsPerUnit: 10, Unit: min})
}

func TestEnvoyClamps(t *testing.T) {
	r := apitest.ExportAllowed()
	r.Remaining = -3
	r.ResetAfter = -time.Second
	out, ok := envoyResponse(api.TakeResponse{Allowed: true, Results: []api.Result{r}}, 1)
	if !ok {
		t.Fatal("not ok")
	}
	s := out.GetStatuses()[0]
	if s.GetLimitRemaining() != 0 || s.GetDurationUntilReset().AsDuration() != 0 {
		t.Fatalf("status %v", s)
	}
	if _, ok := envoyResponse(api.TakeResponse{}, 0); ok {
		t.Fatal("an empty answer was accepted")
	}
}

func TestEnvoyConfig(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	if d := DefaultConfig(); d.Domain != "" || d.MaxKeyBytes != 512 || d.MaxDescriptors != 100 || d.Rules != nil || d.Now != nil {
		t.Fatalf("defaults %+v", d)
	}
	for _, c := range []Config{{MaxKeyBytes: -1}, {MaxDescriptors: -1}} {
		if err := c.Validate(); err == nil || !strings.HasPrefix(err.Error(), "api: ") {
			t.Fatalf("Validate(%+v) = %v", c, err)
		}
	}
	// Zero bounds mean the defaults; set bounds apply.
	many := make([]*ratelimitv3.RateLimitDescriptor, 101)
	for i := range many {
		many[i] = desc("generic_key", "export", "k", "v")
	}
	_, err := NewServer(&apitest.Decider{}, Config{}).ShouldRateLimit(t.Context(), envoyReq(many...))
	apitest.WantCode(t, err, codes.InvalidArgument, "descriptors has 101 entries, over the 100 maximum")
	_, err = NewServer(&apitest.Decider{}, Config{MaxDescriptors: 1, MaxKeyBytes: 3}).ShouldRateLimit(t.Context(),
		envoyReq(desc("generic_key", "export", "k", "v")))
	apitest.WantCode(t, err, codes.InvalidArgument, "descriptors[0].generic_key is 6 bytes, over the 3-byte maximum")
}

// BenchmarkEnvoyShouldRateLimit measures the Envoy layer's own cost (a
// descriptor of three entries in, a denial with its status and headers out)
// against a Decider that does nothing, without the network.
func BenchmarkEnvoyShouldRateLimit(b *testing.B) {
	s := NewServer(&apitest.BenchDecider{}, DefaultConfig())
	req := envoyReq(desc("generic_key", "export", "tenant", "acme", "remote_address", "10.0.0.7"))
	b.ReportAllocs()
	for b.Loop() {
		resp, err := s.ShouldRateLimit(b.Context(), req)
		if err != nil || resp.GetOverallCode() != rlsv3.RateLimitResponse_OVER_LIMIT {
			b.Fatal(resp, err)
		}
	}
}
