package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/weir-rl/weir/internal/nodetest"
	"github.com/weir-rl/weir/node"
)

// readmeExample finds the README's `$ curl -s -XPOST localhost:8080PATH -d
// 'BODY'` example and returns BODY and the answer printed under it (the
// lines up to the next command or the end of the block, joined).
func readmeExample(t *testing.T, path string) (body, answer string) {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	prefix := "$ curl -s -XPOST localhost:8080" + path + " -d '"
	lines := strings.Split(string(b), "\n")
	for i, l := range lines {
		rest, ok := strings.CutPrefix(l, prefix)
		if !ok {
			continue
		}
		body, _, _ = strings.Cut(rest, "'")
		var out strings.Builder
		for _, a := range lines[i+1:] {
			if strings.HasPrefix(a, "$") || strings.HasPrefix(a, "```") {
				break
			}
			out.WriteString(strings.TrimSpace(a))
		}
		return body, out.String()
	}
	t.Fatalf("README has no %q example", prefix)
	return "", ""
}

// jsonKeys lists the object keys of a JSON text in the order they appear.
func jsonKeys(s string) []string {
	var keys []string
	for _, m := range regexp.MustCompile(`"([a-z_]+)":`).FindAllStringSubmatch(s, -1) {
		keys = append(keys, m[1])
	}
	return keys
}

// TestReadmeExamplesAnswerAsShown: the README's take and lease examples,
// sent to a node run as `weir serve` runs it (clustered, the embedded
// limits), answer with the fields shown, in the order shown, and the same
// values where the clock cannot change them (the node's clock is frozen).
func TestReadmeExamplesAnswerAsShown(t *testing.T) {
	cfg := node.LocalConfig()
	cfg.NodeName = "vm"
	cfg.Clustered = true
	frozen := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	n := nodetest.Start(t, cfg, node.Deps{Clock: func() time.Time { return frozen }})
	hc := &http.Client{Timeout: 10 * time.Second}
	defer hc.CloseIdleConnections()
	for _, tc := range []struct {
		path   string
		varies []string // fields whose value differs from run to run
	}{
		{"/v1/take", []string{"ring_epoch"}},
		{"/v1/leases", []string{"id", "fencing_token"}},
	} {
		body, want := readmeExample(t, tc.path)
		resp, err := hc.Post("http://"+n.HTTPAddr()+tc.path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		got := strings.TrimSpace(string(b))
		if k, w := jsonKeys(got), jsonKeys(want); !reflect.DeepEqual(k, w) {
			t.Errorf("%s answers with the fields %v, the README shows %v\ngot:  %s\nREADME: %s", tc.path, k, w, got, want)
			continue
		}
		var g, w map[string]any
		if err := json.Unmarshal([]byte(got), &g); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(want), &w); err != nil {
			t.Fatalf("the README's %s answer is not JSON: %v\n%s", tc.path, err, want)
		}
		for _, f := range tc.varies {
			if _, ok := g[f]; !ok {
				t.Errorf("%s: no %s in %s", tc.path, f, got)
			}
			g[f], w[f] = nil, nil
		}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("%s answers\n%s\nthe README shows\n%s", tc.path, got, want)
		}
	}
}
