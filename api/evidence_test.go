package api

import "testing"

func TestEvidenceNames(t *testing.T) {
	ev := Evidence{Run: "node/a/b/ff", Bucket: 0x1a}
	if got := ev.Decider(); got != "node/a/b" {
		t.Errorf("Decider = %q", got)
	}
	if got := ev.Instance(); got != "node/a/b/ff/1a" {
		t.Errorf("Instance = %q", got)
	}
	ev.Fallback = true
	if got := ev.Instance(); got != "node/a/b/ff/f1a" {
		t.Errorf("fallback Instance = %q", got)
	}
	if got := (Evidence{}).Instance(); got != "" {
		t.Errorf("no evidence: Instance = %q", got)
	}
}
