package hostile

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/weir-rl/weir/api/weirv1"
	"github.com/weir-rl/weir/auth"
)

// TestTenantFillsItsQuota: a token confined to a key prefix with
// max_buckets 500 asks for many distinct keys of its prefix. Exactly 500
// get a bucket; every later new key is refused with 403 tenant_quota (gRPC
// ResourceExhausted) naming the quota, spending and creating nothing; its
// existing keys keep working; another caller's buckets in debt keep their
// state (nothing of theirs is evicted) and its new keys are still served.
func TestTenantFillsItsQuota(t *testing.T) {
	const quota = 500
	const tenantToken = "tenant-0123456789abcdef0123456789abcdef"
	attack(t, nil, func(t *testing.T, n *node, sc scale) {
		n.writeTokens(t, "  - {name: tenant, sha256: "+auth.HashToken(tenantToken)+", scopes: [decide], key_prefix: \"t1:\", max_buckets: 500}\n", canaryToken, 200)
		take := func(token string, cost int, keys ...string) (int, string) {
			t.Helper()
			body := strings.ReplaceAll(string(jsonTake("export", keys...)), `"cost":1`, fmt.Sprintf(`"cost":%d`, cost))
			req, err := http.NewRequest(http.MethodPost, "http://"+n.http+"/v1/take", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := n.hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b)
		}
		remaining := func(body string) int64 {
			var r struct {
				Results []struct {
					Remaining int64 `json:"remaining"`
				} `json:"results"`
			}
			if err := json.Unmarshal([]byte(body), &r); err != nil || len(r.Results) == 0 {
				t.Fatalf("take answer %q: %v", body, err)
			}
			return r.Results[0].Remaining
		}
		// Another caller's buckets, in debt (7 of 10 left, 1/h refill).
		const victims = 20
		for i := range victims {
			if code, body := take(canaryToken, 3, fmt.Sprint("victim:", i)); code != http.StatusOK || remaining(body) != 7 {
				t.Fatalf("victim %d: %d %s", i, code, body)
			}
		}
		before := n.metrics()["weir_buckets"]
		keys := sc.keys / 20 // 5,000 in the short form
		var next, admitted, refused atomic.Int64
		var firstErr atomic.Value
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for {
					i := next.Add(1) - 1
					if i >= int64(keys) {
						return
					}
					code, body := take(tenantToken, 1, fmt.Sprint("t1:k", i))
					switch {
					case code == http.StatusOK:
						admitted.Add(1)
					case code == http.StatusForbidden && strings.Contains(body, `"tenant_quota"`) && strings.Contains(body, "max_buckets (500)"):
						refused.Add(1)
					default:
						firstErr.CompareAndSwap(nil, fmt.Errorf("key %d: %d %s", i, code, body))
						return
					}
				}
			})
		}
		wg.Wait()
		if err, _ := firstErr.Load().(error); err != nil {
			t.Fatal(err)
		}
		m := n.metrics()
		t.Logf("%d distinct keys of one tenant: %d admitted, %d refused (quota %d); buckets %v -> %v", keys, admitted.Load(), refused.Load(), quota, before, m["weir_buckets"])
		if admitted.Load() != quota || refused.Load() != int64(keys-quota) {
			t.Fatalf("admitted %d, refused %d; want exactly %d admitted", admitted.Load(), refused.Load(), quota)
		}
		if m["weir_buckets"] != before+quota {
			t.Fatalf("buckets %v, want %v + %d", m["weir_buckets"], before, quota)
		}
		// gRPC says the same, as ResourceExhausted with the reason.
		conn, err := grpc.NewClient(n.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+tenantToken)
		_, err = weirv1.NewLimiterClient(conn).Take(ctx, &weirv1.TakeRequest{Checks: []*weirv1.Check{{Limit: "export", Key: "t1:grpc", Cost: 1}}})
		if st, _ := status.FromError(err); st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "tenant_quota") {
			t.Fatalf("gRPC take of a new key past the quota: %v", err)
		}
		// The tenant's existing keys keep working.
		if code, body := take(tenantToken, 1, "t1:k0", "t1:k1"); code != http.StatusOK {
			t.Fatalf("existing keys: %d %s", code, body)
		}
		// The other caller's buckets kept their debt, and its new keys
		// are served.
		for i := range victims {
			if code, body := take(canaryToken, 1, fmt.Sprint("victim:", i)); code != http.StatusOK || remaining(body) != 6 {
				t.Fatalf("victim %d after the flood: %d %s (a bucket evicted and refilled answers 9)", i, code, body)
			}
		}
		if code, body := take(canaryToken, 1, "victim:new"); code != http.StatusOK {
			t.Fatalf("another caller's new key: %d %s", code, body)
		}
	})
}
