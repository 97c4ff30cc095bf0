package envoyrls

import (
	"context"
	"testing"
	"time"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/internal/apitest"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weir-rl/weir/envoyconf"
)

func rulesConfig(t *testing.T, src string) func() *envoyconf.Config {
	t.Helper()
	f, err := envoyconf.Parse("rules.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	c, err := envoyconf.Build(f)
	if err != nil {
		t.Fatal(err)
	}
	return func() *envoyconf.Config { return c }
}

const rulesYAML = `
domain: weir
descriptors:
  - key: tenant
    rate_limit: {unit: minute, requests_per_unit: 6}
  - key: blocked
    rate_limit: {unit: hour, requests_per_unit: 0}
`

// With rules, the check is the rule's limit and the descriptor's entries
// as the key; a Decider that cannot decide is an error, never OK.
func TestEnvoyRulesChecksAndErrors(t *testing.T) {
	f := &apitest.Decider{}
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	rls, _ := newEnvoy(t, f, Config{Rules: rulesConfig(t, rulesYAML), Now: func() time.Time { return now }})
	resp, err := rls.ShouldRateLimit(context.Background(), envoyReq(desc("tenant", "a,b=c")))
	if err != nil || resp.GetOverallCode() != rlsv3.RateLimitResponse_OK {
		t.Fatalf("%v %v", resp, err)
	}
	if got := f.LastTake(t); len(got) != 1 || got[0] != (api.Check{Limit: "envoy:weir.tenant", Key: "tenant=a%2Cb%3Dc", Cost: 1}) {
		t.Fatalf("Decider got %+v", got)
	}
	// requests_per_unit 0 denies without asking the Decider; the reset is the
	// end of the hour on the configured clock.
	calls := f.Calls()
	resp, err = rls.ShouldRateLimit(context.Background(), envoyReq(desc("blocked", "x")))
	if err != nil || resp.GetOverallCode() != rlsv3.RateLimitResponse_OVER_LIMIT || f.Calls() != calls {
		t.Fatalf("blocked: %v %v (%d calls)", resp, err, f.Calls()-calls)
	}
	if got := resp.GetStatuses()[0].GetDurationUntilReset().AsDuration(); got != 55*time.Minute+55*time.Second {
		t.Fatalf("reset %v", got)
	}
	for _, tc := range []struct {
		err  error
		want codes.Code
	}{
		{api.Errorf(api.CodeUnavailable, "owner unreachable"), codes.Unavailable},
		{api.Errorf(api.CodeOverloaded, ""), codes.Unavailable},
		{context.DeadlineExceeded, codes.Unavailable},
		{api.Errorf(api.CodeInvalid, "unknown limit"), codes.InvalidArgument},
	} {
		f.Mu.Lock()
		f.TakeFn = func(context.Context, []api.Check) (api.TakeResponse, error) { return api.TakeResponse{}, tc.err }
		f.Mu.Unlock()
		if _, err := rls.ShouldRateLimit(context.Background(), envoyReq(desc("tenant", "a"))); status.Code(err) != tc.want {
			t.Errorf("Decider error %v: %v, want %v", tc.err, err, tc.want)
		}
	}
	// The domain restriction and the bounds hold as without rules.
	rls2, _ := newEnvoy(t, &apitest.Decider{}, Config{Domain: "edge", Rules: rulesConfig(t, rulesYAML)})
	if _, err := rls2.ShouldRateLimit(context.Background(), envoyReq(desc("tenant", "a"))); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("wrong domain: %v", err)
	}
}
