package grpcapi

import (
	"testing"

	weirv1 "github.com/weir-rl/weir/api/weirv1"
	"github.com/weir-rl/weir/internal/apitest"
)

func TestGRPCEvidenceOnlyWhenAsked(t *testing.T) {
	c := newGRPC(t, apitest.EvidenceDecider())
	ctx := apitest.Ctx(t)
	req := &weirv1.TakeRequest{Checks: []*weirv1.Check{{Limit: "export", Key: "k"}}}
	resp, err := c.Take(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if ev := resp.GetResults()[0].GetEvidence(); ev != nil {
		t.Errorf("evidence %v sent unasked", ev)
	}
	req.Evidence = true
	resp, err = c.Take(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	ev := resp.GetResults()[0].GetEvidence()
	if ev.GetDecider() != "n2" || ev.GetInstance() != "n2/ab12/30007" || ev.GetDecidedAtNs() != 1_700_000_000_123_456_789 {
		t.Errorf("evidence = %v", ev)
	}
}
