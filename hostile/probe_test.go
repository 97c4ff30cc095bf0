package hostile

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/weir-rl/weir/api/weirv1"
	"github.com/weir-rl/weir/auth"
)

// The cases of this file are the attacks of an adversarial probe of every
// API by a party holding a token of its own (or none): RESP connections
// that never authenticate, tokens revoked under open connections, refusals
// that spent, lease waits and ids, gossip junk, credentials as keys.

// writeTokens replaces the node's tokens file with the canary's token and
// extra entries, sends SIGHUP, and waits until token answers /v1/take with
// want (200 once added, 401 once removed).
func (n *node) writeTokens(t *testing.T, extra, token string, want int) {
	t.Helper()
	tf := "version: 1\ntokens:\n  - {name: canary, sha256: " + auth.HashToken(canaryToken) + ", scopes: [decide, read]}\n" + extra
	path := filepath.Join(n.dir, "tokens.yaml")
	if err := os.WriteFile(path+".new", []byte(tf), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
	if err := n.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		req, _ := http.NewRequest(http.MethodPost, "http://"+n.http+"/v1/take", strings.NewReader(string(jsonTake("export", "v:probe"))))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := n.hc.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == want {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the tokens file did not take effect within 10s (want %d for the token): %v", want, err)
		}
		time.Sleep(20 * time.Millisecond) // polling for the reload
	}
}

