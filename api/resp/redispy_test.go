package resp_test

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weir-rl/weir/auth"
	"github.com/weir-rl/weir/node"
)

// debianPython is Debian's interpreter, the one python3-redis is for (a
// python3 earlier on PATH, such as a pyenv shim, does not see it).
const debianPython = "/usr/bin/python3"

// redisPy returns Debian's python3 when it can import redis-py, skipping
// the test otherwise unless CI=true (where .ci/run installs python3-redis).
func redisPy(t *testing.T) string {
	t.Helper()
	out, err := exec.Command(debianPython, "-c", "import redis; print(redis.__version__)").CombinedOutput()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s cannot import redis (CI=true: .ci/run installs python3-redis): %v\n%s", debianPython, err, out)
		}
		t.Skipf("redis-py not installed for %s (apt-get install python3-redis): %v", debianPython, err)
	}
	t.Logf("redis-py %s", strings.TrimSpace(string(out)))
	return debianPython
}

// TestRedisPy runs testdata/redispy_check.py, redis-py as a Python
// service would use it, against a node with a tokens file: AUTH, WEIR.TAKE,
// CL.THROTTLE, leases, both kinds of pipeline (the default is MULTI/EXEC),
// INFO and HELLO.
func TestRedisPy(t *testing.T) {
	py := redisPy(t)
	const token = "acme-0123456789abcdef0123456789abcdef"
	const exportOnly = "export-0123456789abcdef0123456789abcdef"
	tokens := filepath.Join(t.TempDir(), "tokens.yaml")
	err := os.WriteFile(tokens, []byte(`version: 1
tokens:
  - name: acme
    sha256: `+auth.HashToken(token)+`
    scopes: [decide]
    key_prefix: "tenant:acme:"
  - name: export-only
    sha256: `+auth.HashToken(exportOnly)+`
    scopes: [decide]
    limits: [export]
`), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	const version = "9.8.7-py"
	rn := startNode(t, testLimits, func(c *node.Config) {
		c.Security.TokensFile = tokens
		c.RESP.Version = version
	})
	host, port, err := net.SplitHostPort(rn.addr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, py, "testdata/redispy_check.py", host, port, token, exportOnly, version).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("redispy_check.py: %v\n%s", err, out)
	}
}
