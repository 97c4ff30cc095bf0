package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/weir-rl/weir/api/weirv1"
)

// benchKey returns the caller key of key index i, the same for every
// target.
func benchKey(i int) string { return "k" + strconv.Itoa(i) }

// grpcTarget drives weir.v1.Limiter/Take. It holds conns gRPC client
// connections per address, each multiplexing the requests of the callers
// assigned to it, as a Go service would hold one *grpc.ClientConn per
// process.
type grpcTarget struct {
	conns   []*grpc.ClientConn
	clients []weirv1.LimiterClient
	limit   string
	keys    []string
	cost    int64
	rotate  bool
}

// newGRPCTarget creates conns client connections per address. Connection
// i goes to addrs[i mod len(addrs)], so caller i reaches the same address
// whatever conns is. With rotate, a caller moves to the next connection,
// so the next address, on every request, as a round-robin client-side
// balancer does.
func newGRPCTarget(addrs []string, conns int, limit string, nkeys int, cost int64, rotate bool) (*grpcTarget, error) {
	t := &grpcTarget{limit: limit, keys: make([]string, nkeys), cost: cost, rotate: rotate}
	for i := range t.keys {
		t.keys[i] = benchKey(i)
	}
	var err error
	if t.conns, t.clients, err = dialLimiters(addrs, conns); err != nil {
		return nil, err
	}
	return t, nil
}

func (t *grpcTarget) newCaller(_ context.Context, i int) (caller, error) {
	return &grpcCaller{
		t:   t,
		n:   i % len(t.clients),
		req: &weirv1.TakeRequest{Checks: []*weirv1.Check{{Limit: t.limit, Cost: t.cost}}},
	}, nil
}

func (t *grpcTarget) close() error { return closeAll(t.conns) }

// dialLimiters opens conns gRPC connections per address, connection i to
// addrs[i mod len(addrs)], and a Limiter client on each. On an error it
// closes those it opened.
func dialLimiters(addrs []string, conns int) ([]*grpc.ClientConn, []weirv1.LimiterClient, error) {
	var ccs []*grpc.ClientConn
	var clients []weirv1.LimiterClient
	for i := range conns * len(addrs) {
		cc, err := grpc.NewClient(addrs[i%len(addrs)], grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			_ = closeAll(ccs)
			return nil, nil, fmt.Errorf("loadgen: grpc %s: %w", addrs[i%len(addrs)], err)
		}
		ccs = append(ccs, cc)
		clients = append(clients, weirv1.NewLimiterClient(cc))
	}
	return ccs, clients, nil
}

// closeAll closes every one of cs and returns the first error.
func closeAll[C interface{ Close() error }](cs []C) error {
	var first error
	for _, c := range cs {
		if err := c.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// grpcCaller reuses one request message: a caller has one call in flight,
// and a unary call has finished with the message when it returns.
type grpcCaller struct {
	t   *grpcTarget
	n   int // index of the connection of the next request
	req *weirv1.TakeRequest
}

func (c *grpcCaller) take(ctx context.Context, k int) (bool, error) {
	cl := c.t.clients[c.n]
	if c.t.rotate {
		c.n = (c.n + 1) % len(c.t.clients)
	}
	c.req.Checks[0].Key = c.t.keys[k]
	resp, err := cl.Take(ctx, c.req)
	if err != nil {
		return false, err
	}
	return resp.GetAllowed(), nil
}

func (c *grpcCaller) close() error { return nil }

// httpTarget drives POST /v1/take over HTTP/1.1 with keep-alive: one
// connection per caller, kept open by a transport sized to the highest
// concurrency.
type httpTarget struct {
	client *http.Client
	urls   []string
	// A body is prefix + key + suffix: bench keys (benchKey) need no JSON
	// escaping, so a caller writes it into its own buffer without an
	// encoder and without a table of a million bodies.
	prefix, suffix string
}

// newHTTPTarget builds the transport. An address is host:port or a base
// URL (http://host:port); /v1/take is appended.
func newHTTPTarget(addrs []string, maxConc int, limit string, nkeys int, cost int64) (*httpTarget, error) {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: maxConc,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
		WriteBufferSize:     4096,
		ReadBufferSize:      4096,
	}
	lim, err := json.Marshal(limit)
	if err != nil {
		return nil, err
	}
	t := &httpTarget{
		client: &http.Client{Transport: tr},
		prefix: `{"checks":[{"limit":` + string(lim) + `,"key":"`,
		suffix: `","cost":` + strconv.FormatInt(cost, 10) + `}]}`,
	}
	for _, a := range addrs {
		if !strings.Contains(a, "://") {
			a = "http://" + a
		}
		t.urls = append(t.urls, strings.TrimSuffix(a, "/")+"/v1/take")
	}
	return t, nil
}

func (t *httpTarget) newCaller(_ context.Context, i int) (caller, error) {
	return &httpCaller{t: t, url: t.urls[i%len(t.urls)]}, nil
}

func (t *httpTarget) close() error {
	t.client.CloseIdleConnections()
	return nil
}

// httpCaller reads responses into a reused buffer.
type httpCaller struct {
	t    *httpTarget
	url  string
	body []byte
	buf  bytes.Buffer
	out  struct {
		Allowed bool `json:"allowed"`
	}
}

func (c *httpCaller) take(ctx context.Context, k int) (bool, error) {
	c.body = append(strconv.AppendInt(append(append(c.body[:0], c.t.prefix...), 'k'), int64(k), 10), c.t.suffix...)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(c.body))
	if err != nil {
		return false, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.t.client.Do(req)
	if err != nil {
		return false, err
	}
	c.buf.Reset()
	_, err = c.buf.ReadFrom(io.LimitReader(resp.Body, 1<<20))
	_ = resp.Body.Close()
	if err != nil {
		return false, err
	}
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("loadgen: http %d: %.200s", resp.StatusCode, c.buf.Bytes())
	}
	c.out.Allowed = false
	if err := json.Unmarshal(c.buf.Bytes(), &c.out); err != nil {
		return false, fmt.Errorf("loadgen: http: decode response: %w", err)
	}
	return c.out.Allowed, nil
}

func (c *httpCaller) close() error { return nil }
