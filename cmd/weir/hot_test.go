package main

import (
	"strings"
	"testing"
)

func TestHotPrintsMergedKeys(t *testing.T) {
	addr := startNode(t)
	for range 3 {
		runCmd("take", "--addr", addr, "export", "tenant:noisy")
	}
	runCmd("take", "--addr", addr, "export", "tenant:quiet")
	code, stdout, stderr := runCmd("hot", "--addr", addr, "--limit", "export", "--n", "5")
	if code != 0 {
		t.Fatalf("hot: exit %d, stderr %q", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "LIMIT") ||
		!strings.Contains(lines[1], "tenant:noisy") || !strings.Contains(lines[1], " 3 ") ||
		!strings.Contains(lines[2], "tenant:quiet") || !strings.HasPrefix(lines[3], "merged from ") {
		t.Errorf("hot printed:\n%s", stdout)
	}
	if code, stdout, _ := runCmd("hot", "--addr", addr, "--json"); code != 0 || !strings.Contains(stdout, `"key":"tenant:noisy","cost":3`) {
		t.Errorf("hot --json: exit %d, %s", code, stdout)
	}
	for _, args := range [][]string{
		{"hot", "--addr", addr, "--limit", "nope"},
		{"hot", "--addr", addr, "--n", "0"},
		{"hot", "--addr", addr, "extra"},
		{"hot", "--addr", "http://127.0.0.1:1"},
	} {
		if code, _, _ := runCmd(args...); code != 2 {
			t.Errorf("%q: exit %d, want 2", args, code)
		}
	}
}
