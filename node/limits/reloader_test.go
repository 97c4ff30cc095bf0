package limits

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// waitFor is how long a test waits for a file-system event to be seen.
const waitFor = 10 * time.Second

// limitsText returns a valid limits file with the given version whose one
// limit "x" has the given capacity.
func limitsText(version, capacity int) []byte {
	return fmt.Appendf(nil, "version: %d\nlimits:\n  - {name: x, capacity: %d, rate: 1/s}\n", version, capacity)
}

// writeFile writes data to path.
func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// replaceFile writes data to a temporary file and renames it over path, as
// editors and config-management tools do.
func replaceFile(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".tmp"
	writeFile(t, tmp, data)
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// event is one onReload call.
type event struct {
	f   *File
	err error
}

// recorder collects onReload calls and logs.
type recorder struct {
	ch  chan event
	mu  sync.Mutex
	log bytes.Buffer
}

func newRecorder() *recorder { return &recorder{ch: make(chan event, 64)} }

func (r *recorder) onReload(f *File, err error) { r.ch <- event{f, err} }

func (r *recorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.log.Write(p)
}

func (r *recorder) logs() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.log.String()
}

func (r *recorder) logger() *slog.Logger { return slog.New(slog.NewTextHandler(r, nil)) }

// next waits for the next onReload call, failing the test after waitFor.
func (r *recorder) next(t *testing.T) event {
	t.Helper()
	select {
	case ev := <-r.ch:
		return ev
	case <-time.After(waitFor):
		t.Fatal("no reload within the deadline")
		return event{}
	}
}

// nextVersion waits for a successful reload to the given version, skipping
// failures and other versions (file systems may report a write in steps).
func (r *recorder) nextVersion(t *testing.T, version int64) *File {
	t.Helper()
	deadline := time.After(waitFor)
	for {
		select {
		case ev := <-r.ch:
			if ev.err == nil && ev.f.Version == version {
				return ev.f
			}
		case <-deadline:
			t.Fatalf("no reload to version %d within the deadline", version)
			return nil
		}
	}
}

func TestReloaderReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "limits.yaml")
	writeFile(t, path, limitsText(1, 5))
	initial, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	r := NewReloader(path, initial, rec.logger(), rec.onReload)
	if r.Current() != initial {
		t.Fatal("Current is not the initial file")
	}

	// A valid change swaps.
	writeFile(t, path, limitsText(2, 7))
	if err := r.Reload(); err != nil {
		t.Fatal(err)
	}
	ev := rec.next(t)
	if ev.err != nil || ev.f != r.Current() || ev.f.Version != 2 {
		t.Fatalf("onReload(%v, %v); Current version %d", ev.f, ev.err, r.Current().Version)
	}
	if l, _ := r.Current().Lookup("x"); l.Bucket.Capacity != 7 {
		t.Fatalf("capacity %d", l.Bucket.Capacity)
	}

	// A broken file keeps the old one and reports why.
	good := r.Current()
	writeFile(t, path, []byte("version: 3\nlimits:\n  - {name: x, capacity: 0, rate: 1/s}\n"))
	err = r.Reload()
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `line 3: limit "x": "capacity" must be >= 1`) {
		t.Fatalf("Reload error = %v", err)
	}
	ev = rec.next(t)
	if ev.f != nil || !errors.Is(ev.err, err) {
		t.Fatalf("onReload(%v, %v), want (nil, %v)", ev.f, ev.err, err)
	}
	if r.Current() != good {
		t.Fatal("a broken file replaced the good one")
	}
	if logs := rec.logs(); !strings.Contains(logs, "limits file rejected") || !strings.Contains(logs, "keeping_version=2") {
		t.Fatalf("logs lack the rejection:\n%s", logs)
	}

	// A missing file is reported the same way.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := r.Reload(); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Reload of a missing file = %v", err)
	}
	if ev := rec.next(t); ev.f != nil || ev.err == nil || r.Current() != good {
		t.Fatal("a missing file changed the limits in force")
	}

	// A change of content without a new version is accepted with a warning.
	writeFile(t, path, limitsText(2, 9))
	if err := r.Reload(); err != nil {
		t.Fatal(err)
	}
	rec.next(t)
	if !strings.Contains(rec.logs(), "version did not") {
		t.Fatalf("no warning about the unchanged version:\n%s", rec.logs())
	}
}

func TestReloaderNoPath(t *testing.T) {
	def := Default()
	r := NewReloader("", def, nil, nil)
	if err := r.Reload(); err == nil || r.Current() != def {
		t.Fatalf("Reload without a path = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
}

func TestReloaderNilInitial(t *testing.T) {
	path := filepath.Join(t.TempDir(), "limits.yaml")
	writeFile(t, path, limitsText(4, 1))
	r := NewReloader(path, nil, nil, nil)
	if r.Current() != nil {
		t.Fatal("Current before a load")
	}
	if err := r.Reload(); err != nil || r.Current().Version != 4 {
		t.Fatalf("Reload = %v", err)
	}
}

// TestReloaderConcurrent reads while reloading, for the race detector.
func TestReloaderConcurrent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "limits.yaml")
	writeFile(t, path, limitsText(1, 1))
	r := NewReloader(path, nil, nil, nil)
	if err := r.Reload(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				f := r.Current()
				if l, ok := f.Lookup("x"); !ok || l.Bucket.Capacity < 1 {
					t.Error("bad file in force")
					return
				}
			}
		})
	}
	for i := range 50 {
		if i%2 == 0 {
			_ = r.Reload()
		} else {
			wg.Go(func() { _ = r.Reload() })
		}
	}
	close(stop)
	wg.Wait()
}

