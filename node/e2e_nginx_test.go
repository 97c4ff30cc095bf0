package node_test

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// What a new user of deploy/nginx/weir.conf trips over on Debian, run
// with Debian's nginx: the package's default site must not shadow the
// shipped one, and a stalled Weir must not hold requests for nginx's 60 s
// default.

// writeNginxMain writes the main nginx.conf of a test into dir: it only
// places nginx's own files in dir and includes sites, as Debian's
// nginx.conf includes conf.d/*.conf and sites-enabled/*.
func writeNginxMain(t *testing.T, dir string, sites ...string) string {
	t.Helper()
	var inc strings.Builder
	for _, s := range sites {
		fmt.Fprintf(&inc, "    include %s;\n", s)
	}
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
%[2]s}
`, dir, inc.String())
	conf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(conf, []byte(main), 0o600); err != nil {
		t.Fatal(err)
	}
	return conf
}

// debianDefaultSite is Debian's default site, as the nginx package
// installs and enables it, listening on listen instead of port 80 (and
// not on IPv6).
func debianDefaultSite(t *testing.T, listen string) string {
	t.Helper()
	const path = "/etc/nginx/sites-available/default"
	b, err := os.ReadFile(path)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s: %v (Debian's nginx package installs it)", path, err)
		}
		t.Skipf("no Debian default site: %v", err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		switch strings.TrimSpace(line) {
		case "listen [::]:80 default_server;":
			continue
		case "listen 80 default_server;":
			line = "\tlisten " + listen + " default_server;"
		}
		out = append(out, line)
	}
	s := strings.Join(out, "\n")
	if !strings.Contains(s, "listen "+listen+" default_server;") {
		t.Fatalf("%s no longer holds port 80 as default_server; the test needs updating", path)
	}
	return s
}

// TestNginxConfCannotBeShadowedByDebianDefault: with Debian's default site
// enabled beside the shipped file on the same port, nginx refuses to start
// instead of letting "Welcome to nginx!" answer every request.
func TestNginxConfCannotBeShadowedByDebianDefault(t *testing.T) {
	bin := needBinary(t, "nginx")
	dir := t.TempDir()
	listen := freeAddr(t)
	site := renderShipped(t, "nginx/weir.conf", [][2]string{
		{"listen 80 default_server;", "listen " + listen + " default_server;"},
	})
	weir, def := filepath.Join(dir, "weir.conf"), filepath.Join(dir, "default")
	if err := os.WriteFile(weir, []byte(site), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(def, []byte(debianDefaultSite(t, listen)), 0o600); err != nil {
		t.Fatal(err)
	}
	// conf.d/*.conf comes before sites-enabled/* in Debian's nginx.conf.
	conf := writeNginxMain(t, dir, weir, def)
	out, err := exec.Command(bin, "-t", "-p", dir, "-c", conf).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "duplicate default server") {
		t.Fatalf("nginx -t with Debian's default site enabled: %v\n%s\nwant a refusal naming the duplicate default server", err, out)
	}
}

// stalledServer accepts TCP connections and never answers, as a paused
// (SIGSTOP) process's listening socket does: the kernel completes the
// handshake and nothing reads.
func stalledServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().String()
}

// TestNginxStalledWeirAnswersWithinTimeout: when the Weir node nginx asks
// accepts and never answers, the client gets nginx's 500 after the
// check's 1 s timeout, not after nginx's 60 s default, and the
// application is not reached.
func TestNginxStalledWeirAnswersWithinTimeout(t *testing.T) {
	bin := needBinary(t, "nginx")
	up := startUpstream(t)
	dir := t.TempDir()
	listen := freeAddr(t)
	site := renderShipped(t, "nginx/weir.conf", [][2]string{
		{"server 127.0.0.1:8080;", "server " + stalledServer(t) + ";"},
		{"server 127.0.0.1:3000;", "server " + up.addr() + ";"},
		{"listen 80 default_server;", "listen " + listen + " default_server;"},
	})
	weir := filepath.Join(dir, "weir.conf")
	if err := os.WriteFile(weir, []byte(site), 0o600); err != nil {
		t.Fatal(err)
	}
	conf := writeNginxMain(t, dir, weir)
	startProcess(t, exec.Command(bin, "-p", dir, "-c", conf), listen)
	hc := &http.Client{Timeout: 20 * time.Second}
	defer hc.CloseIdleConnections()
	start := time.Now()
	r := getThrough(t, hc, "http://"+listen, "203.0.113.1")
	elapsed := time.Since(start)
	if r.status != http.StatusInternalServerError {
		t.Fatalf("through nginx to a stalled Weir: %d %q, want 500", r.status, r.body)
	}
	if elapsed > 5*time.Second {
		t.Fatalf("nginx answered after %v: the check's 1 s timeouts did not apply", elapsed)
	}
	if got := up.hits.Load(); got != 0 {
		t.Fatalf("the application saw %d requests while Weir could not decide", got)
	}
}
