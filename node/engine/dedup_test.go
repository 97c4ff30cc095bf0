package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/bucket"
	"github.com/weir-rl/weir/internal/dedup"
	"github.com/weir-rl/weir/lease"
	"github.com/weir-rl/weir/node/limits"
)

func TestTakeDedupPendingAndFailed(t *testing.T) {
	d := newTakeDedup(dedup.Config{Window: time.Second, MaxEntries: 8}, "n/1", prometheus.NewRegistry())
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

// A retry of an inline take carries its inline limit decoded anew: equal
// parameters are the same take (replayed), other parameters a misuse.
func TestTakeDedupInlineByValue(t *testing.T) {
	d := newTakeDedup(dedup.Config{Window: time.Second, MaxEntries: 8}, "n/1", prometheus.NewRegistry())
	now := time.Unix(0, 0)
	first := []api.Check{{Limit: "per-user", Key: "u", Cost: 1, Inline: &api.InlineLimit{Capacity: 2, Rate: "1/h"}}}
	take := func() ([]api.Result, bool, error) { return []api.Result{{Limit: "per-user", Allowed: true}}, true, nil }
	if _, ok, err := d.once(now, "id", first, take); err != nil || !ok {
		t.Fatalf("first: %v, %v", ok, err)
	}
	retry := []api.Check{{Limit: "per-user", Key: "u", Cost: 1, Inline: &api.InlineLimit{Capacity: 2, Rate: "1/h"}}}
	if _, ok, err := d.once(now, "id", retry, nil); err != nil || !ok {
		t.Fatalf("retry with equal inline parameters: %v, %v; want the first answer", ok, err)
	}
	other := []api.Check{{Limit: "per-user", Key: "u", Cost: 1, Inline: &api.InlineLimit{Capacity: 3, Rate: "1/h"}}}
	var apiErr *api.Error
	if _, _, err := d.once(now, "id", other, nil); !errors.As(err, &apiErr) || apiErr.Code != api.CodeInvalid {
		t.Fatalf("other inline parameters under the same id: %v; want CodeInvalid", err)
	}
}

// BenchmarkTakeDedupOnce is the owner's request-id memory at a steady
// 50,000 fresh ids a second with the default bounds: once full, every take
// records an id and expires the one its window ended.
func BenchmarkTakeDedupOnce(b *testing.B) {
	d := newTakeDedup(dedup.DefaultConfig(), "n/1", prometheus.NewRegistry())
	checks := []api.Check{{Limit: "bench", Key: "k1", Cost: 1}}
	res := []api.Result{{Limit: "bench", Allowed: true, Remaining: 9, Capacity: 10}}
	take := func() ([]api.Result, bool, error) { return res, true, nil }
	ids := make([]string, 1<<20)
	for i := range ids {
		ids[i] = fmt.Sprintf("%016x", uint64(i)*0x9e3779b97f4a7c15)
	}
	now := time.Unix(0, 0)
	const step = 20 * time.Microsecond // 50,000/s
	// Fill 12 s: past the window.
	for i := range 600_000 {
		now = now.Add(step)
		_, _, _ = d.once(now, ids[i%len(ids)], checks, take)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		now = now.Add(step)
		if _, _, err := d.once(now, ids[(600_000+i)%len(ids)], checks, take); err != nil {
			b.Fatal(err)
		}
	}
}

// Run's sweep forgets request ids whose window ended even when no new id
// arrives, so a burst of client takes does not stay in memory (and in
// every garbage collection) after its callers went quiet.
func TestSweepForgetsExpiredRequestIDs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, err := limits.Parse([]byte(allotLimits), "test")
		if err != nil {
			t.Fatal(err)
		}
		e, err := New(Config{
			Name: "owner", Store: bucket.LocalConfig(), FallbackStore: bucket.LocalConfig(), Leases: lease.DefaultConfig(),
			MaxKeyBytes: 512, SweepInterval: 10 * time.Second,
			TakeDedup: dedup.Config{Window: 15 * time.Second, MaxEntries: 1 << 10},
		}, Deps{
			Limits: func() *limits.File { return f }, Clock: time.Now, Registry: prometheus.NewRegistry(),
			Router: SingleNode{}, Peers: NoPeers{}, Changes: NoChanges{},
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); e.Run(ctx) }()
		defer func() { cancel(); <-done }()
		for i := range 100 {
			checks := []api.Check{{Limit: "plain", Key: fmt.Sprint("k", i), Cost: 1}}
			if _, _, err := e.ServeTake(checks, fmt.Sprint("id-", i), api.Tenant{}); err != nil {
				t.Fatalf("take %d: %v", i, err)
			}
		}
		if got := heldIDs(e.dedup); got != 100 {
			t.Fatalf("ids held after the takes = %d, want 100", got)
		}
		time.Sleep(12 * time.Second) // the sweep at 10 s, inside the window: kept
		synctest.Wait()
		if got := heldIDs(e.dedup); got != 100 {
			t.Fatalf("ids held within their window = %d, want 100", got)
		}
		time.Sleep(10 * time.Second) // the sweep at 20 s, past the window
		synctest.Wait()
		if got := heldIDs(e.dedup); got != 0 {
			t.Fatalf("ids held a sweep after their window = %d, want 0", got)
		}
	})
}

