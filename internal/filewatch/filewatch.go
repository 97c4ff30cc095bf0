// Package filewatch tells its caller when files or directories it depends
// on may have changed on disk. It is the one file watcher of Weir: the
// limits file, the envoy configuration directory, the tokens file and the
// TLS certificates are all watched with Run.
//
// It watches directories, not files, so it sees editors that write a new
// file and rename it over the old one, certificate tools that replace a
// file, and Kubernetes Secret and ConfigMap updates (a swap of the "..data"
// symlink). A watched file that is a symlink is followed: the directory of
// its target is watched too, and the target is resolved again after every
// burst of events, so a swap that moves the target to another directory
// keeps being seen. The caller re-reads what it watches and decides whether
// anything changed; filewatch only wakes it, once per burst of events.
package filewatch

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Default timing of Run.
const (
	// Debounce is how long Run waits after the last event of a burst (an
	// editor's write, rename and chmod; a ConfigMap's symlink swap) before
	// it calls onChange.
	Debounce = 100 * time.Millisecond
	// MaxDelay bounds the wait after the first event of a burst, so a file
	// that keeps changing is still reported.
	MaxDelay = time.Second
)

// Config says what Run watches and how it groups events into bursts. The
// zero Config watches nothing, with the default timing.
type Config struct {
	// Files are files whose changes matter. Run watches the directory of
	// each and, when a file is a symlink, the directory of its target,
	// resolved again after every burst. An event matters when it is on a
	// file or its target, or on an entry whose name starts with ".."
	// (Kubernetes' "..data" and its timestamped directories); a chmod alone
	// does not matter.
	Files []string
	// Dirs are directories every entry of which matters: any event in one
	// (a chmod included, since a file that became unreadable is a change
	// the caller should see) starts or extends a burst.
	Dirs []string
	// Debounce is how long Run waits after the last event of a burst
	// before it calls onChange. Zero or negative means the package's
	// Debounce (100 ms); tests shorten it.
	Debounce time.Duration
	// MaxDelay bounds the wait after the first event of a burst. Zero or
	// negative means the package's MaxDelay (1 s).
	MaxDelay time.Duration
	// Initial makes Run call onChange once as soon as its watches are set
	// up, before it handles any event, so that a caller that read its files
	// before Run started does not miss a change made in between.
	Initial bool
	// Logger receives watcher errors and directories that cannot be
	// watched after the start; nil discards them.
	Logger *slog.Logger
}

// Run watches what cfg names until ctx ends, and calls onChange once per
// burst of events that matter: Debounce after the burst's last event, at
// most MaxDelay after its first. onChange is called from Run's goroutine,
// never concurrently with itself, and after the symlink targets of
// cfg.Files have been resolved and watched again, so a change made after
// onChange starts is seen. Run blocks until ctx ends and then returns nil;
// it returns an error only when the watch cannot be set up (a directory of
// cfg.Files or one of cfg.Dirs cannot be watched). Run starts one goroutine
// (fsnotify's reader), which ends before Run returns.
func Run(ctx context.Context, cfg Config, onChange func()) error {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	b := burst{debounce: cfg.Debounce, maxDelay: cfg.MaxDelay}
	if b.debounce <= 0 {
		b.debounce = Debounce
	}
	if b.maxDelay <= 0 {
		b.maxDelay = MaxDelay
	}
	s, err := newWatchSet(cfg.Files, cfg.Dirs)
	if err != nil {
		return err
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("filewatch: %w", err)
	}
	defer w.Close()
	for _, d := range s.base {
		if err := w.Add(d); err != nil {
			return fmt.Errorf("filewatch: watch %s: %w", d, err)
		}
		s.watched[d] = true
	}
	s.follow(w, logger)
	if cfg.Initial {
		onChange()
	}

	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			if s.relevant(ev) {
				timer.Reset(b.add(time.Now()))
			}
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			logger.Warn("file watcher error", "err", err)
		case <-timer.C:
			b.end()
			s.follow(w, logger)
			onChange()
		}
	}
}

// burst groups events: it ends debounce after its last event, and at most
// maxDelay after its first. Time is an argument. The zero burst has no
// pending event; it is not safe for concurrent use (Run's goroutine owns it).
type burst struct {
	debounce, maxDelay time.Duration
	first              time.Time // first event of the pending burst; zero when none
}

// add records an event at now and returns how long to wait, from now, for
// the burst to end.
func (b *burst) add(now time.Time) time.Duration {
	if b.first.IsZero() {
		b.first = now
	}
	return max(min(b.debounce, b.maxDelay-now.Sub(b.first)), 0)
}

// end closes the pending burst: the next event starts a new one.
func (b *burst) end() { b.first = time.Time{} }

// watchSet is what one Run watches, as absolute, clean paths. It is not
// safe for concurrent use: Run's goroutine owns it.
type watchSet struct {
	files   []string          // Config.Files
	targets map[string]string // file -> its symlink target, when it has one
	dirs    map[string]bool   // Config.Dirs, watched whole
	base    []string          // directories watched for as long as Run runs
	watched map[string]bool   // directories under watch now
}

// newWatchSet resolves files and dirs to absolute paths.
func newWatchSet(files, dirs []string) (*watchSet, error) {
	s := &watchSet{
		targets: map[string]string{},
		dirs:    map[string]bool{},
		watched: map[string]bool{},
	}
	addBase := func(d string) {
		if !slices.Contains(s.base, d) {
			s.base = append(s.base, d)
		}
	}
	for _, p := range files {
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, fmt.Errorf("filewatch: %s: %w", p, err)
		}
		s.files = append(s.files, abs)
		addBase(filepath.Dir(abs))
	}
	for _, p := range dirs {
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, fmt.Errorf("filewatch: %s: %w", p, err)
		}
		s.dirs[abs] = true
		addBase(abs)
	}
	return s, nil
}

// follow resolves the symlink targets of the files again and makes the
// watches match: the directory of each target is watched, and the
// directory of a target no file points to any more is not. A file that
// cannot be resolved now (being replaced, say) keeps its previous target.
// A directory that cannot be watched is logged and tried again next time.
func (s *watchSet) follow(w *fsnotify.Watcher, logger *slog.Logger) {
	for _, f := range s.files {
		t, err := filepath.EvalSymlinks(f)
		if err != nil {
			continue
		}
		if t, err = filepath.Abs(t); err != nil {
			continue
		}
		if t == f {
			delete(s.targets, f)
		} else {
			s.targets[f] = t
		}
	}
	want := map[string]bool{}
	for _, d := range s.base {
		want[d] = true
	}
	for _, t := range s.targets {
		want[filepath.Dir(t)] = true
	}
	for d := range s.watched {
		if !want[d] {
			_ = w.Remove(d) // the directory may be gone, and its watch with it
			delete(s.watched, d)
		}
	}
	for d := range want {
		if s.watched[d] {
			continue
		}
		if err := w.Add(d); err != nil {
			logger.Warn("cannot watch the directory of a symlink target", "dir", d, "err", err)
			continue
		}
		s.watched[d] = true
	}
}

// relevant reports whether ev may have changed something the caller
// depends on (see Config.Files and Config.Dirs).
func (s *watchSet) relevant(ev fsnotify.Event) bool {
	name := filepath.Clean(ev.Name)
	if s.dirs[name] || s.dirs[filepath.Dir(name)] {
		return true
	}
	if ev.Op == fsnotify.Chmod {
		return false
	}
	if strings.HasPrefix(filepath.Base(name), "..") {
		return true
	}
	for _, f := range s.files {
		if name == f || name == s.targets[f] {
			return true
		}
	}
	return false
}
