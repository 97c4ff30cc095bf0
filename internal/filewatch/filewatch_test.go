package filewatch

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
)

// waitFor is how long a test waits for a file-system event to be seen.
const waitFor = 10 * time.Second

// quick is the debounce of the tests that run a watcher.
const quick = 20 * time.Millisecond

func TestBurst(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	b := burst{debounce: 100 * time.Millisecond, maxDelay: time.Second}
	for i, step := range []struct {
		end  bool // end the burst instead of adding an event
		now  time.Time
		want time.Duration
	}{
		{now: at(0), want: 100 * time.Millisecond},    // the first event starts a burst
		{now: at(50), want: 100 * time.Millisecond},   // a later one pushes its end back
		{now: at(950), want: 50 * time.Millisecond},   // but no later than maxDelay after the first
		{now: at(1000), want: 0},                      // maxDelay reached: end now
		{now: at(1500), want: 0},                      // past it: still now, never negative
		{end: true},                                   // onChange ran
		{now: at(1600), want: 100 * time.Millisecond}, // a new burst
		{now: at(1550), want: 100 * time.Millisecond}, // time going backwards does not shorten it
	} {
		if step.end {
			b.end()
			continue
		}
		if got := b.add(step.now); got != step.want {
			t.Errorf("step %d: add(%v) = %v, want %v", i, step.now.Sub(t0), got, step.want)
		}
	}
}

func TestRelevantFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "limits.yaml")
	s, err := newWatchSet([]string{path}, nil)
	if err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(t.TempDir(), "real.yaml")
	s.targets[path] = target
	for _, tc := range []struct {
		name string
		op   fsnotify.Op
		want bool
	}{
		{path, fsnotify.Write, true},
		{path, fsnotify.Create, true},
		{path, fsnotify.Rename, true},
		{path, fsnotify.Remove, true},
		{path, fsnotify.Chmod, false},
		{target, fsnotify.Write, true},
		{filepath.Join(dir, "..data"), fsnotify.Create, true},
		{filepath.Join(dir, "other.yaml"), fsnotify.Write, false},
		{filepath.Join(dir, "limits.yaml.tmp"), fsnotify.Create, false},
		{filepath.Join(dir, ".limits.yaml.swp"), fsnotify.Write, false},
	} {
		if got := s.relevant(fsnotify.Event{Name: tc.name, Op: tc.op}); got != tc.want {
			t.Errorf("relevant(%s %v) = %v, want %v", tc.name, tc.op, got, tc.want)
		}
	}
}

func TestRelevantDir(t *testing.T) {
	dir := t.TempDir()
	s, err := newWatchSet(nil, []string{dir})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		op   fsnotify.Op
		want bool
	}{
		{filepath.Join(dir, "a.yaml"), fsnotify.Write, true},
		{filepath.Join(dir, "b.yml"), fsnotify.Create, true},
		{filepath.Join(dir, "notes.txt"), fsnotify.Remove, true},
		{filepath.Join(dir, "a.yaml"), fsnotify.Chmod, true},
		{filepath.Join(dir, "..data"), fsnotify.Rename, true},
		{dir, fsnotify.Remove, true},
		{filepath.Join(dir, "sub", "a.yaml"), fsnotify.Write, false},
		{filepath.Join(filepath.Dir(dir), "elsewhere.yaml"), fsnotify.Write, false},
	} {
		if got := s.relevant(fsnotify.Event{Name: tc.name, Op: tc.op}); got != tc.want {
			t.Errorf("relevant(%s %v) = %v, want %v", tc.name, tc.op, got, tc.want)
		}
	}
}

