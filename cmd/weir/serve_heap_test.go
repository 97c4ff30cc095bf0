package main

import (
	"bytes"
	"log/slog"
	"runtime/debug"
	"strings"
	"testing"
)

// gcPercent reads GOGC without changing it.
func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

func TestStartHeapFloor(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	noEnv := func(string) string { return "" }

	stop := startHeapFloor(64, func(k string) string {
		if k == "GOGC" {
			return "200"
		}
		return ""
	}, log)
	if p := gcPercent(); p != 100 {
		t.Fatalf("GOGC set: the floor changed GOGC to %d", p)
	}
	stop()
	if !strings.Contains(logs.String(), "heap floor off: GOGC is set") {
		t.Fatalf("log %q does not say the floor is off", logs.String())
	}

	startHeapFloor(0, noEnv, log)()
	if p := gcPercent(); p != 100 {
		t.Fatalf("--heap-floor-mib 0 changed GOGC to %d", p)
	}

	// This test process's live heap is far below half of 64 MiB.
	stop = startHeapFloor(64, noEnv, log)
	if p := gcPercent(); p <= 100 {
		t.Fatalf("GOGC with a 64 MiB floor = %d, want it raised", p)
	}
	stop()
	if p := gcPercent(); p != 100 {
		t.Fatalf("GOGC after stop = %d, want 100", p)
	}
}

func TestHeapFloorFlagBounds(t *testing.T) {
	for _, v := range []string{"-1", "1048577", "x"} {
		var stderr bytes.Buffer
		if code := serve([]string{"--heap-floor-mib", v}, &bytes.Buffer{}, &stderr); code != 2 {
			t.Errorf("--heap-floor-mib %s: exit %d, want 2 (%s)", v, code, stderr.String())
		}
		if !strings.Contains(stderr.String(), "heap-floor-mib") {
			t.Errorf("--heap-floor-mib %s: stderr %q does not name the flag", v, stderr.String())
		}
	}
}
