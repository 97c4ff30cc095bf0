package node_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/weir-rl/weir/api/weirv1"
)

func TestGRPCTakeAllowDeny(t *testing.T) {
	tn := startNode(t, nil)
	ctx := context.Background()
	req := &weirv1.TakeRequest{Checks: []*weirv1.Check{{Limit: "export", Key: "tenant:acme", Cost: 1}}, Id: 9}
	for i := range 6 {
		resp, err := tn.grpc.Take(ctx, req)
		if err != nil {
			t.Fatalf("take %d: %v", i+1, err)
		}
		want := &weirv1.TakeResponse{
			Allowed: true, RulesVersion: 3, Id: 9,
			Results: []*weirv1.Result{{
				Limit: "export", Allowed: true, Remaining: int64(5 - i), Capacity: 6,
				ResetAfterMs: int64(i+1) * 500, Source: weirv1.Source_SOURCE_OWNER, WindowMs: 3000,
			}},
		}
		if !proto.Equal(resp, want) {
			t.Fatalf("take %d = %v\nwant %v", i+1, resp, want)
		}
	}
	resp, err := tn.grpc.Take(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	want := &weirv1.TakeResponse{
		Allowed: false, RetryAfterMs: 500, RulesVersion: 3, Id: 9,
		Results: []*weirv1.Result{{
			Limit: "export", Allowed: false, Remaining: 0, Capacity: 6, RetryAfterMs: 500,
			ResetAfterMs: 3000, Source: weirv1.Source_SOURCE_OWNER, WindowMs: 3000,
		}},
	}
	if !proto.Equal(resp, want) {
		t.Fatalf("seventh take = %v\nwant %v", resp, want)
	}
	// HTTP and gRPC share one engine: HTTP sees the same empty bucket.
	if got := tn.take(checkJSON{"export", "tenant:acme", 1}); got.Allowed {
		t.Fatalf("HTTP after gRPC drained the bucket: %+v", got)
	}
}

func TestGRPCTakeStream(t *testing.T) {
	tn := startNode(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := tn.grpc.TakeStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	reqs := []*weirv1.TakeRequest{
		{Id: 100, Checks: []*weirv1.Check{{Limit: "export", Key: "s", Cost: 4}}},
		{Id: 101, Checks: []*weirv1.Check{{Limit: "nope", Key: "s", Cost: 1}}},
		{Id: 102, Checks: []*weirv1.Check{{Limit: "export", Key: "s", Cost: 3}}},
		{Id: 103, Checks: []*weirv1.Check{{Limit: "export", Key: "s", Cost: 2}}},
	}
	for _, r := range reqs {
		if err := stream.Send(r); err != nil {
			t.Fatalf("send %d: %v", r.Id, err)
		}
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	var got []*weirv1.TakeResponse
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("recv: %v", err)
		}
		got = append(got, resp)
	}
	if len(got) != 4 {
		t.Fatalf("got %d responses, want 4", len(got))
	}
	for i, r := range got {
		if r.GetId() != reqs[i].Id {
			t.Fatalf("response %d has id %d, want %d (in order)", i, r.GetId(), reqs[i].Id)
		}
	}
	if !got[0].GetAllowed() || got[0].GetResults()[0].GetRemaining() != 2 {
		t.Errorf("100: %v, want allowed, remaining 2", got[0])
	}
	if e := got[1].GetError(); e.GetCode() != weirv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT || e.GetDetail() == "" ||
		len(got[1].GetResults()) != 0 {
		t.Errorf("101: %v, want an INVALID_ARGUMENT error with a detail and no results", got[1])
	}
	if got[2].GetAllowed() || got[2].GetRetryAfterMs() != 500 || got[2].GetError() != nil {
		t.Errorf("102: %v, want denied with retry 500 (needs 3, has 2)", got[2])
	}
	if !got[3].GetAllowed() || got[3].GetResults()[0].GetRemaining() != 0 {
		t.Errorf("103: %v, want allowed, remaining 0 (the denied 102 spent nothing)", got[3])
	}
}

func TestGRPCErrorMapping(t *testing.T) {
	tn := startNode(t, nil)
	ctx := context.Background()
	_, err := tn.grpc.Renew(ctx, &weirv1.RenewRequest{Id: "not-a-lease"})
	if st, _ := status.FromError(err); st.Code() != codes.NotFound {
		t.Errorf("renew of a malformed id: %v, want NotFound", err)
	}
	_, err = tn.grpc.Renew(ctx, &weirv1.RenewRequest{Id: ""})
	if st, _ := status.FromError(err); st.Code() != codes.InvalidArgument {
		t.Errorf("renew of an empty id: %v, want InvalidArgument", err)
	}
	_, err = tn.grpc.Renew(ctx, &weirv1.RenewRequest{Id: "x", TtlMs: -1})
	if st, _ := status.FromError(err); st.Code() != codes.InvalidArgument {
		t.Errorf("renew with a negative ttl: %v, want InvalidArgument", err)
	}
	_, err = tn.grpc.Acquire(ctx, &weirv1.AcquireRequest{Limit: "export-db", Key: "k", WaitMs: -1})
	if st, _ := status.FromError(err); st.Code() != codes.InvalidArgument {
		t.Errorf("acquire with a negative wait: %v, want InvalidArgument", err)
	}
	if _, err := tn.grpc.Release(ctx, &weirv1.ReleaseRequest{Id: "not-a-lease"}); err != nil {
		t.Errorf("release of an unknown id: %v, want OK", err)
	}
	// A deadline that already passed is DeadlineExceeded, not a decision.
	dctx, cancel := context.WithDeadline(ctx, time.Now().Add(-time.Second))
	defer cancel()
	_, err = tn.grpc.Take(dctx, &weirv1.TakeRequest{Checks: []*weirv1.Check{{Limit: "export", Key: "k"}}})
	if st, _ := status.FromError(err); st.Code() != codes.DeadlineExceeded {
		t.Errorf("expired deadline: %v, want DeadlineExceeded", err)
	}
}
