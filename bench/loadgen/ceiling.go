package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"time"

	"google.golang.org/grpc"

	"github.com/weir-rl/weir/api/weirv1"
)

// ceilingAnswer is what the HTTP ceiling answers every request with: the
// shape of a Weir take answer, so the load generator decodes the same
// bytes it decodes from Weir.
const ceilingAnswer = `{"allowed":true,"retry_after_ms":0,"rules_version":1,"results":[{"limit":"bench","allowed":true,"remaining":999999999999,"capacity":1000000000000,"retry_after_ms":0,"reset_after_ms":0,"source":"owner"}]}`

// ceilings are the two servers that do no work: an HTTP handler that
// reads the body and writes a constant answer, and a weir.v1.Limiter
// whose Take allows at once. They run in the load generator's process on
// loopback, so they measure what the client, the protocol stack and the
// scheduler cost before any decision is made: a target's ceiling.
type ceilings struct {
	httpLn, grpcLn net.Listener
	httpSrv        *http.Server
	grpcSrv        *grpc.Server
	done           chan error // one value per server when it stops
}

// startCeilings listens on two free loopback ports and serves until
// close.
func startCeilings() (*ceilings, error) {
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = hl.Close()
		return nil, err
	}
	c := &ceilings{httpLn: hl, grpcLn: gl, done: make(chan error, 2)}
	c.httpSrv = &http.Server{
		Handler:           http.HandlerFunc(ceilingHTTP),
		ReadHeaderTimeout: 5 * time.Second,
	}
	c.grpcSrv = grpc.NewServer()
	weirv1.RegisterLimiterServer(c.grpcSrv, ceilingGRPC{})
	go func() {
		err := c.httpSrv.Serve(hl)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		c.done <- err
	}()
	go func() { c.done <- c.grpcSrv.Serve(gl) }()
	return c, nil
}

// httpAddr and grpcAddr are the ceilings' loopback addresses.
func (c *ceilings) httpAddr() string { return c.httpLn.Addr().String() }
func (c *ceilings) grpcAddr() string { return c.grpcLn.Addr().String() }

// close stops both servers and waits for their goroutines.
func (c *ceilings) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := c.httpSrv.Shutdown(ctx)
	c.grpcSrv.Stop()
	return errors.Join(err, <-c.done, <-c.done)
}

// ceilingHTTP drains the request and writes the constant answer.
func ceilingHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, ceilingAnswer)
}

// ceilingGRPC is the empty gRPC method: Take allows without looking at
// the request.
type ceilingGRPC struct {
	weirv1.UnimplementedLimiterServer
}

// Take implements weirv1.LimiterServer.
func (ceilingGRPC) Take(context.Context, *weirv1.TakeRequest) (*weirv1.TakeResponse, error) {
	return &weirv1.TakeResponse{Allowed: true}, nil
}
