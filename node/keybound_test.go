package node

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/weir-rl/weir/api"
)

// TestOneKeyBound: Config.HTTP.MaxKeyBytes is the key bound of takes and
// acquires alike (it used to be a separate constant in node that HTTP's
// setting did not change), and Validate checks the HTTP part.
func TestOneKeyBound(t *testing.T) {
	cfg := LocalConfig()
	cfg.HTTP.MaxKeyBytes = 8
	n, err := New(cfg, Deps{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := n.Take(ctx, []api.Check{{Limit: "export", Key: strings.Repeat("k", 8), Cost: 1}}); err != nil {
		t.Fatalf("an 8-byte key: %v", err)
	}
	for _, call := range []func() error{
		func() error {
			_, err := n.Take(ctx, []api.Check{{Limit: "export", Key: strings.Repeat("k", 9), Cost: 1}})
			return err
		},
		func() error {
			_, err := n.Acquire(ctx, api.AcquireRequest{Limit: "export-db", Key: strings.Repeat("k", 9)})
			return err
		},
	} {
		var apiErr *api.Error
		if err := call(); err == nil || !asAPIError(err, &apiErr) || apiErr.Code != api.CodeInvalid || !strings.Contains(apiErr.Detail, "8 bytes") {
			t.Errorf("a 9-byte key: %v, want invalid_request naming the 8-byte bound", err)
		}
	}
	cfg = LocalConfig()
	if got := cfg.maxKeyBytes(); got != 512 {
		t.Errorf("default key bound %d, want 512", got)
	}
	cfg.HTTP.MaxKeyBytes = -1
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "MaxKeyBytes") {
		t.Errorf("Validate with a negative HTTP key bound: %v", err)
	}
}

func asAPIError(err error, target **api.Error) bool {
	return errors.As(err, target)
}
