package grpcapi

import (
	"context"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/api/weirv1"
)

// Allot implements weirv1.LimiterServer: an allotment for the caller as a
// holder (the allot scope). TTL is reported in whole milliseconds rounded
// down and RetryAfter rounded up, so a holder that follows them stops
// early and retries late.
func (s *Server) Allot(ctx context.Context, req *weirv1.AllotRequest) (*weirv1.AllotResponse, error) {
	r := api.AllotRequest{
		Limit: req.GetLimit(), Key: req.GetKey(), Holder: req.GetHolder(),
		Want: req.GetWant(), Demand: req.GetDemand(), Unspent: req.GetUnspent(), Seq: req.GetSeq(),
	}
	if err := api.ValidateAllot(r.Limit, r.Key, r.Holder, r.Want, r.Demand, r.Unspent, s.lim.maxKeyBytes); err != nil {
		return nil, Status(err).Err()
	}
	resp, err := s.d.Allot(ctx, r)
	if err != nil {
		return nil, Status(err).Err()
	}
	return &weirv1.AllotResponse{
		Tokens: resp.Tokens, TtlMs: api.MillisDown(resp.TTL), RetryAfterMs: api.MillisUp(resp.RetryAfter),
		Capacity: resp.Capacity, WindowMs: api.MillisUp(resp.Window), Seq: resp.Seq,
	}, nil
}

// Return implements weirv1.LimiterServer: the caller's allotment back.
func (s *Server) Return(ctx context.Context, req *weirv1.ReturnRequest) (*weirv1.ReturnResponse, error) {
	r := api.ReturnRequest{Limit: req.GetLimit(), Key: req.GetKey(), Holder: req.GetHolder(), Unspent: req.GetUnspent(), Seq: req.GetSeq()}
	if err := api.ValidateAllot(r.Limit, r.Key, r.Holder, 1, 0, r.Unspent, s.lim.maxKeyBytes); err != nil {
		return nil, Status(err).Err()
	}
	if err := s.d.Return(ctx, r); err != nil {
		return nil, Status(err).Err()
	}
	return &weirv1.ReturnResponse{}, nil
}
