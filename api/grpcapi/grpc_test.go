package grpcapi

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/api/weirv1"
	"github.com/weir-rl/weir/internal/apitest"
)

// newGRPC serves f on a real listener on 127.0.0.1:0 and returns a client.
func newGRPC(t *testing.T, f *apitest.Decider) weirv1.LimiterClient {
	t.Helper()
	c, _, _ := serveGRPC(t, f)
	return c
}

// serveGRPC is newGRPC that also returns the service and its gRPC server,
// which the test may stop itself.
func serveGRPC(t *testing.T, f *apitest.Decider) (weirv1.LimiterClient, *Server, *grpc.Server) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	srv := Register(gs, f, DefaultConfig())
	served := make(chan error, 1)
	go func() { served <- gs.Serve(lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		gs.Stop()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return weirv1.NewLimiterClient(conn), srv, gs
}

func TestGRPCTake(t *testing.T) {
	f := &apitest.Decider{TakeFn: func(_ context.Context, checks []api.Check) (api.TakeResponse, error) {
		ok := apitest.ExportAllowed()
		ok.Limit = "search"
		ok.Source = api.SourceFallback
		return api.TakeResponse{
			Allowed: false, RetryAfter: 500 * time.Millisecond, RulesVersion: 3,
			Results: []api.Result{ok, apitest.ExportDenied()},
		}, nil
	}}
	c := newGRPC(t, f)
	resp, err := c.Take(apitest.Ctx(t), &weirv1.TakeRequest{Id: 42, Checks: []*weirv1.Check{
		{Limit: "search", Key: "k"}, {Limit: "export", Key: "tenant:acme", Cost: 3},
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := &weirv1.TakeResponse{Id: 42, Allowed: false, RetryAfterMs: 500, RulesVersion: 3, Results: []*weirv1.Result{
		{Limit: "search", Allowed: true, Remaining: 5, Capacity: 6, ResetAfterMs: 500, Source: weirv1.Source_SOURCE_FALLBACK, WindowMs: 3000},
		{Limit: "export", Allowed: false, Remaining: 0, Capacity: 6, RetryAfterMs: 500, ResetAfterMs: 3000, Source: weirv1.Source_SOURCE_OWNER, WindowMs: 3000},
	}}
	if !proto.Equal(resp, want) {
		t.Fatalf("got %v\nwant %v", resp, want)
	}
	got := f.LastTake(t)
	if len(got) != 2 || got[0] != (api.Check{Limit: "search", Key: "k", Cost: 1}) || got[1] != (api.Check{Limit: "export", Key: "tenant:acme", Cost: 3}) {
		t.Fatalf("Decider got %+v (cost 0 must become 1)", got)
	}
}

func TestGRPCTakeBadInput(t *testing.T) {
	f := &apitest.Decider{}
	c := newGRPC(t, f)
	ctx := apitest.Ctx(t)
	many := make([]*weirv1.Check, 101)
	for i := range many {
		many[i] = &weirv1.Check{Limit: "a", Key: "k"}
	}
	for _, tc := range []struct {
		name   string
		checks []*weirv1.Check
		msg    string
	}{
		{"empty", nil, "checks is empty"},
		{"negative cost", []*weirv1.Check{{Limit: "export", Key: "k", Cost: -1}}, "checks[0].cost must be a positive integer"},
		{"empty key", []*weirv1.Check{{Limit: "export", Key: "k"}, {Limit: "export"}}, "checks[1].key is empty"},
		{"empty limit", []*weirv1.Check{{Key: "k"}}, "checks[0].limit is empty"},
		{"key 513", []*weirv1.Check{{Limit: "export", Key: strings.Repeat("k", 513)}}, "checks[0].key is 513 bytes, over the 512-byte maximum"},
		{"too many", many, "checks has 101 entries, over the 100 maximum"},
	} {
		_, err := c.Take(ctx, &weirv1.TakeRequest{Checks: tc.checks})
		apitest.WantCode(t, err, codes.InvalidArgument, tc.msg)
	}
	if n := f.Calls(); n != 0 {
		t.Fatalf("Decider called %d times", n)
	}
}

func TestGRPCErrorCodes(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code codes.Code
		msg  string
	}{
		{api.Errorf(api.CodeInvalid, "unknown limit"), codes.InvalidArgument, "unknown limit"},
		{api.Errorf(api.CodeNotFound, "lease expired"), codes.NotFound, "lease expired"},
		{api.Errorf(api.CodeUnavailable, "owner unreachable"), codes.Unavailable, "owner unreachable"},
		{api.Errorf(api.CodeOverloaded, "bucket cap"), codes.ResourceExhausted, "bucket cap"},
		{context.DeadlineExceeded, codes.DeadlineExceeded, context.DeadlineExceeded.Error()},
		{errors.New("boom"), codes.Internal, "internal error"},
	} {
		f := &apitest.Decider{
			TakeFn:    func(context.Context, []api.Check) (api.TakeResponse, error) { return api.TakeResponse{}, tc.err },
			AcquireFn: func(api.AcquireRequest) (api.AcquireResponse, error) { return api.AcquireResponse{}, tc.err },
			RenewFn:   func(string, time.Duration) (time.Duration, error) { return 0, tc.err },
			ReleaseFn: func(string) error { return tc.err },
		}
		c := newGRPC(t, f)
		ctx := apitest.Ctx(t)
		_, err := c.Take(ctx, &weirv1.TakeRequest{Checks: []*weirv1.Check{{Limit: "export", Key: "k"}}})
		apitest.WantCode(t, err, tc.code, tc.msg)
		_, err = c.Acquire(ctx, &weirv1.AcquireRequest{Limit: "export-db", Key: "k"})
		apitest.WantCode(t, err, tc.code, tc.msg)
		_, err = c.Renew(ctx, &weirv1.RenewRequest{Id: "l-1"})
		apitest.WantCode(t, err, tc.code, tc.msg)
		_, err = c.Release(ctx, &weirv1.ReleaseRequest{Id: "l-1"})
		apitest.WantCode(t, err, tc.code, tc.msg)
	}
}

func TestGRPCLeases(t *testing.T) {
	f := &apitest.Decider{}
	c := newGRPC(t, f)
	ctx := apitest.Ctx(t)
	resp, err := c.Acquire(ctx, &weirv1.AcquireRequest{Limit: "export-db", Key: "k", Holder: "w", TtlMs: 5000, WaitMs: 100})
	if err != nil {
		t.Fatal(err)
	}
	want := &weirv1.AcquireResponse{
		Granted: true, Id: "l-1", FencingToken: 17, TtlMs: 30000, Permits: 8,
		Source: weirv1.Source_SOURCE_OWNER, RulesVersion: 3,
	}
	if !proto.Equal(resp, want) {
		t.Fatalf("got %v, want %v", resp, want)
	}
	if got := f.Acquires[0]; got != (api.AcquireRequest{Limit: "export-db", Key: "k", Holder: "w", TTL: 5 * time.Second, Wait: 100 * time.Millisecond}) {
		t.Fatalf("Acquire got %+v", got)
	}
	rn, err := c.Renew(ctx, &weirv1.RenewRequest{Id: "l-1", TtlMs: 2500})
	if err != nil || rn.GetTtlMs() != 2500 {
		t.Fatalf("Renew: %v %v", rn, err)
	}
	if _, err := c.Release(ctx, &weirv1.ReleaseRequest{Id: "l-1"}); err != nil {
		t.Fatal(err)
	}

	// A refusal is a value.
	f.AcquireFn = func(api.AcquireRequest) (api.AcquireResponse, error) {
		return api.AcquireResponse{Permits: 8, RetryAfter: 1500*time.Millisecond + 1}, nil
	}
	resp, err = c.Acquire(ctx, &weirv1.AcquireRequest{Limit: "export-db", Key: "k"})
	if err != nil || resp.GetGranted() || resp.GetRetryAfterMs() != 1501 || resp.GetPermits() != 8 {
		t.Fatalf("refusal: %v %v", resp, err)
	}

	calls := f.Calls()
	for _, tc := range []struct {
		call func() error
		msg  string
	}{
		{func() error {
			_, err := c.Acquire(ctx, &weirv1.AcquireRequest{Limit: "export-db", Key: "k", TtlMs: -1})
			return err
		}, "ttl_ms must not be negative"},
		{func() error {
			_, err := c.Acquire(ctx, &weirv1.AcquireRequest{Limit: "export-db", Key: "k", WaitMs: -1})
			return err
		}, "wait_ms must not be negative"},
		{func() error { _, err := c.Acquire(ctx, &weirv1.AcquireRequest{Limit: "export-db"}); return err }, "key is empty"},
		{func() error { _, err := c.Renew(ctx, &weirv1.RenewRequest{}); return err }, "lease id is empty"},
		{func() error { _, err := c.Renew(ctx, &weirv1.RenewRequest{Id: "l", TtlMs: -1}); return err }, "ttl_ms must not be negative"},
		{func() error { _, err := c.Release(ctx, &weirv1.ReleaseRequest{}); return err }, "lease id is empty"},
	} {
		apitest.WantCode(t, tc.call(), codes.InvalidArgument, tc.msg)
	}
	if n := f.Calls(); n != calls {
		t.Fatalf("Decider called %d times for bad input", n-calls)
	}
}

// TakeStream answers in order, echoes ids, and reports per-message errors
// without ending the stream.
func TestGRPCTakeStream(t *testing.T) {
	f := &apitest.Decider{TakeFn: func(_ context.Context, checks []api.Check) (api.TakeResponse, error) {
		if checks[0].Limit == "closed" {
			return api.TakeResponse{}, api.Errorf(api.CodeUnavailable, "owner unreachable")
		}
		r := apitest.ExportAllowed()
		r.Limit = checks[0].Limit
		return api.TakeResponse{Allowed: true, RulesVersion: 3, Results: []api.Result{r}}, nil
	}}
	c := newGRPC(t, f)
	stream, err := c.TakeStream(apitest.Ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	reqs := []*weirv1.TakeRequest{
		{Id: 1, Checks: []*weirv1.Check{{Limit: "export", Key: "k"}}},
		{Id: 2, Checks: []*weirv1.Check{{Limit: "export", Key: "k", Cost: -4}}},
		{Id: 3, Checks: []*weirv1.Check{{Limit: "closed", Key: "k"}}},
		{Id: 4},
		{Id: 5, Checks: []*weirv1.Check{{Limit: "search", Key: "k", Cost: 2}}},
	}
	wants := []*weirv1.TakeResponse{
		{Id: 1, Allowed: true, RulesVersion: 3, Results: []*weirv1.Result{{Limit: "export", Allowed: true, Remaining: 5, Capacity: 6, ResetAfterMs: 500, Source: weirv1.Source_SOURCE_OWNER, WindowMs: 3000}}},
		{Id: 2, Error: &weirv1.Error{Code: weirv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, Detail: "checks[0].cost must be a positive integer"}},
		{Id: 3, Error: &weirv1.Error{Code: weirv1.ErrorCode_ERROR_CODE_UNAVAILABLE, Detail: "owner unreachable"}},
		{Id: 4, Error: &weirv1.Error{Code: weirv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, Detail: "checks is empty"}},
		{Id: 5, Allowed: true, RulesVersion: 3, Results: []*weirv1.Result{{Limit: "search", Allowed: true, Remaining: 5, Capacity: 6, ResetAfterMs: 500, Source: weirv1.Source_SOURCE_OWNER, WindowMs: 3000}}},
	}
	// Send everything first: the server must not stop on a failed message.
	for _, r := range reqs {
		if err := stream.Send(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	for i, want := range wants {
		got, err := stream.Recv()
		if err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		if !proto.Equal(got, want) {
			t.Fatalf("response %d: got %v\nwant %v", i, got, want)
		}
	}
	if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the last response: %v, want EOF", err)
	}
	f.Mu.Lock()
	defer f.Mu.Unlock()
	if len(f.Takes) != 3 || f.Takes[2][0].Cost != 2 {
		t.Fatalf("Decider takes %+v", f.Takes)
	}
}

func TestGRPCConfig(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	if (Config{MaxKeyBytes: -1}).Validate() == nil || (Config{MaxChecks: -1}).Validate() == nil {
		t.Fatal("negative bound accepted")
	}
	// A custom bound applies.
	f := &apitest.Decider{}
	s := NewServer(f, Config{MaxKeyBytes: 4})
	_, err := s.Take(t.Context(), &weirv1.TakeRequest{Checks: []*weirv1.Check{{Limit: "a", Key: "12345"}}})
	apitest.WantCode(t, err, codes.InvalidArgument, "checks[0].key is 5 bytes, over the 4-byte maximum")
}
