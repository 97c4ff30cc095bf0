package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestLogLinesNameEachAttributeOnce: the node's name, carried by serve's
// logger and named again by the gossip component and the "serving" line,
// appears once per line, in text and JSON; another value under the same
// key, and attributes in groups, are kept.
func TestLogLinesNameEachAttributeOnce(t *testing.T) {
	for _, json := range []bool{false, true} {
		var buf bytes.Buffer
		opts := &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		}}
		var h slog.Handler = slog.NewTextHandler(&buf, opts)
		if json {
			h = slog.NewJSONHandler(&buf, opts)
		}
		log := slog.New(newDedupHandler(h)).With("node", "vm")
		gossip := log.With("component", "gossip", "node", "vm")
		gossip.Info("gossip: view", "node", "vm", "epoch", 3)
		log.Info("serving", "node", "vm", "http", ":8080")
		log.Info("member joined", "node", "other")
		log.WithGroup("g").Info("grouped", "node", "vm")
		want := []string{
			`level=INFO msg="gossip: view" node=vm component=gossip epoch=3`,
			`level=INFO msg=serving node=vm http=:8080`,
			`level=INFO msg="member joined" node=vm node=other`,
			`level=INFO msg=grouped node=vm g.node=vm`,
		}
		if json {
			want = []string{
				`{"level":"INFO","msg":"gossip: view","node":"vm","component":"gossip","epoch":3}`,
				`{"level":"INFO","msg":"serving","node":"vm","http":":8080"}`,
				`{"level":"INFO","msg":"member joined","node":"vm","node":"other"}`,
				`{"level":"INFO","msg":"grouped","node":"vm","g":{"node":"vm"}}`,
			}
		}
		if got := strings.Split(strings.TrimSpace(buf.String()), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("json=%v:\n%s\nwant\n%s", json, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}
