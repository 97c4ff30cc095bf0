package main

import (
	"context"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// testMainEnv, set to "1" in a child's environment, makes the test binary
// behave as the loadgen command (run with its arguments), so tests can
// start `loadgen ceiling` the way the suite does: by re-executing their
// own binary.
const testMainEnv = "LOADGEN_TEST_MAIN"

func TestMain(m *testing.M) {
	switch {
	case os.Getenv(testParentEnv) != "":
		os.Exit(ceilingParentMain(context.Background(), os.Getenv(testParentEnv)))
	case os.Getenv(testFakeWeirEnv) != "":
		os.Exit(fakeWeirMain(signalContext(), os.Getenv(testFakeWeirEnv), os.Args[1:]))
	case os.Getenv(testMainEnv) == "1":
		os.Exit(run(signalContext(), os.Args[1:], os.Stdout, os.Stderr))
	}
	goleak.VerifyTestMain(m)
}
