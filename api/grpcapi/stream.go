package grpcapi

import (
	"errors"
	"io"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weir-rl/weir/api/weirv1"
)

// TakeStream implements weirv1.LimiterServer. It answers each request in
// turn, echoing its id; a request that fails gets a response carrying the
// error and the stream goes on. The stream ends when the client closes its
// side, when the stream's context ends, or on Drain. The requests are
// served by a goroutine of the stream's own, so that Drain ends a stream
// waiting for its next request; it ends as soon as the stream does.
func (s *Server) TakeStream(stream grpc.BidiStreamingServer[weirv1.TakeRequest, weirv1.TakeResponse]) error {
	var g streamGate
	done := make(chan error, 1)
	go func() { done <- s.serveStream(stream, &g) }()
	select {
	case err := <-done:
		return err
	case <-s.drain:
	}
	if g.stop() {
		// No request under way: the goroutine waits in Recv, and what it
		// receives from now on it drops. Returning ends the stream, and
		// its Recv with it.
		return errDraining
	}
	return <-done // errDraining, once the request under way is answered
}

// errDraining ends a TakeStream on Drain.
var errDraining = status.Error(codes.Unavailable, "the server is shutting down: retry at another member")

// serveStream is TakeStream's loop: it answers requests until the stream
// ends, or g stops it between two requests.
func (s *Server) serveStream(stream grpc.BidiStreamingServer[weirv1.TakeRequest, weirv1.TakeResponse], g *streamGate) error {
	ctx := stream.Context()
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if !g.enter() {
			return errDraining
		}
		out, err := s.take(ctx, req)
		if err != nil {
			if ctx.Err() != nil { // the stream itself is over
				g.leave()
				return status.FromContextError(ctx.Err()).Err()
			}
			st := Status(err)
			out = &weirv1.TakeResponse{
				Id:    req.GetId(),
				Error: &weirv1.Error{Code: weirv1.ErrorCode(st.Code()), Detail: st.Message()},
			}
		}
		err = stream.Send(out)
		if !g.leave() {
			return errDraining
		}
		if err != nil {
			return err
		}
	}
}

// streamGate tells a TakeStream's handler whether its loop is deciding a
// request, so that Drain ends the stream between two requests, never
// under one: the handler may return (ending the stream) only while the
// loop waits in Recv, and the loop drops what Recv brings after that.
type streamGate struct {
	mu       sync.Mutex
	busy     bool // a request is being decided and answered
	draining bool
}

// enter starts a request, or reports false when the stream drains.
func (g *streamGate) enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.busy = !g.draining
	return g.busy
}

// leave ends a request and reports whether the loop goes on.
func (g *streamGate) leave() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.busy = false
	return !g.draining
}

// stop marks the stream draining and reports whether no request is under
// way: then the handler returns at once, else the loop does after it.
func (g *streamGate) stop() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.draining = true
	return !g.busy
}
