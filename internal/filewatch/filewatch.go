// Package filewatch tells its caller when any of a few files may have
// changed on disk. It watches the files' directories, not the files, so it
// sees editors that write a new file and rename it over the old one,
// certificate tools that replace a file, and Kubernetes Secret and
// ConfigMap updates (a swap of the "..data" symlink). The caller re-reads
// the files and decides whether anything changed; filewatch only wakes it.
package filewatch

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Timing of Run.
const (
	// Debounce is how long Run waits after the last event of a burst
	// before it calls onChange.
	Debounce = 100 * time.Millisecond
	// MaxDelay bounds the wait after the first event of a burst, so a file
	// that keeps changing is still reported.
	MaxDelay = time.Second
)

// Run watches the directories of paths until ctx ends, and calls onChange
// (from Run's goroutine, never concurrently) once per burst of events that
// may have changed one of the files: Debounce after the burst's last
// event, at most MaxDelay after its first. Events that change no content
// (chmod) and events on other files are ignored. When a path is a symlink
// the directory of its target (at start) is watched too. Run returns nil
// when ctx ends and an error only when the watch cannot be set up. logger
// receives watcher errors; nil discards them.
func Run(ctx context.Context, paths []string, onChange func(), logger *slog.Logger) error {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("filewatch: %w", err)
	}
	defer w.Close()
	names := map[string]bool{}
	dirs := map[string]bool{}
	for _, p := range paths {
		abs, err := filepath.Abs(p)
		if err != nil {
			return fmt.Errorf("filewatch: %s: %w", p, err)
		}
		names[abs] = true
		dirs[filepath.Dir(abs)] = true
		if t, err := filepath.EvalSymlinks(abs); err == nil {
			if t, err = filepath.Abs(t); err == nil && t != abs {
				names[t] = true
				dirs[filepath.Dir(t)] = true
			}
		}
	}
	for d := range dirs {
		if err := w.Add(d); err != nil {
			return fmt.Errorf("filewatch: watch %s: %w", d, err)
		}
	}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	var first time.Time // first event of the pending burst; zero when none
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			if ev.Op == fsnotify.Chmod {
				continue
			}
			name := filepath.Clean(ev.Name)
			if !names[name] && !strings.HasPrefix(filepath.Base(name), "..") {
				continue
			}
			now := time.Now()
			if first.IsZero() {
				first = now
			}
			timer.Reset(max(min(Debounce, MaxDelay-now.Sub(first)), 0))
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			logger.Warn("file watcher error", "err", err)
		case <-timer.C:
			first = time.Time{}
			onChange()
		}
	}
}
