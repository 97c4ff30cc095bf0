package client

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weir-rl/weir/api/weirv1"
)

// errStreamFull says a stream already carries its most takes in flight;
// the take is sent as a unary call instead (nothing was sent).
var errStreamFull = errors.New("client: take stream full")

// errStreamBroken is what a take in flight on a TakeStream gets when the
// stream ends under it: the take may or may not have been decided.
var errStreamBroken = errors.New("client: take stream broke")

// streamAnswer is one response (or failure) for a take sent on a stream.
type streamAnswer struct {
	resp *weirv1.TakeResponse
	err  error
}

// takeStream multiplexes the concurrent takes of this process to one member
// over one TakeStream: each take gets a stream id, sends at once (no
// batching delay: a lone caller pays one round trip), and waits for the
// response carrying its id. One goroutine, owned by the stream, receives;
// it ends when the stream breaks or its context (the client's) ends.
type takeStream struct {
	mu      sync.Mutex // guards the fields below and serialises Send
	stream  weirv1.Limiter_TakeStreamClient
	pending map[uint64]chan streamAnswer
	next    uint64
	err     error // set once the stream broke; every later take fails
	done    chan struct{}
	limit   int // most takes in flight (Options.StreamInFlight)
}

// openTakeStream opens a TakeStream on rpc under ctx and starts its
// receiver; wg counts the receiver.
func openTakeStream(ctx context.Context, rpc weirv1.LimiterClient, limit int, wg *sync.WaitGroup) (*takeStream, error) {
	st, err := rpc.TakeStream(ctx)
	if err != nil {
		return nil, err
	}
	s := &takeStream{stream: st, pending: map[uint64]chan streamAnswer{}, done: make(chan struct{}), limit: limit}
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.receive()
	}()
	return s, nil
}

// broken reports whether the stream has failed.
func (s *takeStream) broken() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// receive dispatches responses to their takes until the stream ends, then
// fails every take still waiting.
func (s *takeStream) receive() {
	for {
		resp, err := s.stream.Recv()
		if err != nil {
			s.fail(err)
			return
		}
		s.mu.Lock()
		ch, ok := s.pending[resp.GetId()]
		delete(s.pending, resp.GetId())
		s.mu.Unlock()
		if ok {
			ch <- streamAnswer{resp: resp} // buffered: never blocks
		}
	}
}

func (s *takeStream) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return
	}
	s.err = fmt.Errorf("%w: %w", errStreamBroken, err)
	for id, ch := range s.pending {
		ch <- streamAnswer{err: s.err}
		delete(s.pending, id)
	}
	close(s.done)
}

// take sends a take of checks with request id rid and waits for its answer
// or ctx. It returns errStreamFull, sending nothing, when limit takes are
// already in flight. A per-message error comes back as a status error, as a unary Take
// would return it.
func (s *takeStream) take(ctx context.Context, checks []*weirv1.Check, rid []byte) (*weirv1.TakeResponse, error) {
	ch := make(chan streamAnswer, 1)
	s.mu.Lock()
	if s.err != nil {
		err := s.err
		s.mu.Unlock()
		return nil, err
	}
	if len(s.pending) >= s.limit {
		s.mu.Unlock()
		return nil, errStreamFull
	}
	s.next++
	id := s.next
	msg := &weirv1.TakeRequest{Checks: checks, RequestId: rid, Id: id}
	s.pending[id] = ch
	err := s.stream.Send(msg)
	s.mu.Unlock()
	if err != nil {
		// Send fails once the stream is over; Recv reports why.
		s.mu.Lock()
		delete(s.pending, id)
		s.mu.Unlock()
		return nil, fmt.Errorf("%w: %w", errStreamBroken, err)
	}
	select {
	case a := <-ch:
		if a.err != nil {
			return nil, a.err
		}
		if e := a.resp.GetError(); e != nil {
			return nil, statusOf(e)
		}
		return a.resp, nil
	case <-ctx.Done():
		s.mu.Lock()
		delete(s.pending, id)
		s.mu.Unlock()
		return nil, ctx.Err()
	}
}

// close ends the sending side; the receiver ends when the server has
// answered everything or the client's context ends.
func (s *takeStream) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	_ = s.stream.CloseSend()
}

// statusOf converts a TakeStream per-message error to a status error.
func statusOf(e *weirv1.Error) error {
	return status.Error(codes.Code(e.GetCode()), e.GetDetail())
}
