package node_test

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/weir-rl/weir/node"
)

// The tests in this file run the proxy configurations shipped in deploy/
// with the real nginx and Caddy binaries, between a real node and a real
// upstream on loopback: the shipped file is rendered with the test's
// addresses and nothing else changes.

// proxyLimits holds the edge limit the shipped configurations name, small
// enough to drain in a few requests; the node's clock does not move, so
// nothing refills.
const proxyLimits = `
version: 1
limits:
  - name: edge
    capacity: 3
    rate: 1/h
`

// needBinary returns the path of a Debian package's command, skipping the
// test on a machine without it and failing in CI, which installs it.
func needBinary(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not installed; .ci/run installs it", name)
		}
		t.Skipf("%s is not installed (apt-get install %s)", name, name)
	}
	return p
}

// freeAddr returns a loopback address with a port that was free a moment
// ago, for a process that cannot be handed a listener.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// renderShipped reads a file of deploy/ and replaces each address in it; an
// address that does not occur fails the test, so the file and the test
// cannot drift apart silently.
func renderShipped(t *testing.T, rel string, replace [][2]string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "deploy", rel))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for _, r := range replace {
		if !strings.Contains(s, r[0]) {
			t.Fatalf("deploy/%s does not contain %q", rel, r[0])
		}
		s = strings.ReplaceAll(s, r[0], r[1])
	}
	return s
}

// upstream is the application behind a proxy: it counts the requests that
// reach it and answers 200 "app".
type upstream struct {
	srv  *httptest.Server
	hits atomic.Int64
}

func startUpstream(t *testing.T) *upstream {
	t.Helper()
	u := &upstream{}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		u.hits.Add(1)
		_, _ = io.WriteString(w, "app\n")
	}))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *upstream) addr() string { return strings.TrimPrefix(u.srv.URL, "http://") }

// startProcess runs cmd until the test ends and waits until addr accepts
// connections; the process's output is shown if the test fails.
func startProcess(t *testing.T, cmd *exec.Cmd, addr string) {
	t.Helper()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", cmd.Path, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("%s output:\n%s", filepath.Base(cmd.Path), out.String())
		}
	})
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = c.Close()
			return
		}
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("%s exited before listening: %v", filepath.Base(cmd.Path), err)
		case <-time.After(20 * time.Millisecond): // polling interval
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not listen on %s within 15s", filepath.Base(cmd.Path), addr)
		}
	}
}

// proxyReply is one answer the client got through a proxy.
type proxyReply struct {
	status int
	header http.Header
	body   string
}

