package client_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Leases run goroutines and the node tests start real servers: every test
// must leave none behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
