package resp_test

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// redisCLI returns the path of Debian's redis-cli, skipping the test
// without it unless CI=true (where .ci/run installs redis-tools).
func redisCLI(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("redis-cli")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("redis-cli not found (CI=true: .ci/run installs redis-tools): %v", err)
		}
		t.Skip("redis-cli not installed (apt-get install redis-tools)")
	}
	return path
}

// TestRedisCLI runs every command through redis-cli, RESP2 and RESP3, and
// compares its raw output.
func TestRedisCLI(t *testing.T) {
	cli := redisCLI(t)
	rn := startNode(t, testLimits, nil)
	host, port, err := net.SplitHostPort(rn.addr)
	if err != nil {
		t.Fatal(err)
	}
	run := func(extra []string, args ...string) (string, string) {
		t.Helper()
		cmd := exec.Command(cli, append(append([]string{"-h", host, "-p", port}, extra...), args...)...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("redis-cli %q: %v\n%s%s", args, err, out.String(), errb.String())
		}
		return out.String(), errb.String()
	}
	tests := []struct {
		args []string
		want string // stdout, raw mode (not a terminal)
	}{
		{[]string{"PING"}, "PONG\n"},
		{[]string{"ECHO", "hello"}, "hello\n"},
		{[]string{"WEIR.TAKE", "export", "tenant:acme"}, "1\n5\n0\n500\n"},
		{[]string{"WEIR.TAKE", "export", "tenant:acme", "2"}, "1\n3\n0\n1500\n"},
		{[]string{"WEIR.TAKE", "export", "tenant:acme", "9"}, "ERR checks[0]: cost 9 exceeds capacity 6 of limit \"export\"\n\n"}, // redis-cli ends an error with a blank line
		{[]string{"WEIR.MTAKE", "export", "t2", "1", "search", "t2", "1"}, "1\n0\n1\n5\n0\n500\n1\n2\n0\n1000\n"},
		{[]string{"CL.THROTTLE", "user123", "15", "30", "60"}, "0\n16\n15\n-1\n2\n"},
		{[]string{"CL.THROTTLE", "user123", "15", "30", "60", "0"}, "0\n16\n15\n-1\n2\n"},  // a peek: the take above, nothing more
		{[]string{"CL.THROTTLE", "user123", "15", "30", "60", "17"}, "1\n16\n15\n-1\n2\n"}, // never fits: limited, retry -1
		{[]string{"CLIENT", "SETNAME", "cli"}, "OK\n"},
		{[]string{"SELECT", "0"}, "OK\n"},
		{[]string{"COMMAND", "COUNT"}, "21\n"},
		{[]string{"FLUSHALL"}, "ERR unknown command 'FLUSHALL'\n\n"},
	}
	for _, tt := range tests {
		if out, _ := run(nil, tt.args...); out != tt.want {
			t.Errorf("redis-cli %q = %q, want %q", tt.args, out, tt.want)
		}
	}
	// The same over RESP3 (redis-cli -3 sends HELLO 3 first), on fresh keys.
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"PING"}, "PONG\n"},
		{[]string{"WEIR.TAKE", "export", "resp3"}, "1\n5\n0\n500\n"},
		{[]string{"CL.THROTTLE", "resp3", "15", "30", "60"}, "0\n16\n15\n-1\n2\n"},
		{[]string{"COMMAND", "COUNT"}, "21\n"},
	} {
		if out, _ := run([]string{"-3"}, tt.args...); out != tt.want {
			t.Errorf("redis-cli -3 %q = %q, want %q", tt.args, out, tt.want)
		}
	}
	// HELLO 3 through redis-cli -3: a map, printed one "key value" a line.
	if out, _ := run([]string{"-3"}, "HELLO", "3"); !strings.HasPrefix(out, "server weir\n") || !strings.Contains(out, "\nproto 3\n") {
		t.Errorf("redis-cli -3 HELLO 3 = %q", out)
	}
	// Leases: acquire, renew, release.
	out, _ := run(nil, "WEIR.ACQUIRE", "export-db", "k", "TTL", "5000")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 5 || lines[0] != "1" || lines[3] != "5000" {
		t.Fatalf("redis-cli WEIR.ACQUIRE = %q", out)
	}
	if out, _ := run(nil, "WEIR.RENEW", lines[1], "7000"); out != "7000\n" {
		t.Errorf("redis-cli WEIR.RENEW = %q", out)
	}
	if out, _ := run(nil, "WEIR.RELEASE", lines[1]); out != "OK\n" {
		t.Errorf("redis-cli WEIR.RELEASE = %q", out)
	}
	if out, _ := run(nil, "WEIR.RENEW", lines[1]); !strings.HasPrefix(out, "NOTFOUND ") {
		t.Errorf("redis-cli WEIR.RENEW after release = %q, want NOTFOUND", out)
	}
	// Pipelining from a file of commands (redis-cli reads stdin).
	cmd := exec.Command(cli, "-h", host, "-p", port)
	cmd.Stdin = strings.NewReader(strings.Repeat("WEIR.TAKE search piped\n", 4) + "PING\n")
	got, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	want := "1\n2\n0\n1000\n1\n1\n0\n2000\n1\n0\n0\n3000\n0\n0\n1000\n3000\nPONG\n"
	if string(got) != want {
		t.Errorf("piped commands = %q, want %q", got, want)
	}
}
