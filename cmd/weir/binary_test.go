package main

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// freePort returns a loopback port nothing listens on right now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return port
}

// goTool finds the go command that runs this test.
func goTool(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	p := "/usr/local/go/bin/go"
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("no go command to build the binary with: %v", err)
	}
	return p
}

// TestBinaryServeAndSIGTERM builds weir, serves with the embedded limits,
// checks the first log line names them, and stops it with SIGTERM.
func TestBinaryServeAndSIGTERM(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "weir")
	build := exec.Command(goTool(t), "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	httpAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	grpcAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	respAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	cmd := exec.Command(bin, "serve", "--http-addr", httpAddr, "--grpc-addr", grpcAddr, "--resp-addr", respAddr, "--node-name", "bin-test",
		"--gossip-addr", "127.0.0.1:0", "--peer-addr", "127.0.0.1:0")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "WEIR_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	lines := make(chan string, 256)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default: // the test reads only the first lines
			}
		}
		close(lines)
		exited <- cmd.Wait() // after the pipe is drained, as Wait requires
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-exited
		}
	})

	var first string
	select {
	case first = <-lines:
	case <-time.After(20 * time.Second):
		t.Fatal("no log line within 20s")
	}
	if !strings.Contains(first, `source="embedded default"`) {
		t.Fatalf("first log line %q does not name the embedded default limits", first)
	}

	client := &http.Client{Timeout: 2 * time.Second}
	defer client.CloseIdleConnections()
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := client.Get("http://" + httpAddr + "/healthz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("/healthz did not answer 200 within 20s: %v", err)
		}
		time.Sleep(20 * time.Millisecond) // polling interval
	}
	resp, err := client.Post("http://"+httpAddr+"/v1/take", "application/json",
		strings.NewReader(`{"checks":[{"limit":"export","key":"k","cost":1}]}`))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("take on the binary = %d", resp.StatusCode)
	}
	client.CloseIdleConnections()

	// --resp-addr serves the Redis protocol.
	rc, err := net.DialTimeout("tcp", respAddr, 2*time.Second)
	if err != nil {
		t.Fatalf("RESP port: %v", err)
	}
	_ = rc.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := rc.Write([]byte("*3\r\n$9\r\nWEIR.TAKE\r\n$6\r\nexport\r\n$1\r\nk\r\n")); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(rc)
	var got string
	for range 5 {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("RESP answer: %v (got %q)", err, got)
		}
		got += line
	}
	_ = rc.Close()
	if got != "*4\r\n:1\r\n:4\r\n:0\r\n:1000\r\n" {
		t.Fatalf("WEIR.TAKE on the binary = %q", got)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("weir serve exited with code %d after SIGTERM, want 0", ee.ExitCode())
		}
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("weir serve did not exit within 15s of SIGTERM")
	}
	for _, addr := range []string{httpAddr, respAddr} {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			_ = c.Close()
			t.Fatalf("port %s still open after exit", addr)
		}
	}
}
