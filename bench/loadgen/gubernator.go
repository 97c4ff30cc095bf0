package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protowire"
)

// Gubernator v2 (github.com/gubernator-io/gubernator) is driven through
// its two public APIs, V1.GetRateLimits over gRPC and POST
// /v1/GetRateLimits over HTTP (its grpc-gateway), one rate limit per
// request, with the workload every other target gets: key benchKey(k),
// cost 1, a token bucket of the suite's limit (capacity C, C tokens per
// period). Gubernator's token bucket of limit C and duration P holds C
// tokens and refills all of them every P, so with the bench limit's 1e12
// tokens per second it never denies either.
//
// The load generator speaks Gubernator's protobuf schema by hand with
// protowire (the field numbers of gubernator.proto below) rather than
// importing its module, whose server dependencies (Kubernetes, etcd)
// would enter Weir's go.mod for five fields.

// guberMethod is the full gRPC method name of V1.GetRateLimits.
const guberMethod = "/pb.gubernator.V1/GetRateLimits"

// Field numbers of gubernator.proto.
const (
	guberReqRequests  = 1 // GetRateLimitsReq.requests (repeated RateLimitReq)
	guberReqName      = 1 // RateLimitReq.name
	guberReqKey       = 2 // RateLimitReq.unique_key
	guberReqHits      = 3 // RateLimitReq.hits
	guberReqLimit     = 4 // RateLimitReq.limit
	guberReqDuration  = 5 // RateLimitReq.duration (milliseconds); algorithm 6 is TOKEN_BUCKET = 0, left out
	guberRespResps    = 1 // GetRateLimitsResp.responses (repeated RateLimitResp)
	guberRespStatus   = 1 // RateLimitResp.status: UNDER_LIMIT = 0, OVER_LIMIT = 1
	guberRespError    = 5 // RateLimitResp.error
	guberStatusUnder  = 0
	guberStatusOverJS = "OVER_LIMIT"
)

// guberLimit is one Gubernator rate limit: the suite's limit as a token
// bucket of Limit tokens refilled every DurationMs.
type guberLimit struct {
	Name       string
	Limit      int64
	DurationMs int64
	Hits       int64
}

// guberLimitOf expresses b (capacity C, N tokens per Per) as Gubernator's
// token bucket: limit C, refilled every Per·C/N. It fails when that
// period is not a whole number of milliseconds of at least one, as
// Gubernator's duration is.
func guberLimitOf(name string, b bucketSpec, cost int64) (guberLimit, error) {
	if err := b.validate(); err != nil {
		return guberLimit{}, err
	}
	num := b.Per.Milliseconds() * b.Capacity
	if b.Per%time.Millisecond != 0 || num/b.Capacity != b.Per.Milliseconds() || num%b.N != 0 || num/b.N < 1 {
		return guberLimit{}, fmt.Errorf("loadgen: gubernator: %d tokens per %v with capacity %d is not a whole number of milliseconds per refill", b.N, b.Per, b.Capacity)
	}
	return guberLimit{Name: name, Limit: b.Capacity, DurationMs: num / b.N, Hits: cost}, nil
}

// appendRequest appends the GetRateLimitsReq of one take on key to buf.
func (l guberLimit) appendRequest(buf []byte, key string) []byte {
	var inner [128]byte
	r := protowire.AppendTag(inner[:0], guberReqName, protowire.BytesType)
	r = protowire.AppendString(r, l.Name)
	r = protowire.AppendTag(r, guberReqKey, protowire.BytesType)
	r = protowire.AppendString(r, key)
	r = protowire.AppendTag(r, guberReqHits, protowire.VarintType)
	r = protowire.AppendVarint(r, uint64(l.Hits))
	r = protowire.AppendTag(r, guberReqLimit, protowire.VarintType)
	r = protowire.AppendVarint(r, uint64(l.Limit))
	r = protowire.AppendTag(r, guberReqDuration, protowire.VarintType)
	r = protowire.AppendVarint(r, uint64(l.DurationMs))
	buf = protowire.AppendTag(buf, guberReqRequests, protowire.BytesType)
	return protowire.AppendBytes(buf, r)
}

