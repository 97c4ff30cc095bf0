package node_test

import (
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// The tests in this file run deploy/traefik (traefik.yml and dynamic.yml)
// with the real Traefik binary, as the nginx and Caddy tests run theirs.
// Traefik has no Debian package: `make traefik` builds it from the Go
// module proxy (scripts/traefik-build.sh, several minutes from a cold
// cache), so these tests are opted into with WEIR_TRAEFIK_TEST=1, which
// `make traefik-test` sets, and are skipped otherwise, in CI too.

// needTraefik returns the Traefik binary: $WEIR_TRAEFIK, else bin/traefik.
// Without WEIR_TRAEFIK_TEST=1 the test is skipped; with it, a missing
// binary fails the test.
func needTraefik(t *testing.T) string {
	t.Helper()
	if os.Getenv("WEIR_TRAEFIK_TEST") != "1" {
		t.Skip("Traefik is not packaged in Debian: `make traefik-test` builds it from the Go module proxy and runs this (WEIR_TRAEFIK_TEST=1)")
	}
	p := os.Getenv("WEIR_TRAEFIK")
	if p == "" {
		p = filepath.Join("..", "bin", "traefik")
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(abs); err != nil {
		t.Fatalf("WEIR_TRAEFIK_TEST=1 but no Traefik binary: %v (make traefik builds bin/traefik)", err)
	}
	return abs
}

// startTraefik renders deploy/traefik with Weir at weir and the
// application at app, starts Traefik, and returns the web entry point's
// base URL once the file provider's routers are in place.
func startTraefik(t *testing.T, bin, weir, app string) string {
	t.Helper()
	dir := t.TempDir()
	listen, check := freeAddr(t), freeAddr(t)
	dynamic := filepath.Join(dir, "dynamic.yml")
	static := renderShipped(t, "traefik/traefik.yml", [][2]string{
		{`address: ":80"`, `address: "` + listen + `"`},
		{`address: "127.0.0.1:8081"`, `address: "` + check + `"`},
		{"filename: /etc/traefik/dynamic.yml", "filename: " + dynamic},
	})
	dyn := renderShipped(t, "traefik/dynamic.yml", [][2]string{
		{`address: "http://127.0.0.1:8081/v1/check?`, `address: "http://` + check + `/v1/check?`},
		{`url: "http://127.0.0.1:8080"`, `url: "http://` + weir + `"`},
		{`url: "http://127.0.0.1:3000"`, `url: "http://` + app + `"`},
	})
	conf := filepath.Join(dir, "traefik.yml")
	for path, body := range map[string]string{conf: static, dynamic: dyn} {
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	startProcess(t, exec.Command(bin, "--configFile="+conf), listen)
	waitTraefikRouters(t, check)
	return "http://" + listen
}

// waitTraefikRouters waits until the weir-check router answers: Traefik
// listens before its file provider's configuration is applied, and
// answers 404 "404 page not found" itself until then. The probe asks for a
// limit no limits file has, which Weir refuses without touching a bucket
// (and a Weir that does not answer gets Traefik's 502 or 504). Traefik
// applies one configuration to all entry points together, so the web
// entry point's routers are in place as well.
func waitTraefikRouters(t *testing.T, check string) {
	t.Helper()
	hc := &http.Client{Timeout: 5 * time.Second}
	defer hc.CloseIdleConnections()
	probe := "http://" + check + "/v1/check?limit=traefik-probe&key=probe"
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := hc.Get(probe)
		if err != nil {
			t.Fatalf("probe %s: %v (a Weir that does not answer should get the hop's 504 within 1 s)", probe, err)
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || string(b) != "404 page not found\n" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("Traefik did not load deploy/traefik/dynamic.yml's routers within 15s")
		}
		time.Sleep(20 * time.Millisecond) // polling interval
	}
}

// TestProxyTraefik runs deploy/traefik with Traefik: forwardAuth to
// /v1/check through the weir-check entry point; allowed requests reach the
// application, the one over the limit is Weir's 429 with its headers and
// body, and the key is the connection's address, not the client's
// X-Forwarded-For or X-Real-IP.
func TestProxyTraefik(t *testing.T) {
	bin := needTraefik(t)
	tn := startProxyNode(t)
	up := startUpstream(t)
	base := startTraefik(t, bin, tn.n.HTTPAddr(), up.addr())
	// The client connects from 127.0.0.2, so that its key differs from
	// the address of Traefik's own hop (127.0.0.1): had the weir-check
	// entry point appended that, Weir would key every client on it.
	const clientIP = "127.0.0.2"
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(clientIP)}}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: dialer.DialContext}}
	defer hc.CloseIdleConnections()
	checkProxyContractFrom(t, tn, up, base, false, hc, clientIP)

	// A look-alike of X-Forwarded-For is not a way around the key either.
	req, err := http.NewRequest(http.MethodGet, base+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header["X_Forwarded_For"] = []string{"203.0.113.50"}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("with X_Forwarded_For: %d, want 429 (%s's bucket is empty)", resp.StatusCode, clientIP)
	}
	if got := tn.take(checkJSON{Limit: "edge", Key: "203.0.113.50", Cost: 1}); !got.Allowed || got.Results[0].Remaining != 2 {
		t.Fatalf("X_Forwarded_For's address was charged: %+v", got)
	}
}

// TestTraefikWeirDownOrStalled: a Weir that refuses connections (down) or
// accepts and never answers (paused) fails the request closed, as
// dynamic.yml says: 502 at once, 504 after the weir serversTransport's 1 s,
// instead of ForwardAuth's fixed 30 s; the application is not reached.
func TestTraefikWeirDownOrStalled(t *testing.T) {
	bin := needTraefik(t)
	for _, tc := range []struct {
		name   string
		weir   string
		status int
	}{
		{"down", freeAddr(t), http.StatusBadGateway},
		{"stalled", stalledServer(t), http.StatusGatewayTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := startUpstream(t)
			base := startTraefik(t, bin, tc.weir, up.addr())
			hc := &http.Client{Timeout: 40 * time.Second}
			defer hc.CloseIdleConnections()
			start := time.Now()
			r := getThrough(t, hc, base, "203.0.113.1")
			elapsed := time.Since(start)
			if r.status != tc.status {
				t.Fatalf("through Traefik to a %s Weir: %d %q, want %d", tc.name, r.status, r.body, tc.status)
			}
			if elapsed > 5*time.Second {
				t.Fatalf("Traefik answered after %v: the weir serversTransport's 1 s timeouts did not apply", elapsed)
			}
			if got := up.hits.Load(); got != 0 {
				t.Fatalf("the application saw %d requests while Weir could not decide", got)
			}
		})
	}
}
