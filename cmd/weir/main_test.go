package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/weir-rl/weir/internal/nodetest"
	"github.com/weir-rl/weir/node"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func testFlags() (*flag.FlagSet, *string, *int, *bool) {
	fs := newFlagSet("test")
	addr := fs.String("http-addr", ":8080", "")
	n := fs.Int("max-buckets", 10, "")
	legacy := fs.Bool("legacy-headers", true, "")
	return fs, addr, n, legacy
}

func TestEnvName(t *testing.T) {
	for in, want := range map[string]string{
		"http-addr":           "WEIR_HTTP_ADDR",
		"limits":              "WEIR_LIMITS",
		"cluster-secret-file": "WEIR_CLUSTER_SECRET_FILE",
		"state-dir":           "WEIR_STATE_DIR",
	} {
		if got := envName(in); got != want {
			t.Errorf("envName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseWithEnv(t *testing.T) {
	t.Run("env applies when the flag is absent", func(t *testing.T) {
		fs, addr, n, legacy := testFlags()
		err := parseWithEnv(fs, []string{"rest"}, env(map[string]string{
			"WEIR_HTTP_ADDR": "127.0.0.1:9", "WEIR_MAX_BUCKETS": "42", "WEIR_LEGACY_HEADERS": "false",
		}))
		if err != nil {
			t.Fatal(err)
		}
		if *addr != "127.0.0.1:9" || *n != 42 || *legacy {
			t.Fatalf("got %q %d %v, want env values", *addr, *n, *legacy)
		}
		if got := fs.Args(); len(got) != 1 || got[0] != "rest" {
			t.Fatalf("Args = %q", got)
		}
	})
	t.Run("command line wins", func(t *testing.T) {
		fs, addr, n, _ := testFlags()
		err := parseWithEnv(fs, []string{"--http-addr", ":7", "--max-buckets=3"}, env(map[string]string{
			"WEIR_HTTP_ADDR": ":9", "WEIR_MAX_BUCKETS": "not-a-number",
		}))
		if err != nil {
			t.Fatalf("a bad env value for a flag given on the command line must be ignored: %v", err)
		}
		if *addr != ":7" || *n != 3 {
			t.Fatalf("got %q %d, want the command line's :7 3", *addr, *n)
		}
	})
	t.Run("unset and empty env keep defaults", func(t *testing.T) {
		fs, addr, n, legacy := testFlags()
		if err := parseWithEnv(fs, nil, env(map[string]string{"WEIR_HTTP_ADDR": ""})); err != nil {
			t.Fatal(err)
		}
		if *addr != ":8080" || *n != 10 || !*legacy {
			t.Fatalf("got %q %d %v, want defaults", *addr, *n, *legacy)
		}
	})
	t.Run("bad env value errors", func(t *testing.T) {
		fs, _, _, _ := testFlags()
		err := parseWithEnv(fs, nil, env(map[string]string{"WEIR_MAX_BUCKETS": "many"}))
		if err == nil || !strings.Contains(err.Error(), "WEIR_MAX_BUCKETS") {
			t.Fatalf("err = %v, want one naming WEIR_MAX_BUCKETS", err)
		}
	})
	t.Run("bad flag errors", func(t *testing.T) {
		fs, _, _, _ := testFlags()
		if err := parseWithEnv(fs, []string{"--no-such-flag"}, env(nil)); err == nil {
			t.Fatal("unknown flag accepted")
		}
	})
}

func runCmd(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestRunDispatch(t *testing.T) {
	if code, _, stderr := runCmd(); code != 2 || !strings.Contains(stderr, "usage") {
		t.Errorf("no args: exit %d, stderr %q", code, stderr)
	}
	if code, _, stderr := runCmd("frobnicate"); code != 2 || !strings.Contains(stderr, `unknown command "frobnicate"`) {
		t.Errorf("unknown command: exit %d, stderr %q", code, stderr)
	}
	if code, stdout, _ := runCmd("version"); code != 0 || !strings.HasPrefix(stdout, "weir ") {
		t.Errorf("version: exit %d, stdout %q", code, stdout)
	}
	if code, stdout, _ := runCmd("help"); code != 0 || !strings.Contains(stdout, "validate") {
		t.Errorf("help: exit %d, stdout %q", code, stdout)
	}
	if code, _, _ := runCmd("serve", "--no-such-flag"); code != 2 {
		t.Errorf("serve with a bad flag: exit %d, want 2", code)
	}
	missing := filepath.Join(t.TempDir(), "missing.yaml")
	if code, _, stderr := runCmd("serve", "--limits", missing, "--http-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0"); code != 1 || stderr == "" {
		t.Errorf("serve with a missing limits file: exit %d, stderr %q; want 1 with a reason", code, stderr)
	}
}

func TestValidate(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(good, []byte("version: 4\nlimits:\n  - name: a\n    capacity: 5\n    rate: 1/s\n  - name: b\n    kind: concurrency\n    permits: 2\n    lease_ttl: 10s\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("version: 4\nlimits:\n  - name: a\n    capacity: 5\n    rate: fast\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCmd("validate", good)
	if code != 0 || stdout != good+": ok: version 4, 2 limits\n" || stderr != "" {
		t.Fatalf("validate good: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	code, stdout, stderr = runCmd("validate", bad)
	if code != 1 || stdout != "" || !strings.Contains(stderr, "line 5") {
		t.Fatalf("validate bad: exit %d, stdout %q, stderr %q; want 1 naming line 5", code, stdout, stderr)
	}
	if code, _, _ := runCmd("validate", filepath.Join(dir, "missing.yaml")); code != 1 {
		t.Fatalf("validate missing file: exit %d, want 1", code)
	}
	if code, _, _ := runCmd("validate"); code != 2 {
		t.Fatalf("validate without a file: exit %d, want 2", code)
	}
}

// weir validate checks an envoyproxy/ratelimit directory (and, with
// --envoy, one such file), listing every problem with file and line.
func TestValidateEnvoyConfig(t *testing.T) {
	readme := filepath.Join("..", "..", "envoyconf", "testdata", "readme")
	code, stdout, stderr := runCmd("validate", readme)
	if code != 0 || stdout != readme+": ok: envoy config, 10 domains, 20 rules\n" {
		t.Fatalf("validate readme: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: fortnight}\n  - key: a\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	want := bad + ": line 4: invalid rate limit unit 'fortnight'\n" + bad + ": line 5: duplicate descriptor composite key 'd.a'\n"
	for _, args := range [][]string{{"validate", dir}, {"validate", "--envoy", bad}} {
		code, stdout, stderr = runCmd(args...)
		if code != 1 || stdout != "" || stderr != want {
			t.Fatalf("%v: exit %d, stdout %q, stderr %q; want 1 and\n%s", args, code, stdout, stderr, want)
		}
	}
}

// startNode starts an in-process node on loopback, on a clock that does not
// move, and returns its HTTP base URL.
func startNode(t *testing.T) string {
	t.Helper()
	cfg := node.LocalConfig()
	cfg.NodeName = "t"
	frozen := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	n := nodetest.Start(t, cfg, node.Deps{Clock: func() time.Time { return frozen }})
	return "http://" + n.HTTPAddr()
}

func TestTakeExitCodes(t *testing.T) {
	addr := startNode(t)
	for i := range 6 {
		code, stdout, stderr := runCmd("take", "--addr", addr+"/", "export", "tenant:cli")
		if code != 0 {
			t.Fatalf("take %d: exit %d, stdout %q, stderr %q; want 0", i+1, code, stdout, stderr)
		}
		var d struct {
			Allowed bool
			Results []struct{ Remaining int64 }
		}
		if err := json.Unmarshal([]byte(stdout), &d); err != nil || !d.Allowed || d.Results[0].Remaining != int64(5-i) {
			t.Fatalf("take %d printed %q (%v), want the decision with remaining %d", i+1, stdout, err, 5-i)
		}
	}
	code, stdout, _ := runCmd("take", "--addr", addr, "export", "tenant:cli")
	if code != 1 || !strings.Contains(stdout, `"allowed":false`) || !strings.Contains(stdout, `"retry_after_ms":500`) {
		t.Fatalf("seventh take: exit %d, stdout %q; want 1 and the denial", code, stdout)
	}
	// A cost: a fresh key with cost 6 is allowed, then cost 1 is denied.
	if code, _, _ := runCmd("take", "--addr", addr, "export", "tenant:cost", "6"); code != 0 {
		t.Fatalf("cost 6: exit %d, want 0", code)
	}
	if code, _, _ := runCmd("take", "--addr", addr, "export", "tenant:cost", "1"); code != 1 {
		t.Fatalf("cost 1 after 6: exit %d, want 1", code)
	}

	for _, args := range [][]string{
		{"take", "--addr", addr, "nope", "k"},                   // 400 unknown limit
		{"take", "--addr", addr, "export", "k", "7"},            // 400 cost above capacity
		{"take", "--addr", addr, "export", "k", "x"},            // cost not an integer
		{"take", "--addr", addr, "export"},                      // missing key
		{"take", "--addr", addr, "export", "k", "1", "2"},       // too many args
		{"take", "--addr", "http://127.0.0.1:1", "export", "k"}, // nothing listening
		{"take", "--bogus", "export", "k"},
	} {
		if code, stdout, stderr := runCmd(args...); code != 2 {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 2", args, code, stdout, stderr)
		}
	}
}

// TestHelpAndMistypedFlags: --help is a request, answered on stdout with
// exit 0; a mistyped flag is a short error naming the flag meant, not the
// whole flag list.
func TestHelpAndMistypedFlags(t *testing.T) {
	for _, args := range [][]string{
		{"serve", "--help"},
		{"serve", "-h"},
		{"take", "--help"},
		{"status", "--help"},
		{"hot", "-help"},
		{"lease", "--help"},
		{"lease", "acquire", "--help"},
		{"token", "--help"},
		{"validate", "--help"},
		{"forget", "--help"},
		{"healthcheck", "--help"},
	} {
		code, stdout, stderr := runCmd(args...)
		if code != 0 || !strings.Contains(stdout, "usage: weir "+args[0]) || stderr != "" {
			t.Errorf("%q: exit %d, stdout %.60q, stderr %q; want 0 and the usage on stdout", args, code, stdout, stderr)
		}
	}
	if _, stdout, _ := runCmd("serve", "--help"); !strings.Contains(stdout, "-gossip-addr") || !strings.Contains(stdout, "WEIR_") {
		t.Errorf("serve --help does not list the flags and their variables: %q", stdout)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--gosip-addr", ":7946"}, "weir serve: unknown flag --gosip-addr (did you mean --gossip-addr?)"},
		{[]string{"serve", "--limit", "x.yaml"}, "weir serve: unknown flag --limit (did you mean --limits?)"},
		{[]string{"take", "--adr", "x", "export", "k"}, "weir take: unknown flag --adr (did you mean --addr?)"},
		{[]string{"serve", "--zzzz"}, "weir serve: unknown flag --zzzz"},
		{[]string{"hot", "--n", "many"}, `weir hot: invalid value "many" for flag -n: parse error`},
	} {
		code, stdout, stderr := runCmd(tt.args...)
		lines := strings.Split(strings.TrimSpace(stderr), "\n")
		if code != 2 || stdout != "" || len(lines) != 2 || lines[0] != tt.want || !strings.HasPrefix(lines[1], "run 'weir ") {
			t.Errorf("%q: exit %d, stderr %q; want 2 and %q with a pointer to --help", tt.args, code, stderr, tt.want)
		}
	}
}

// TestAddrWithoutScheme: --addr takes host:port and :port as well as a
// URL; anything else is refused at once with the forms it takes.
func TestAddrWithoutScheme(t *testing.T) {
	base := startNode(t)
	hostport := strings.TrimPrefix(base, "http://")
	_, port, _ := strings.Cut(hostport, ":")
	for _, addr := range []string{hostport, ":" + port, hostport + "/", base} {
		if code, stdout, stderr := runCmd("take", "--addr", addr, "export", "tenant:addr"); code != 0 {
			t.Errorf("take --addr %s: exit %d, stdout %q, stderr %q; want 0", addr, code, stdout, stderr)
		}
		if code, _, stderr := runCmd("status", "--addr", addr); code != 0 {
			t.Errorf("status --addr %s: exit %d, stderr %q", addr, code, stderr)
		}
	}
	for _, addr := range []string{"ftp://" + hostport, "http://", "http://" + hostport + "/v1", "a b:1", "http://u:p@" + hostport} {
		code, _, stderr := runCmd("take", "--addr", addr, "export", "k")
		if code != 2 || !strings.Contains(stderr, "want host:port, :port or http(s)://host:port") {
			t.Errorf("take --addr %q: exit %d, stderr %q; want 2 and the forms --addr takes", addr, code, stderr)
		}
	}
}

// TestLeaveTimeoutFlag: --leave-timeout (or WEIR_LEAVE_TIMEOUT) sets the
// bound of each step of the graceful leave, and with it the shutdown's
// whole bound; a leave timeout that is not positive is refused.
func TestLeaveTimeoutFlag(t *testing.T) {
	p := parseServe(t, []string{"--node-name=n1", "--leave-timeout=7s", "--shutdown-timeout=20s"}, nil)
	if p.cfg.LeaveTimeout != 7*time.Second || p.cfg.ShutdownBound() != 41*time.Second {
		t.Errorf("--leave-timeout=7s: leave timeout %v, shutdown bound %v; want 7s and 20s + 3×7s", p.cfg.LeaveTimeout, p.cfg.ShutdownBound())
	}
	if p := parseServe(t, []string{"--node-name=n1"}, map[string]string{"WEIR_LEAVE_TIMEOUT": "2s"}); p.cfg.LeaveTimeout != 2*time.Second {
		t.Errorf("WEIR_LEAVE_TIMEOUT=2s: leave timeout %v", p.cfg.LeaveTimeout)
	}
	cfg, cf, pf := node.DefaultConfig(), clusterFlags{}, processFlags{logFormat: "text"}
	fs := newFlagSet("serve")
	serveFlags(fs, &cfg, &cf, &pf)
	if err := parseWithEnv(fs, []string{"--node-name=n1", "--leave-timeout=0s"}, env(nil)); err != nil {
		t.Fatal(err)
	}
	if err := cf.apply(&cfg); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err == nil || err.Error() != "node: leave timeout must be positive" {
		t.Errorf("--leave-timeout=0s: Validate = %v, want the leave timeout refused, alone", err)
	}
}