func getThrough(t *testing.T, hc *http.Client, base, spoof string) proxyReply {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+"/orders?page=2", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Forwarded-For", spoof)
	req.Header.Set("X-Real-IP", spoof)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return proxyReply{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

// checkProxyContract drives the proxy at base: the first 3 requests (edge's
// capacity) reach the upstream, each with a different spoofed
// X-Forwarded-For; the 4th, spoofing yet another address, is 429 with
// Retry-After and the RateLimit fields and does not reach the upstream; and
// the bucket that was drained is the connection address's (127.0.0.1).
func checkProxyContract(t *testing.T, tn *testNode, up *upstream, base string, allowedHeaders bool) {
	t.Helper()
	hc := &http.Client{Timeout: 10 * time.Second}
	defer hc.CloseIdleConnections()
	checkProxyContractFrom(t, tn, up, base, allowedHeaders, hc, "127.0.0.1")
}

// checkProxyContractFrom is checkProxyContract for a client hc whose
// connections come from clientIP, the key the drained bucket must have.
func checkProxyContractFrom(t *testing.T, tn *testNode, up *upstream, base string, allowedHeaders bool, hc *http.Client, clientIP string) {
	t.Helper()
	for i := range 3 {
		r := getThrough(t, hc, base, fmt.Sprintf("203.0.113.%d", i+1))
		if r.status != http.StatusOK || r.body != "app\n" {
			t.Fatalf("request %d: %d %q, want 200 from the upstream", i+1, r.status, r.body)
		}
		if allowedHeaders {
			if got, want := r.header.Get("RateLimit"), fmt.Sprintf(`"edge";r=%d;t=`, 2-i); !strings.HasPrefix(got, want) {
				t.Fatalf("request %d: RateLimit %q, want %s...", i+1, got, want)
			}
		}
	}
	if got := up.hits.Load(); got != 3 {
		t.Fatalf("upstream saw %d requests, want 3", got)
	}
	r := getThrough(t, hc, base, "198.51.100.9")
	if r.status != http.StatusTooManyRequests {
		t.Fatalf("request over the limit: %d %q, want 429", r.status, r.body)
	}
	if got := r.header.Get("Retry-After"); got == "" || got == "0" {
		t.Fatalf("429 Retry-After %q, want a positive number of seconds", got)
	}
	if got := r.header.Get("RateLimit"); !strings.HasPrefix(got, `"edge";r=0;t=`) {
		t.Fatalf("429 RateLimit %q", got)
	}
	if got := r.header.Get("RateLimit-Policy"); got != `"edge";q=3;w=10800` {
		t.Fatalf("429 RateLimit-Policy %q", got)
	}
	if !strings.Contains(r.body, "rate_limit_exceeded") {
		t.Fatalf("429 body %q", r.body)
	}
	if got := up.hits.Load(); got != 3 {
		t.Fatalf("upstream saw %d requests after the denial, want 3", got)
	}
	// The drained bucket is the connection address's: the spoofed ones are
	// untouched.
	if got := tn.take(checkJSON{Limit: "edge", Key: clientIP, Cost: 1}); got.Allowed {
		t.Fatalf("edge/%s still has tokens: %+v", clientIP, got)
	}
	if got := tn.take(checkJSON{Limit: "edge", Key: "203.0.113.1", Cost: 1}); !got.Allowed || got.Results[0].Remaining != 2 {
		t.Fatalf("a spoofed address's bucket was spent: %+v", got)
	}
}

func startProxyNode(t *testing.T) *testNode {
	t.Helper()
	path := writeLimits(t, proxyLimits)
	return startNode(t, func(c *node.Config) { c.LimitsPath = path })
}

// TestProxyNginx runs deploy/nginx/weir.conf with nginx: auth_request to
// /v1/check?deny_status=403, mapped back to 429 for the client.
func TestProxyNginx(t *testing.T) {
	bin := needBinary(t, "nginx")
	tn := startProxyNode(t)
	up := startUpstream(t)
	dir := t.TempDir()
	listen := freeAddr(t)
	site := renderShipped(t, "nginx/weir.conf", [][2]string{
		{"server 127.0.0.1:8080;", "server " + tn.n.HTTPAddr() + ";"},
		{"server 127.0.0.1:3000;", "server " + up.addr() + ";"},
		{"listen 80 default_server;", "listen " + listen + " default_server;"},
	})
	if err := os.WriteFile(filepath.Join(dir, "weir.conf"), []byte(site), 0o600); err != nil {
		t.Fatal(err)
	}
	// The main file only places nginx's own files in the test's directory.
	main := fmt.Sprintf(`daemon off;
master_process off;
pid %[1]s/nginx.pid;
error_log stderr notice;
events { worker_connections 64; }
http {
    access_log off;
    client_body_temp_path %[1]s/body;
    proxy_temp_path %[1]s/proxy;
    fastcgi_temp_path %[1]s/fastcgi;
    uwsgi_temp_path %[1]s/uwsgi;
    scgi_temp_path %[1]s/scgi;
    include %[1]s/weir.conf;
}
`, dir)
	conf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(conf, []byte(main), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "-t", "-p", dir, "-c", conf).CombinedOutput(); err != nil {
		t.Fatalf("nginx -t: %v\n%s", err, out)
	}
	startProcess(t, exec.Command(bin, "-p", dir, "-c", conf), listen)
	checkProxyContract(t, tn, up, "http://"+listen, true)
}

// TestProxyCaddy runs deploy/caddy/Caddyfile with Caddy: forward_auth to
// /v1/check, whose 429 Caddy passes through.
func TestProxyCaddy(t *testing.T) {
	bin := needBinary(t, "caddy")
	tn := startProxyNode(t)
	up := startUpstream(t)
	dir := t.TempDir()
	listen := freeAddr(t)
	file := renderShipped(t, "caddy/Caddyfile", [][2]string{
		{"admin localhost:2019", "admin " + freeAddr(t)},
		{"\n:80 {", "\nhttp://" + listen + " {"},
		{"forward_auth 127.0.0.1:8080", "forward_auth " + tn.n.HTTPAddr()},
		{"reverse_proxy 127.0.0.1:3000", "reverse_proxy " + up.addr()},
	})
	conf := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(conf, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "run", "--config", conf, "--adapter", "caddyfile")
	// Caddy keeps its autosaved config and certificates under these.
	cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_CONFIG_HOME="+dir, "XDG_DATA_HOME="+dir)
	startProcess(t, cmd, listen)
	checkProxyContract(t, tn, up, "http://"+listen, false)
}

// TestProxyTraefikForwardAuthContract sends /v1/check the request Traefik's
// ForwardAuth sends for deploy/traefik's weir-edge middleware, and checks
// that its two files agree on the weir-check hop. It needs no Traefik
// binary, so it runs everywhere; TestProxyTraefik (e2e_traefik_test.go)
// runs the real Traefik with `make traefik-test`. The request: GET to the
// configured address with the client's headers, X-Forwarded-Method, -Proto,
// -Host, -Uri, -Port, and X-Forwarded-For set to the connection's address
// (trustForwardHeader false) or appended to the client's (true), which the
// weir-check entry point passes on unchanged. A 2xx passes the request; the
// 429 with Retry-After is what Traefik returns to the client.
func TestProxyTraefikForwardAuthContract(t *testing.T) {
	tn := startProxyNode(t)
	var static struct {
		EntryPoints map[string]struct {
			Address          string `yaml:"address"`
			ForwardedHeaders struct {
				TrustedIPs             []string `yaml:"trustedIPs"`
				NotAppendXForwardedFor bool     `yaml:"notAppendXForwardedFor"`
			} `yaml:"forwardedHeaders"`
		} `yaml:"entryPoints"`
	}
	var dyn struct {
		HTTP struct {
			Routers map[string]struct {
				EntryPoints []string `yaml:"entryPoints"`
				Service     string   `yaml:"service"`
			} `yaml:"routers"`
			Middlewares map[string]struct {
				ForwardAuth struct {
					Address             string `yaml:"address"`
					TrustForwardHeader  bool   `yaml:"trustForwardHeader"`
					MaxResponseBodySize int64  `yaml:"maxResponseBodySize"`
				} `yaml:"forwardAuth"`
			} `yaml:"middlewares"`
		} `yaml:"http"`
	}
	if err := yaml.Unmarshal([]byte(renderShipped(t, "traefik/traefik.yml", nil)), &static); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal([]byte(renderShipped(t, "traefik/dynamic.yml", nil)), &dyn); err != nil {
		t.Fatal(err)
	}
	fa := dyn.HTTP.Middlewares["weir-edge"].ForwardAuth
	if fa.Address == "" || fa.TrustForwardHeader || fa.MaxResponseBodySize <= 0 {
		t.Fatalf("deploy/traefik/dynamic.yml: weir-edge forwardAuth %+v, want an address, trustForwardHeader false, a maxResponseBodySize", fa)
	}
	addr, err := url.Parse(fa.Address)
	if err != nil {
		t.Fatal(err)
	}
	hop := static.EntryPoints["weir-check"]
	if hop.Address != addr.Host || !hop.ForwardedHeaders.NotAppendXForwardedFor ||
		!slices.Equal(hop.ForwardedHeaders.TrustedIPs, []string{"127.0.0.1/32"}) {
		t.Fatalf("traefik.yml's weir-check entry point %+v: want forwardAuth's %s, trusting only 127.0.0.1, not appending X-Forwarded-For", hop, addr.Host)
	}
	if r := dyn.HTTP.Routers["weir-check"]; !slices.Equal(r.EntryPoints, []string{"weir-check"}) || r.Service != "weir" {
		t.Fatalf("dynamic.yml's weir-check router %+v", r)
	}
	// The hop passes the request on unchanged; send it to Weir directly.
	addr.Host = tn.n.HTTPAddr()
	fa.Address = addr.String()
	const clientIP = "192.0.2.10" // the connection's address as Traefik saw it
	forward := func(spoofed string, trust bool) *http.Response {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, fa.Address, nil)
		if err != nil {
			t.Fatal(err)
		}
		// The client's own headers, copied by Traefik.
		req.Header.Set("Authorization", "Bearer abc")
		req.Header.Set("X-Real-Ip", spoofed)
		xff := clientIP
		if trust {
			xff = spoofed + ", " + clientIP
		}
		req.Header.Set("X-Forwarded-For", xff)
		req.Header.Set("X-Forwarded-Method", http.MethodPost)
		req.Header.Set("X-Forwarded-Proto", "https")
		req.Header.Set("X-Forwarded-Host", "shop.example")
		req.Header.Set("X-Forwarded-Uri", "/orders?page=2")
		req.Header.Set("X-Forwarded-Port", "443")
		resp, err := tn.hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return resp
	}
	for i, trust := range []bool{false, true, true} {
		if resp := forward(fmt.Sprintf("203.0.113.%d", i+1), trust); resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d: %d, want 200", i+1, resp.StatusCode)
		}
	}
	resp := forward("198.51.100.9", true)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" ||
		!strings.HasPrefix(resp.Header.Get("RateLimit"), `"edge";r=0;`) {
		t.Fatalf("over the limit: %d %v, want 429 with Retry-After and RateLimit", resp.StatusCode, resp.Header)
	}
	if got := tn.take(checkJSON{Limit: "edge", Key: "203.0.113.2", Cost: 1}); !got.Allowed || got.Results[0].Remaining != 2 {
		t.Fatalf("a spoofed address's bucket was spent: %+v", got)
	}
}