// guberAllowed reads a GetRateLimitsResp holding one answer: whether it
// is UNDER_LIMIT, or the error it carries.
func guberAllowed(b []byte) (bool, error) {
	var (
		n       int
		allowed bool
	)
	for len(b) > 0 {
		num, typ, m := protowire.ConsumeTag(b)
		if m < 0 {
			return false, fmt.Errorf("loadgen: gubernator answer: %w", protowire.ParseError(m))
		}
		b = b[m:]
		if num != guberRespResps || typ != protowire.BytesType {
			if m = protowire.ConsumeFieldValue(num, typ, b); m < 0 {
				return false, fmt.Errorf("loadgen: gubernator answer: %w", protowire.ParseError(m))
			}
			b = b[m:]
			continue
		}
		v, m := protowire.ConsumeBytes(b)
		if m < 0 {
			return false, fmt.Errorf("loadgen: gubernator answer: %w", protowire.ParseError(m))
		}
		b = b[m:]
		ok, err := guberOne(v)
		if err != nil {
			return false, err
		}
		n, allowed = n+1, ok
	}
	if n != 1 {
		return false, fmt.Errorf("loadgen: gubernator answered %d rate limits to one", n)
	}
	return allowed, nil
}

// guberOne reads one RateLimitResp.
func guberOne(b []byte) (bool, error) {
	status := uint64(guberStatusUnder)
	for len(b) > 0 {
		num, typ, m := protowire.ConsumeTag(b)
		if m < 0 {
			return false, fmt.Errorf("loadgen: gubernator answer: %w", protowire.ParseError(m))
		}
		b = b[m:]
		switch {
		case num == guberRespStatus && typ == protowire.VarintType:
			status, m = protowire.ConsumeVarint(b)
		case num == guberRespError && typ == protowire.BytesType:
			var msg []byte
			if msg, m = protowire.ConsumeBytes(b); m >= 0 && len(msg) > 0 {
				return false, fmt.Errorf("loadgen: gubernator: %s", msg)
			}
		default:
			m = protowire.ConsumeFieldValue(num, typ, b)
		}
		if m < 0 {
			return false, fmt.Errorf("loadgen: gubernator answer: %w", protowire.ParseError(m))
		}
		b = b[m:]
	}
	return status == guberStatusUnder, nil
}

// rawCodec passes encoded protobuf through gRPC untouched: Marshal takes
// a []byte, Unmarshal fills a *[]byte. Its name is "proto", so the server
// sees the content type of any protobuf client.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) ([]byte, error) {
	b, ok := v.([]byte)
	if !ok {
		return nil, fmt.Errorf("loadgen: rawCodec cannot marshal %T", v)
	}
	return b, nil
}

func (rawCodec) Unmarshal(data []byte, v any) error {
	p, ok := v.(*[]byte)
	if !ok {
		return fmt.Errorf("loadgen: rawCodec cannot unmarshal into %T", v)
	}
	*p = append((*p)[:0], data...)
	return nil
}

// guberGRPCTarget calls V1.GetRateLimits, one *grpc.ClientConn per node
// shared by the callers on it; caller i uses node i mod len(nodes).
type guberGRPCTarget struct {
	conns []*grpc.ClientConn
	limit guberLimit
}

// newGuberGRPCTarget connects to each node's gRPC address.
func newGuberGRPCTarget(addrs []string, limit guberLimit) (*guberGRPCTarget, error) {
	t := &guberGRPCTarget{limit: limit}
	for _, a := range addrs {
		cc, err := grpc.NewClient(a, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			_ = t.close()
			return nil, fmt.Errorf("loadgen: gubernator grpc %s: %w", a, err)
		}
		t.conns = append(t.conns, cc)
	}
	return t, nil
}

func (t *guberGRPCTarget) newCaller(_ context.Context, i int) (caller, error) {
	return &guberGRPCCaller{t: t, cc: t.conns[i%len(t.conns)]}, nil
}

func (t *guberGRPCTarget) close() error {
	var errs []error
	for _, cc := range t.conns {
		errs = append(errs, cc.Close())
	}
	return errors.Join(errs...)
}

// guberGRPCCaller reuses its request and answer buffers.
type guberGRPCCaller struct {
	t        *guberGRPCTarget
	cc       *grpc.ClientConn
	req, out []byte
}

