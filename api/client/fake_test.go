package client

import (
	"context"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/weir-rl/weir/api/weirv1"
)

// fakeServer is an in-memory weir.v1.Limiter reached through fakeConn, with
// no sockets, so the client's timers can run inside a testing/synctest
// bubble. Leases expire on the (bubble's) clock; down makes Renew and
// Release answer Unavailable.
type fakeServer struct {
	mu       sync.Mutex
	permits  int
	leases   map[string]time.Time // id → expiry
	seq      uint64
	down     bool
	renews   []time.Time // when each renewal arrived
	releases int
	take     func(*weirv1.TakeRequest) (*weirv1.TakeResponse, error)
}

const fakeDefaultTTL = 3 * time.Second

func newFakeServer(permits int) *fakeServer {
	return &fakeServer{permits: permits, leases: map[string]time.Time{}}
}

func (s *fakeServer) setDown(down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = down
}

// drop forgets a lease, as a release by someone else would.
func (s *fakeServer) drop(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.leases, id)
}

func (s *fakeServer) counts() (renews, releases, held int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	for _, exp := range s.leases {
		if now.Before(exp) {
			held++
		}
	}
	return len(s.renews), s.releases, held
}

func ttlOf(ms int64) time.Duration {
	if ms == 0 {
		return fakeDefaultTTL
	}
	return time.Duration(ms) * time.Millisecond
}

func (s *fakeServer) handle(method string, in any) (proto.Message, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	for id, exp := range s.leases {
		if !now.Before(exp) {
			delete(s.leases, id)
		}
	}
	switch method {
	case weirv1.Limiter_Take_FullMethodName:
		return s.take(in.(*weirv1.TakeRequest))
	case weirv1.Limiter_Acquire_FullMethodName:
		req := in.(*weirv1.AcquireRequest)
		if len(s.leases) >= s.permits {
			return &weirv1.AcquireResponse{Granted: false, RetryAfterMs: 1500, Permits: int64(s.permits)}, nil
		}
		s.seq++
		id := fmt.Sprintf("lease-%d", s.seq)
		ttl := ttlOf(req.GetTtlMs())
		s.leases[id] = now.Add(ttl)
		return &weirv1.AcquireResponse{Granted: true, Id: id, FencingToken: s.seq, TtlMs: ttl.Milliseconds(), Permits: int64(s.permits)}, nil
	case weirv1.Limiter_Renew_FullMethodName:
		req := in.(*weirv1.RenewRequest)
		s.renews = append(s.renews, now)
		if s.down {
			return nil, status.Error(codes.Unavailable, "owner unreachable")
		}
		if _, ok := s.leases[req.GetId()]; !ok {
			return nil, status.Error(codes.NotFound, "lease not found")
		}
		ttl := ttlOf(req.GetTtlMs())
		s.leases[req.GetId()] = now.Add(ttl)
		return &weirv1.RenewResponse{TtlMs: ttl.Milliseconds()}, nil
	case weirv1.Limiter_Release_FullMethodName:
		s.releases++
		if s.down {
			return nil, status.Error(codes.Unavailable, "owner unreachable")
		}
		delete(s.leases, in.(*weirv1.ReleaseRequest).GetId())
		return &weirv1.ReleaseResponse{}, nil
	}
	return nil, status.Error(codes.Unimplemented, method)
}

// fakeConn implements grpc.ClientConnInterface on a fakeServer.
type fakeConn struct{ s *fakeServer }

func (c fakeConn) Invoke(ctx context.Context, method string, args, reply any, _ ...grpc.CallOption) error {
	if err := ctx.Err(); err != nil {
		return status.FromContextError(err).Err()
	}
	resp, err := c.s.handle(method, args)
	if err != nil {
		return err
	}
	proto.Merge(reply.(proto.Message), resp)
	return nil
}

func (fakeConn) NewStream(context.Context, *grpc.StreamDesc, string, ...grpc.CallOption) (grpc.ClientStream, error) {
	return nil, status.Error(codes.Unimplemented, "no streams in the fake")
}
