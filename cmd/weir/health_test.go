package main

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/weir-rl/weir/internal/nodetest"
	"github.com/weir-rl/weir/node"
)

// TestHealthcheckNamesTheReason runs `weir healthcheck` against a ready
// node, a node whose only seed never answers, and an address nothing
// listens on: the failures name why (the node's /readyz reason, or the
// request's error), not only a status code.
func TestHealthcheckNamesTheReason(t *testing.T) {
	ready := startNode(t)
	if code, stdout, stderr := runCmd("healthcheck", "--addr", ready); code != 0 || stdout != "ok\n" {
		t.Fatalf("ready node: exit %d, stdout %q, stderr %q; want 0 and ok", code, stdout, stderr)
	}

	cfg := node.LocalConfig()
	cfg.NodeName = "lonely"
	cfg.Clustered = true
	cfg.Ring.Join = []string{"127.0.0.1:" + strconv.Itoa(freePort(t))} // nobody gossips there
	n := nodetest.Start(t, cfg, node.Deps{})
	code, stdout, stderr := runCmd("healthcheck", "--addr", "http://"+n.HTTPAddr())
	want := "weir healthcheck: not ready: not joined: no member has accepted this node's gossip yet"
	if code != 1 || stdout != "" || !strings.HasPrefix(stderr, want) || !strings.Contains(stderr, "--cluster-secret-file") ||
		!strings.HasSuffix(stderr, "(status 503)\n") {
		t.Fatalf("unjoined node: exit %d, stdout %q, stderr %q; want 1 and %q... naming the secret, (status 503)", code, stdout, stderr, want)
	}

	code, _, stderr = runCmd("healthcheck", "--addr", "http://127.0.0.1:"+strconv.Itoa(freePort(t)))
	if code != 1 || !strings.HasPrefix(stderr, "weir healthcheck: no answer: ") || !strings.Contains(stderr, "connection refused") {
		t.Fatalf("nothing listening: exit %d, stderr %q; want 1 and the connection error", code, stderr)
	}
}

func TestNotReadyMessage(t *testing.T) {
	for _, tc := range []struct {
		code int
		body string
		err  error
		want string
	}{
		{503, `{"status":"not_ready","reason":"shutting down"}`, nil, "not ready: shutting down (status 503)"},
		{503, `{"status":"not_ready"}`, nil, "not ready (status 503)"},
		{500, `{"error":"internal"}`, nil, `not ready (status 500): {"error":"internal"}`},
		{502, "bad gateway\nmore", nil, "not ready (status 502): bad gateway"},
		{404, "", nil, "not ready (status 404, empty body)"},
		{404, strings.Repeat("x", 300), nil, "not ready (status 404): " + strings.Repeat("x", 200) + "..."},
		{0, "", errors.New("dial tcp: connection refused"), "no answer: dial tcp: connection refused"},
	} {
		if got := notReadyMessage(tc.code, []byte(tc.body), tc.err); got != tc.want {
			t.Errorf("notReadyMessage(%d, %q, %v) = %q, want %q", tc.code, tc.body, tc.err, got, tc.want)
		}
	}
}