// TestRevokedTokenOnOpenConnections: a token narrowed, then removed, by a
// tokens-file reload (SIGHUP) stops spending on the RESP connection and the
// gRPC TakeStream it opened before: each command is authorized by the file
// in force.
func TestRevokedTokenOnOpenConnections(t *testing.T) {
	const victim = "victim-0123456789abcdef0123456789abcdef"
	respAddr := freeAddr(t)
	attack(t, []string{"--resp-addr", respAddr}, func(t *testing.T, n *node, _ scale) {
		entry := func(prefix string) string {
			return "  - {name: victim, sha256: " + auth.HashToken(victim) + ", scopes: [decide], key_prefix: \"" + prefix + "\"}\n"
		}
		n.writeTokens(t, entry("v:"), victim, http.StatusOK)
		c, err := net.DialTimeout("tcp", respAddr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		br := bufio.NewReader(c)
		if got, err := respDo(c, br, "AUTH", victim); got != "+OK" {
			t.Fatalf("AUTH: %q %v", got, err)
		}
		conn, err := grpc.NewClient(n.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		ctx, cancel := context.WithCancel(metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+victim))
		defer cancel()
		st, err := weirv1.NewLimiterClient(conn).TakeStream(ctx)
		if err != nil {
			t.Fatal(err)
		}
		stream := func(key string) codes.Code {
			if err := st.Send(&weirv1.TakeRequest{Checks: []*weirv1.Check{{Limit: "export", Key: key, Cost: 1}}}); err != nil {
				t.Fatal(err)
			}
			out, err := st.Recv()
			if err != nil {
				t.Fatal(err)
			}
			return codes.Code(out.GetError().GetCode())
		}
		if got, _ := respDo(c, br, "WEIR.TAKE", "export", "v:a"); !strings.HasPrefix(got, "[1 ") {
			t.Fatalf("RESP take before the reload: %q", got)
		}
		if got := stream("v:a"); got != codes.OK {
			t.Fatalf("stream take before the reload: %v", got)
		}
		n.writeTokens(t, entry("v:eu:"), victim, http.StatusForbidden) // narrowed: v:probe is outside
		if got, _ := respDo(c, br, "WEIR.TAKE", "export", "v:a"); !strings.HasPrefix(got, "-NOPERM") {
			t.Fatalf("RESP take on the old prefix after narrowing: %q, want -NOPERM", got)
		}
		if got := stream("v:a"); got != codes.PermissionDenied {
			t.Fatalf("stream take on the old prefix after narrowing: %v", got)
		}
		n.writeTokens(t, "", victim, http.StatusUnauthorized) // removed
		if got, _ := respDo(c, br, "WEIR.TAKE", "export", "v:eu:a"); !strings.HasPrefix(got, "-NOAUTH") {
			t.Fatalf("RESP take after removal: %q, want -NOAUTH", got)
		}
		if got := stream("v:eu:a"); got != codes.Unauthenticated {
			t.Fatalf("stream take after removal: %v", got)
		}
		_ = st.CloseSend()
		t.Log("narrowed: -NOPERM and PermissionDenied on the old prefix; removed: -NOAUTH and Unauthenticated, on connections opened before the reloads")
	})
}

// TestEnvoyRulesRefusalSpendsNothing: with --envoy-config-dir, requests
// whose second descriptor is outside the caller's prefix are refused whole,
// and the first descriptor is not charged.
func TestEnvoyRulesRefusalSpendsNothing(t *testing.T) {
	const edge = "edge-0123456789abcdef0123456789abcdef"
	dir := t.TempDir()
	rules := "domain: edge\ndescriptors:\n  - key: tenant\n    rate_limit: {unit: hour, requests_per_unit: 3}\n"
	if err := os.WriteFile(filepath.Join(dir, "edge.yaml"), []byte(rules), 0o600); err != nil {
		t.Fatal(err)
	}
	attack(t, []string{"--envoy-config-dir", dir}, func(t *testing.T, n *node, _ scale) {
		// The rules render keys as tenant=<value>: the edge token may
		// spend tenant=acme only (so the probe's /v1/take is 403).
		n.writeTokens(t, "  - {name: edge, sha256: "+auth.HashToken(edge)+", scopes: [decide], key_prefix: \"tenant=acme\"}\n", edge, http.StatusForbidden)
		conn, err := grpc.NewClient(n.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		rls := rlsv3.NewRateLimitServiceClient(conn)
		ctx := metadata.AppendToOutgoingContext(context.Background(), "x-weir-token", edge)
		req := func(tenants ...string) *rlsv3.RateLimitRequest {
			r := &rlsv3.RateLimitRequest{Domain: "edge"}
			for _, v := range tenants {
				r.Descriptors = append(r.Descriptors, &rlcommon.RateLimitDescriptor{Entries: []*rlcommon.RateLimitDescriptor_Entry{{Key: "tenant", Value: v}}})
			}
			return r
		}
		for i := range 3 {
			if _, err := rls.ShouldRateLimit(ctx, req("acme", "evil")); status.Code(err) != codes.PermissionDenied {
				t.Fatalf("refused call %d: %v, want PermissionDenied", i+1, err)
			}
		}
		for i := range 3 {
			resp, err := rls.ShouldRateLimit(ctx, req("acme"))
			if err != nil || resp.GetOverallCode() != rlsv3.RateLimitResponse_OK {
				t.Fatalf("own descriptor, call %d after 3 refusals: %v %v (the refusals spent)", i+1, resp, err)
			}
		}
		if resp, err := rls.ShouldRateLimit(ctx, req("acme")); err != nil || resp.GetOverallCode() != rlsv3.RateLimitResponse_OVER_LIMIT {
			t.Fatalf("fourth call: %v %v, want OVER_LIMIT", resp, err)
		}
		t.Log("3 refused calls spent 0 of 3; the next 3 allowed, the 4th OVER_LIMIT")
	})
}

// leaseReq posts an acquire of open-db key with the canary's token.
func (n *node) leaseReq(t *testing.T, method, path, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, "http://"+n.http+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+canaryToken)
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// TestLeaseHugeWaitAndPredictedID: the largest wait_ms validation accepts
// gets its lease (the write deadline no longer overflows), and a lease id
// computed from one's own, as the SplitMix64 nonces allowed, names no
// other holder's lease.
func TestLeaseHugeWaitAndPredictedID(t *testing.T) {
	attack(t, nil, func(t *testing.T, n *node, _ scale) {
		code, out := n.leaseReq(t, http.MethodPost, "/v1/leases", `{"limit":"open-db","key":"w","wait_ms":9223372036854}`)
		if code != http.StatusCreated || out["id"] == nil {
			t.Fatalf("wait_ms 9223372036854: %d %v, want 201 with the lease", code, out)
		}
		own, _ := out["id"].(string)
		code, out = n.leaseReq(t, http.MethodPost, "/v1/leases", `{"limit":"open-db","key":"w","holder":"other"}`)
		if code != http.StatusCreated {
			t.Fatalf("second lease: %d %v", code, out)
		}
		other, _ := out["id"].(string)
		for _, guess := range predictNext(t, own) {
			if guess == other {
				t.Fatalf("the next lease's id was computed from the previous one")
			}
			if code, _ := n.leaseReq(t, http.MethodDelete, "/v1/leases/"+guess, ""); code != http.StatusNoContent {
				t.Fatalf("release of a guessed id: %d", code)
			}
		}
		if code, out := n.leaseReq(t, http.MethodPost, "/v1/leases/"+other+"/renew", ""); code != http.StatusOK {
			t.Fatalf("the other holder's renew after the guessed releases: %d %v, want 200", code, out)
		}
		t.Log("wait_ms 9223372036854 granted; ids guessed from one's own released nothing")
	})
}

func mustDecode(t *testing.T, id string) []byte {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(id)
	if err != nil || len(b) < 9 {
		t.Fatalf("lease id %q: %v", id, err)
	}
	return b
}

// predictNext returns the ids the SplitMix64 attack predicts for the lease
// after id: the fencing token plus one, and each 8 bytes of the nonce (the
// whole of a version 1 nonce, either half of a version 2 one) replaced by
// the SplitMix64 output that follows them.
func predictNext(t *testing.T, id string) []string {
	t.Helper()
	raw := mustDecode(t, id)
	size := 16 // version 2
	if raw[0] == 1 {
		size = 8 // version 1, before ids came from crypto/rand
	}
	nonce := raw[len(raw)-size:]
	body := raw[:len(raw)-size]
	// body is version | len | limit | len | key | uvarint fencing.
	i := 1
	for range 2 {
		l, w := binary.Uvarint(body[i:])
		i += w + int(l)
	}
	fencing, _ := binary.Uvarint(body[i:])
	head := binary.AppendUvarint(append([]byte(nil), body[:i]...), fencing+1)
	var out []string
	for half := 0; half < size; half += 8 {
		n := append([]byte(nil), nonce...)
		binary.BigEndian.PutUint64(n[half:], splitmixNext(binary.BigEndian.Uint64(nonce[half:])))
		out = append(out, base64.RawURLEncoding.EncodeToString(append(append([]byte(nil), head...), n...)))
	}
	return out
}

// splitmixNext returns the SplitMix64 output that follows output z.
func splitmixNext(z uint64) uint64 {
	const gamma, m1, m2 = 0x9e3779b97f4a7c15, 0xbf58476d1ce4e5b9, 0x94d049bb133111eb
	unshift := func(x uint64, k uint) uint64 {
		y := x
		for range 64 / k {
			y = x ^ (y >> k)
		}
		return y
	}
	inv := func(a uint64) uint64 {
		x := a
		for range 6 {
			x *= 2 - a*x
		}
		return x
	}
	s := unshift(z, 31)
	s = unshift(s*inv(m2), 27)
	s = unshift(s*inv(m1), 30) + gamma
	s = (s ^ (s >> 30)) * m1
	s = (s ^ (s >> 27)) * m2
	return s ^ (s >> 31)
}

// TestGossipJunk: UDP packets without the cluster secret sent to a
// clustered node's gossip port are counted, and logged at most once per
// 10 s, not once each.
func TestGossipJunk(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte("hostile-suite-cluster-secret-0123456789"), 0o600); err != nil {
		t.Fatal(err)
	}
	gossip := freeAddr(t)
	extra := []string{"--cluster=true", "--cluster-secret-file", secret, "--gossip-addr", gossip, "--peer-addr", freeAddr(t), "--timing", "local"}
	attack(t, extra, func(t *testing.T, n *node, sc scale) {
		u, err := net.Dial("udp", gossip)
		if err != nil {
			t.Fatal(err)
		}
		defer u.Close()
		junk := []byte("\x01 not encrypted with the cluster's key, and never will be")
		start := time.Now()
		for sent := 0; sent < sc.junk; {
			for range min(100, sc.junk-sent) {
				if _, err := u.Write(junk); err != nil {
					t.Fatal(err)
				}
				sent++
			}
			deadline := time.Now().Add(10 * time.Second)
			for n.metrics()["weir_gossip_decrypt_failures_total"] < float64(sent) {
				if time.Now().After(deadline) {
					t.Fatalf("decrypt failures counted %v of %d sent", n.metrics()["weir_gossip_decrypt_failures_total"], sent)
				}
				time.Sleep(20 * time.Millisecond) // polling the counter
			}
		}
		took := time.Since(start)
		n.mu.Lock()
		lines := strings.Count(n.log.String(), "failed to decrypt")
		n.mu.Unlock()
		t.Logf("%d junk packets in %v: counted %d, logged %d lines", sc.junk, took, sc.junk, lines)
		if allowed := 1 + int(took/(10*time.Second)); lines < 1 || lines > allowed {
			t.Fatalf("%d junk packets logged %d lines, want 1 to %d (one per 10 s)", sc.junk, lines, allowed)
		}
	})
}

// TestCredentialsAndAmbiguousBodies: a check keyed by the caller's own
// credential header, and JSON bodies whose fields differ only in case or
// repeat, are refused and decide nothing.
func TestCredentialsAndAmbiguousBodies(t *testing.T) {
	attack(t, nil, func(t *testing.T, n *node, _ scale) {
		before := n.metrics()
		for _, h := range []string{"Authorization", "X-Weir-Token"} {
			req, _ := http.NewRequest(http.MethodGet, "http://"+n.http+"/v1/check?limit=export&key_header="+h, nil)
			req.Header.Set("Authorization", "Bearer "+canaryToken)
			resp, err := n.hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("key_header=%s: %d, want 400", h, resp.StatusCode)
			}
		}
		for _, body := range []string{
			`{"checks":[{"limit":"export","key":"a","key":"b"}]}`,
			`{"checks":[{"limit":"export","KEY":"a"}]}`,
			`{"checks":[{"limit":"export","key":"a"}],"Checks":[{"limit":"export","key":"b"}]}`,
		} {
			resp, err := n.hc.Do(authed(t, http.MethodPost, "http://"+n.http+"/v1/take", []byte(body)))
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("%s: %d, want 400", body, resp.StatusCode)
			}
		}
		after := n.metrics()
		if after["weir_buckets"] != before["weir_buckets"] || sum(after, `weir_decisions_total{limit="export"`) != 0 {
			t.Fatal("a refused request decided")
		}
	})
}
