package grpcapi

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/api/weirv1"
	"github.com/weir-rl/weir/internal/apitest"
)

// gracefulStop runs gs.GracefulStop and fails t unless it returns within
// 10 s: a stream the server does not end holds it for ever.
func gracefulStop(t *testing.T, gs *grpc.Server) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		gs.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("GracefulStop still waits 10 s after Drain: a TakeStream was left open")
	}
}

func allowAll(_ context.Context, checks []api.Check) (api.TakeResponse, error) {
	r := apitest.ExportAllowed()
	r.Limit = checks[0].Limit
	return api.TakeResponse{Allowed: true, Results: []api.Result{r}}, nil
}

func takeReq(id uint64, key string) *weirv1.TakeRequest {
	return &weirv1.TakeRequest{Id: id, Checks: []*weirv1.Check{{Limit: "export", Key: key}}}
}

// An idle stream, which a client keeps open for as long as it runs, ends
// with Unavailable on Drain, so a graceful stop does not wait for it; a
// stream opened after Drain ends at once.
func TestTakeStreamEndsOnDrain(t *testing.T) {
	c, srv, gs := serveGRPC(t, &apitest.Decider{TakeFn: allowAll})
	ctx := apitest.Ctx(t)
	stream, err := c.TakeStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(takeReq(1, "k")); err != nil {
		t.Fatal(err)
	}
	if resp, err := stream.Recv(); err != nil || resp.GetId() != 1 || !resp.GetAllowed() {
		t.Fatalf("before Drain: %v, %v", resp, err)
	}
	srv.Drain()
	if _, err := stream.Recv(); status.Code(err) != codes.Unavailable {
		t.Fatalf("an idle stream after Drain: %v, want Unavailable", err)
	}
	late, err := c.TakeStream(ctx)
	if err == nil {
		_ = late.Send(takeReq(2, "k"))
		_, err = late.Recv()
	}
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("a stream opened after Drain: %v, want Unavailable", err)
	}
	srv.Drain() // twice is harmless
	gracefulStop(t, gs)
}

// Drain under a take ends the stream only after that take is answered:
// the client gets the decision it caused, then Unavailable.
func TestTakeStreamDrainAnswersTheTakeUnderWay(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	f := &apitest.Decider{TakeFn: func(ctx context.Context, checks []api.Check) (api.TakeResponse, error) {
		if checks[0].Key == "slow" {
			close(entered)
			<-release
		}
		return allowAll(ctx, checks)
	}}
	c, srv, gs := serveGRPC(t, f)
	ctx := apitest.Ctx(t)
	stream, err := c.TakeStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// idle ends once its handler has seen Drain; the handler of stream
	// sees it at the same moment, while its take is still held.
	idle, err := c.TakeStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := idle.Send(takeReq(1, "k")); err != nil {
		t.Fatal(err)
	}
	if _, err := idle.Recv(); err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(takeReq(7, "slow")); err != nil {
		t.Fatal(err)
	}
	<-entered
	srv.Drain()
	if _, err := idle.Recv(); status.Code(err) != codes.Unavailable {
		t.Fatalf("an idle stream after Drain: %v, want Unavailable", err)
	}
	close(release)
	if resp, err := stream.Recv(); err != nil || resp.GetId() != 7 || !resp.GetAllowed() {
		t.Fatalf("the take under way at Drain: %v, %v; want its answer", resp, err)
	}
	if _, err := stream.Recv(); status.Code(err) != codes.Unavailable {
		t.Fatalf("after the take under way: %v, want Unavailable", err)
	}
	gracefulStop(t, gs)
}

// The gate lets the handler end a stream only between two requests.
func TestStreamGate(t *testing.T) {
	var g streamGate
	if !g.enter() {
		t.Fatal("enter before stop refused")
	}
	if g.stop() {
		t.Fatal("stop under a request reported the stream idle")
	}
	if g.leave() {
		t.Fatal("leave after stop let the loop go on")
	}
	if g.enter() {
		t.Fatal("enter after stop allowed")
	}
	var idle streamGate
	if !idle.stop() {
		t.Fatal("stop between requests reported a request under way")
	}
}