// runReloader starts r.Run and returns a function that stops it and checks
// that it returned nil.
func runReloader(t *testing.T, r *Reloader) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
	}
}

// startWatching runs r and makes sure its watch is established: Run first
// reloads a file that changed before it started, after adding its watch, so
// once that reload is seen every later change must come from an event.
func startWatching(t *testing.T, r *Reloader, rec *recorder, path string, version int) (stop func()) {
	t.Helper()
	r.debounce = 20 * time.Millisecond
	writeFile(t, path, limitsText(version, 1))
	stop = runReloader(t, r)
	rec.nextVersion(t, int64(version))
	return stop
}

func TestReloaderRunWatchesFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "limits.yaml")
	writeFile(t, path, limitsText(1, 1))
	initial, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	r := NewReloader(path, initial, rec.logger(), rec.onReload)
	stop := startWatching(t, r, rec, path, 2)
	defer stop()

	// Written in place.
	writeFile(t, path, limitsText(3, 3))
	if f := rec.nextVersion(t, 3); r.Current() != f {
		t.Fatal("Current is not the reloaded file")
	}

	// Replaced by rename.
	replaceFile(t, path, limitsText(4, 4))
	rec.nextVersion(t, 4)

	// Broken: the old file stays and the reason is reported.
	// (Renamed into place, so that no half-written file is ever read.)
	replaceFile(t, path, []byte("version: 5\nlimits:\n  - {name: x, capacity: 1, rate: 1/s, window: 1m}\n"))
	ev := rec.next(t)
	if ev.f != nil || !strings.Contains(fmt.Sprint(ev.err), `line 3: limit "x": field "window" does not apply`) {
		t.Fatalf("onReload(%v, %v)", ev.f, ev.err)
	}
	if r.Current().Version != 4 {
		t.Fatalf("version %d in force after a broken file", r.Current().Version)
	}

	// Fixed again.
	replaceFile(t, path, limitsText(6, 6))
	rec.nextVersion(t, 6)
}

// TestReloaderRunConfigMap swaps the file as Kubernetes updates a mounted
// ConfigMap: limits.yaml -> ..data/limits.yaml, ..data -> ..v1, and an
// update renames a new ..data symlink over the old one.
func TestReloaderRunConfigMap(t *testing.T) {
	dir := t.TempDir()
	version := func(n int) {
		t.Helper()
		v := fmt.Sprintf("..v%d", n)
		if err := os.Mkdir(filepath.Join(dir, v), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, v, "limits.yaml"), limitsText(n, n))
		if err := os.Symlink(v, filepath.Join(dir, "..data_tmp")); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
		if n > 1 {
			if err := os.RemoveAll(filepath.Join(dir, fmt.Sprintf("..v%d", n-1))); err != nil {
				t.Fatal(err)
			}
		}
	}
	version(1)
	path := filepath.Join(dir, "limits.yaml")
	if err := os.Symlink(filepath.Join("..data", "limits.yaml"), path); err != nil {
		t.Fatal(err)
	}
	initial, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	r := NewReloader(path, initial, nil, rec.onReload)
	r.debounce = 20 * time.Millisecond
	stop := runReloader(t, r)
	defer stop()
	// Run's first check finds nothing new, so both changes can only be
	// seen through events.
	version(2)
	rec.nextVersion(t, 2)
	version(3)
	rec.nextVersion(t, 3)
	if r.Current().Version != 3 {
		t.Fatalf("version %d in force", r.Current().Version)
	}
}

// TestReloaderRunSymlinkTarget edits, in place, the target of a symlink
// that lives in another directory.
func TestReloaderRunSymlinkTarget(t *testing.T) {
	real := filepath.Join(t.TempDir(), "real.yaml")
	writeFile(t, real, limitsText(1, 1))
	path := filepath.Join(t.TempDir(), "limits.yaml")
	if err := os.Symlink(real, path); err != nil {
		t.Fatal(err)
	}
	initial, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	r := NewReloader(path, initial, nil, rec.onReload)
	r.debounce = 20 * time.Millisecond
	stop := runReloader(t, r)
	defer stop()
	// Version 2 is seen by Run's first check or by an event; either way
	// the watches are up by then (Run adds them before its first check),
	// and version 3, written in a directory other than the link's, can
	// only be seen through the watch on the target's directory.
	writeFile(t, real, limitsText(2, 2))
	rec.nextVersion(t, 2)
	writeFile(t, real, limitsText(3, 3))
	rec.nextVersion(t, 3)
}

func TestReloaderDebounce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "limits.yaml")
	writeFile(t, path, limitsText(1, 1))
	initial, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	r := NewReloader(path, initial, nil, rec.onReload)
	r.debounce = time.Hour // only maxDelay can end a burst
	r.maxDelay = 100 * time.Millisecond
	writeFile(t, path, limitsText(2, 2))
	stop := runReloader(t, r)
	defer stop()
	rec.nextVersion(t, 2) // Run's first check: the watch is up
	writeFile(t, path, limitsText(3, 3))
	rec.nextVersion(t, 3)
}
