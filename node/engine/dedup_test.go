package engine

import (
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/internal/dedup"
)

func TestTakeDedupPendingAndFailed(t *testing.T) {
	d := newTakeDedup(dedup.Config{Window: time.Second, MaxEntries: 8}, prometheus.NewRegistry())
	now := time.Unix(0, 0)
	checks := []api.Check{{Limit: "l", Key: "k", Cost: 1}}
	release := make(chan struct{})
	entered := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _, _ = d.once(now, "id", checks, func() ([]api.Result, bool, error) {
			close(entered)
			<-release
			return []api.Result{{Limit: "l", Allowed: true, Remaining: 3}}, true, nil
		})
	}()
	<-entered
	_, _, err := d.once(now, "id", checks, func() ([]api.Result, bool, error) {
		t.Fatal("a take in progress was decided twice")
		return nil, false, nil
	})
	var apiErr *api.Error
	if !errors.As(err, &apiErr) || apiErr.Code != api.CodeUnavailable {
		t.Fatalf("while in progress: %v; want CodeUnavailable", err)
	}
	close(release)
	<-done
	res, ok, err := d.once(now, "id", checks, nil)
	if err != nil || !ok || res[0].Remaining != 3 {
		t.Fatalf("replay = %+v, %v, %v", res, ok, err)
	}
	// A failed decision is forgotten, so the retry decides.
	calls := 0
	fail := func() ([]api.Result, bool, error) { calls++; return nil, false, errors.New("boom") }
	_, _, _ = d.once(now, "id2", checks, fail)
	_, _, _ = d.once(now, "id2", checks, fail)
	if calls != 2 {
		t.Fatalf("a failed take was remembered: %d calls", calls)
	}
}
