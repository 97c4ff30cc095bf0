//go:build !benchclient

package main

import (
	"context"
	"errors"
)

// goClientBuilt says the cluster-aware Go client adapter is compiled in:
// not in this build (see goclient.go, built with -tags benchclient).
const goClientBuilt = false

// newGoClientTarget is the stand-in for goclient.go's adapter while the
// cluster-aware client (client.Dial) is not part of this tree.
func newGoClientTarget(context.Context, []string, string, int, int64) (target, error) {
	return nil, errors.New("loadgen: the Go client target needs client.Dial: build with -tags benchclient")
}
