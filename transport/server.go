package transport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	"github.com/weir-rl/weir/transport/peerpb"
)

// Server serves the peer service for one node on its own listener. It owns
// its grpc.Server, so the credential check cannot be left out: with
// Credentials, a connection whose TLS handshake does not present the peer
// certificate is closed before any Handler method runs. Methods are safe
// for concurrent use.
type Server struct {
	gs    *grpc.Server
	links *links // the replica links (link.go) it accepted
}

// handshakeTimeout bounds a new connection's HTTP/2 handshake. gRPC's
// default is 120 s, and Stop waits for connections still in their
// handshake: a peer whose packets stopped right after its TCP connect (a
// partition) held a node's shutdown for two minutes in the simulated
// network. Peers send their preface at once; 3 s is generous.
const handshakeTimeout = 3 * time.Second

// NewServer returns a Server that answers with h over creds: mutually
// authenticated TLS 1.3 (see Credentials). Nil creds serve plaintext to
// anyone; the node passes credentials whenever a cluster secret or peer
// certificates are configured. NewServer starts no goroutine; call Serve.
func NewServer(h Handler, creds *Credentials) *Server {
	opts := []grpc.ServerOption{
		grpc.ConnectionTimeout(handshakeTimeout),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
			MinTime: serverPingMin, PermitWithoutStream: true,
		}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: serverPingEvery, Timeout: serverPingTimeout}),
	}
	svc := &service{h: h}
	ls := &links{svc: svc}
	if creds != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(creds.ServerConfig())))
		ls.tls = creds.ServerConfig()
	}
	gs := grpc.NewServer(opts...)
	peerpb.RegisterPeerServer(gs, svc)
	return &Server{gs: gs, links: ls}
}

// Serve accepts connections on lis until Stop or GracefulStop, and returns
// nil after either (gRPC's ErrServerStopped is not an error here). It
// serves gRPC and the replica link (link.go) on the one listener.
func (s *Server) Serve(lis net.Listener) error {
	err := s.gs.Serve(newMux(lis, s.links))
	if errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return err
}

// Stop closes the listeners and connections at once; RPCs in flight fail.
func (s *Server) Stop() {
	s.gs.Stop()
	s.links.stop()
}

// GracefulStop stops accepting and waits for RPCs in flight to finish and
// for every connection to close. gRPC closes a connection once its peer
// has answered the stop (a GOAWAY frame and a ping), or 5s after asking;
// a peer that is gone (its host down, or cut off) never answers. The
// server's keepalive closes such a connection sooner, within 4s
// (serverPingEvery + serverPingTimeout) of the last frame the peer sent,
// so a node stopping 4s or more after losing a peer does not wait for it.
// Replica links are closed at once, after gRPC's: an owner whose batch
// goes unanswered sends its keys again (to whichever member is then their
// successor).
func (s *Server) GracefulStop() {
	s.gs.GracefulStop()
	s.links.stop()
}

// service adapts Handler to the generated PeerServer interface.
type service struct {
	peerpb.UnimplementedPeerServer
	h Handler
}

// Batch implements peerpb.PeerServer.
func (s *service) Batch(ctx context.Context, in *peerpb.BatchRequest) (*peerpb.BatchReply, error) {
	// The batch's arrival starts its requests' budgets: read the clock
	// before anything else.
	now := time.Now()
	if err := checkVersion(in.GetProtocol()); err != nil {
		return nil, err
	}
	reqs := decodeRequests(in.GetRequests(), now)
	for i := range reqs {
		if !reqs[i].Op.Valid() {
			return nil, status.Errorf(codes.InvalidArgument, "transport: request %d: invalid op %d", i, reqs[i].Op)
		}
	}
	reps := s.h.Serve(ctx, in.GetFrom(), reqs)
	if len(reps) != len(reqs) {
		return nil, status.Errorf(codes.Internal, "transport: handler answered %d replies to %d requests", len(reps), len(reqs))
	}
	return &peerpb.BatchReply{Replies: encodeReplies(reps)}, nil
}

// Report implements peerpb.PeerServer.
func (s *service) Report(ctx context.Context, in *peerpb.ReportRequest) (*peerpb.ReportReply, error) {
	if err := checkVersion(in.GetProtocol()); err != nil {
		return nil, err
	}
	return encodeReport(s.h.Report(ctx, ReportRequest{Limit: in.GetLimit(), HotN: int(in.GetHotN())})), nil
}

// Handoff implements peerpb.PeerServer.
func (s *service) Handoff(ctx context.Context, in *peerpb.HandoffRequest) (*peerpb.HandoffReply, error) {
	if err := checkVersion(in.GetProtocol()); err != nil {
		return nil, err
	}
	if in.GetReplica() {
		if err := s.replicate(ctx, in); err != nil {
			return nil, err
		}
		return &peerpb.HandoffReply{}, nil
	}
	st := decodeState(in.GetEntries())
	var err error
	if st.Buckets, err = decodePacked(st.Buckets, in.GetBuckets()); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if err := s.h.Handoff(ctx, in.GetFrom(), st); err != nil {
		return nil, status.Error(codes.Aborted, fmt.Sprintf("transport: handoff: %v", err))
	}
	return &peerpb.HandoffReply{}, nil
}

// replicate stores a replica batch, from a Handoff call or the replica
// link, whose version the caller checked, and returns a status error when
// it does not.
func (s *service) replicate(ctx context.Context, in *peerpb.HandoffRequest) error {
	// A replica's packed buckets are checked now and decoded only if the
	// receiver ever merges them.
	packed, err := scanPacked(in.GetBuckets())
	if err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	r := Replica{State: decodeState(in.GetEntries()), Packed: packed, Dropped: decodeKeys(in.GetDropped())}
	if err := s.h.Replicate(ctx, in.GetFrom(), r); err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	return nil
}
