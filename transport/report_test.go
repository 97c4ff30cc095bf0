package transport

import (
	"context"
	"reflect"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// reportingRecorder is a recorder that also answers Report with want,
// keeping what it was asked.
type reportingRecorder struct {
	recorder
	want  Report
	asked chan ReportRequest
}

func (r *reportingRecorder) Report(_ context.Context, req ReportRequest) Report {
	r.asked <- req
	return r.want
}

func TestReportRoundTrip(t *testing.T) {
	tok := testCreds(t, "0123456789abcdef0123456789abcdef")
	h := &reportingRecorder{asked: make(chan ReportRequest, 1), want: Report{
		Node: "n2", LimitsVersion: 7, Allowed: 10, Denied: 3, Fallback: 2, Buckets: 5, LeasesHeld: 1,
		Hot: []HotList{{Limit: "export", Floor: 4, Keys: []HotKey{{Key: "tenant:a", Count: 9, Err: 1, Denied: 2}}}},
	}}
	addr := startServer(t, h, tok)
	p := newTestPool(t, Config{Self: "n1", Credentials: tok, Deadline: time.Second, Window: time.Millisecond, MaxBatch: 8, HandoffDeadline: time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got, err := p.Report(ctx, addr, ReportRequest{Limit: "export", HotN: 5})
	if err != nil {
		t.Fatalf("Report: %v", err)
	}
	if !reflect.DeepEqual(got, h.want) {
		t.Errorf("Report = %+v, want %+v", got, h.want)
	}
	if req := <-h.asked; req != (ReportRequest{Limit: "export", HotN: 5}) {
		t.Errorf("server was asked %+v", req)
	}
}

func TestReportNeedsTheSecret(t *testing.T) {
	h := &reportingRecorder{asked: make(chan ReportRequest, 1)}
	addr := startServer(t, h, testCreds(t, "0123456789abcdef0123456789abcdef"))
	p := newTestPool(t, Config{Self: "n1", Credentials: testCreds(t, "another token, another cluster.."), Deadline: time.Second, Window: time.Millisecond, MaxBatch: 8, HandoffDeadline: time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := p.Report(ctx, addr, ReportRequest{HotN: 1}); status.Code(err) != codes.Unavailable {
		t.Errorf("Report with another secret: %v, want Unavailable (handshake refused)", err)
	}
	if len(h.asked) != 0 {
		t.Error("the reporter was called without the token")
	}
}