func (c *guberGRPCCaller) take(ctx context.Context, k int) (bool, error) {
	c.req = c.t.limit.appendRequest(c.req[:0], benchKey(k))
	if err := c.cc.Invoke(ctx, guberMethod, c.req, &c.out, grpc.ForceCodec(rawCodec{})); err != nil {
		return false, err
	}
	return guberAllowed(c.out)
}

func (c *guberGRPCCaller) close() error { return nil }

// guberHTTPTarget posts to /v1/GetRateLimits over HTTP/1.1 keep-alive;
// caller i uses node i mod len(urls).
type guberHTTPTarget struct {
	client         *http.Client
	urls           []string
	prefix, suffix string // the JSON body around the key
}

// newGuberHTTPTarget prepares the JSON body and a keep-alive transport
// sized for maxConc callers, as newHTTPTarget does for Weir.
func newGuberHTTPTarget(addrs []string, maxConc int, limit guberLimit) (*guberHTTPTarget, error) {
	name, err := json.Marshal(limit.Name)
	if err != nil {
		return nil, err
	}
	t := &guberHTTPTarget{
		client: &http.Client{Transport: &http.Transport{
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConnsPerHost: maxConc,
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true,
		}},
		prefix: `{"requests":[{"name":` + string(name) + `,"unique_key":"`,
		suffix: `","hits":` + strconv.FormatInt(limit.Hits, 10) + `,"limit":` + strconv.FormatInt(limit.Limit, 10) +
			`,"duration":` + strconv.FormatInt(limit.DurationMs, 10) + `,"algorithm":0}]}`,
	}
	for _, a := range addrs {
		t.urls = append(t.urls, "http://"+a+"/v1/GetRateLimits")
	}
	return t, nil
}

func (t *guberHTTPTarget) newCaller(_ context.Context, i int) (caller, error) {
	return &guberHTTPCaller{t: t, url: t.urls[i%len(t.urls)]}, nil
}

func (t *guberHTTPTarget) close() error {
	t.client.CloseIdleConnections()
	return nil
}

// guberHTTPCaller reuses its request and answer buffers.
type guberHTTPCaller struct {
	t        *guberHTTPTarget
	url      string
	body     []byte
	respBuf  bytes.Buffer
	response guberJSONResp
}

// guberJSONResp is the part of the gateway's JSON answer that is read.
type guberJSONResp struct {
	Responses []struct {
		Status string `json:"status"`
		Error  string `json:"error"`
	} `json:"responses"`
}

func (c *guberHTTPCaller) take(ctx context.Context, k int) (bool, error) {
	c.body = append(append(append(c.body[:0], c.t.prefix...), benchKey(k)...), c.t.suffix...)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(c.body))
	if err != nil {
		return false, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.t.client.Do(req)
	if err != nil {
		return false, err
	}
	c.respBuf.Reset()
	_, err = c.respBuf.ReadFrom(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return false, err
	}
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("loadgen: gubernator http %d: %.200s", resp.StatusCode, c.respBuf.Bytes())
	}
	return guberJSONAllowed(c.respBuf.Bytes(), &c.response)
}

// guberJSONAllowed reads the gateway's answer to one rate limit into r.
func guberJSONAllowed(b []byte, r *guberJSONResp) (bool, error) {
	r.Responses = r.Responses[:0]
	if err := json.Unmarshal(b, r); err != nil {
		return false, fmt.Errorf("loadgen: gubernator http answer: %w", err)
	}
	if len(r.Responses) != 1 {
		return false, fmt.Errorf("loadgen: gubernator answered %d rate limits to one", len(r.Responses))
	}
	one := r.Responses[0]
	if one.Error != "" {
		return false, fmt.Errorf("loadgen: gubernator: %s", one.Error)
	}
	switch one.Status {
	case "", "UNDER_LIMIT":
		return true, nil
	case guberStatusOverJS:
		return false, nil
	}
	return false, fmt.Errorf("loadgen: gubernator http answer: status %q", one.Status)
}

func (c *guberHTTPCaller) close() error { return nil }

// drainClose is the body closer of the health probes.
func drainClose(r io.ReadCloser) {
	_, _ = io.Copy(io.Discard, r)
	_ = r.Close()
}