// watch runs Run with cfg (Initial set, Debounce quick) and calls read at
// every onChange, sending its result on the returned channel. It waits for
// the initial call, so the watches are up when it returns. stop ends Run
// and checks that it returned nil.
func watch(t *testing.T, cfg Config, read func() string) (changes <-chan string, stop func()) {
	t.Helper()
	cfg.Initial = true
	cfg.Debounce = quick
	ch := make(chan string, 64)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, func() { ch <- read() }) }()
	stop = func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
	}
	select {
	case <-ch:
	case err := <-done:
		t.Fatalf("Run returned early: %v", err)
	case <-time.After(waitFor):
		stop()
		t.Fatal("no initial onChange within the deadline")
	}
	return ch, stop
}

// await waits for onChange to report want, skipping other reports (a
// write may be seen in steps), and fails the test after waitFor.
func await(t *testing.T, changes <-chan string, want string) {
	t.Helper()
	deadline := time.After(waitFor)
	for {
		select {
		case got := <-changes:
			if got == want {
				return
			}
		case <-deadline:
			t.Fatalf("onChange never saw %q within the deadline", want)
		}
	}
}

// reader returns a read function for watch that returns path's content.
func reader(path string) func() string {
	return func() string {
		b, err := os.ReadFile(path)
		if err != nil {
			return "error: " + err.Error()
		}
		return string(b)
	}
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestRunFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tokens")
	writeFile(t, path, "1")
	changes, stop := watch(t, Config{Files: []string{path}}, reader(path))
	defer stop()

	writeFile(t, path, "2") // in place
	await(t, changes, "2")
	tmp := path + ".tmp"
	writeFile(t, tmp, "3")
	if err := os.Rename(tmp, path); err != nil { // replaced
		t.Fatal(err)
	}
	await(t, changes, "3")
}

// TestRunDir checks that every file of a watched directory matters, new
// files included: none of them is named in Files.
func TestRunDir(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.yaml"), "a1")
	list := func() string {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return "error: " + err.Error()
		}
		var s string
		for _, e := range entries {
			b, _ := os.ReadFile(filepath.Join(dir, e.Name()))
			s += e.Name() + "=" + string(b) + ";"
		}
		return s
	}
	changes, stop := watch(t, Config{Dirs: []string{dir}}, list)
	defer stop()

	writeFile(t, filepath.Join(dir, "a.yaml"), "a2")
	await(t, changes, "a.yaml=a2;")
	writeFile(t, filepath.Join(dir, "b.yml"), "b1")
	await(t, changes, "a.yaml=a2;b.yml=b1;")
	if err := os.Remove(filepath.Join(dir, "a.yaml")); err != nil {
		t.Fatal(err)
	}
	await(t, changes, "b.yml=b1;")
}

// TestRunFollowsSwappedTarget swaps a ConfigMap-style "..data" symlink so
// that the watched file's target moves to a new directory, then edits the
// new target in place. That edit happens only in the new directory, so it
// is seen only if Run resolved the target again after the swap.
func TestRunFollowsSwappedTarget(t *testing.T) {
	dir := t.TempDir()
	mkdir := func(name, content string) {
		t.Helper()
		if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, name, "limits.yaml"), content)
	}
	link := func(target, name string) {
		t.Helper()
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	mkdir("..v1", "1")
	link("..v1", "..data")
	path := filepath.Join(dir, "limits.yaml")
	link(filepath.Join("..data", "limits.yaml"), "limits.yaml")
	changes, stop := watch(t, Config{Files: []string{path}}, reader(path))
	defer stop()

	// The swap, as the kubelet does it.
	mkdir("..v2", "2")
	link("..v2", "..data_tmp")
	if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, "..v1")); err != nil {
		t.Fatal(err)
	}
	await(t, changes, "2")

	writeFile(t, filepath.Join(dir, "..v2", "limits.yaml"), "3")
	await(t, changes, "3")
}

func TestRunCannotWatch(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	for _, cfg := range []Config{
		{Dirs: []string{missing}},
		{Files: []string{filepath.Join(missing, "limits.yaml")}},
	} {
		if err := Run(context.Background(), cfg, func() { t.Error("onChange called") }); err == nil {
			t.Errorf("Run(%+v) = nil, want an error", cfg)
		}
	}
}