// A retry gets its first answer back field for field, whether the answer
// was packed without pointers (one plain check of this owner's) or kept
// whole (several checks, another run's evidence); and the same id with
// another check is refused either way.
func TestTakeDedupReplaysExactly(t *testing.T) {
	const run = "n/1"
	at := time.Unix(1_700_000_000, 123456789)
	plain := []api.Check{{Limit: "l", Key: "k", Cost: 2}}
	two := []api.Check{{Limit: "l", Key: "k", Cost: 2}, {Limit: "m", Key: "k", Cost: 1}}
	own := api.Result{
		Limit: "l", Allowed: true, Remaining: 7, Capacity: 10, ResetAfter: time.Second, Source: api.SourceOwner,
		Window: 10 * time.Second, Evidence: api.Evidence{Run: run, DecidedAt: at, Bucket: 42},
	}
	denied := api.Result{
		Limit: "l", Remaining: -3, Capacity: 10, RetryAfter: 300 * time.Millisecond, ResetAfter: 2 * time.Second,
		Source: api.SourceFallback, Evidence: api.Evidence{Run: run, DecidedAt: at, Bucket: 7, Fallback: true},
	}
	foreign := own
	foreign.Evidence.Run = "other/2"
	second := api.Result{Limit: "m", Allowed: true, Remaining: 1, Capacity: 2}
	cases := []struct {
		name   string
		checks []api.Check
		res    []api.Result
		ok     bool
		full   bool
		other  []api.Check
	}{
		{"one check, own evidence", plain, []api.Result{own}, true, false, []api.Check{{Limit: "l", Key: "k2", Cost: 2}}},
		{"one check denied", plain, []api.Result{denied}, false, false, []api.Check{{Limit: "l", Key: "k", Cost: 3}}},
		{"no evidence", plain, []api.Result{{Limit: "l", Allowed: true}}, true, false, []api.Check{{Limit: "x", Key: "k", Cost: 2}}},
		{"another run's evidence", plain, []api.Result{foreign}, true, true, []api.Check{{Limit: "l", Key: "k2", Cost: 2}}},
		{"two checks", two, []api.Result{own, second}, true, true, plain},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := newTakeDedup(dedup.Config{Window: time.Second, MaxEntries: 8}, run, prometheus.NewRegistry())
			now := time.Unix(0, 0)
			take := func() ([]api.Result, bool, error) { return slices.Clone(c.res), c.ok, nil }
			if _, _, err := d.once(now, "id", c.checks, take); err != nil {
				t.Fatal(err)
			}
			s := &d.shards[xxhash.Sum64String("id")%dedupShards]
			rid, _ := makeReqID("id")
			if prev, st := s.c.Lookup(now, rid); st != dedup.Done || prev.full != c.full {
				t.Fatalf("kept %v, full %v; want done, full %v", st, prev.full, c.full)
			}
			got, ok, err := d.once(now, "id", slices.Clone(c.checks), func() ([]api.Result, bool, error) {
				t.Fatal("a retry was decided again")
				return nil, false, nil
			})
			if err != nil || ok != c.ok || !sameResults(got, c.res) {
				t.Fatalf("replay = %+v, %v, %v; want %+v, %v", got, ok, err, c.res, c.ok)
			}
			var apiErr *api.Error
			if _, _, err := d.once(now, "id", c.other, nil); !errors.As(err, &apiErr) || apiErr.Code != api.CodeInvalid {
				t.Fatalf("the id reused for another take: %v; want CodeInvalid", err)
			}
		})
	}
}

// sameResults compares results field for field, decision times by Equal.
func sameResults(a, b []api.Result) bool {
	return slices.EqualFunc(a, b, func(x, y api.Result) bool {
		ok := x.Evidence.DecidedAt.Equal(y.Evidence.DecidedAt)
		x.Evidence.DecidedAt, y.Evidence.DecidedAt = time.Time{}, time.Time{}
		return ok && x == y
	})
}

func TestTakeDedupRefusesLongID(t *testing.T) {
	d := newTakeDedup(dedup.Config{Window: time.Second, MaxEntries: 8}, "n/1", prometheus.NewRegistry())
	id := strings.Repeat("x", api.MaxRequestIDBytes+1)
	var apiErr *api.Error
	_, _, err := d.once(time.Unix(0, 0), id, []api.Check{{Limit: "l", Key: "k", Cost: 1}}, func() ([]api.Result, bool, error) {
		t.Fatal("a take with an id over the bound was decided")
		return nil, false, nil
	})
	if !errors.As(err, &apiErr) || apiErr.Code != api.CodeInvalid || heldIDs(d) != 0 {
		t.Fatalf("id of %d bytes: %v, %d held; want CodeInvalid and nothing held", len(id), err, heldIDs(d))
	}
}

// heldIDs returns the ids d holds over all shards.
func heldIDs(d *takeDedup) int {
	n := 0
	for i := range d.shards {
		s := &d.shards[i]
		s.mu.Lock()
		n += s.c.Len()
		s.mu.Unlock()
	}
	return n
}
