package limits

import (
	"context"
	"crypto/sha256"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weir-rl/weir/internal/filewatch"
)

// Reloader holds the limits file in force and replaces it when the file on
// disk changes: on Reload (the node calls it on SIGHUP) and, while Run runs,
// on file-system events. A new file that does not parse is rejected: the
// last valid one stays in force.
//
// Current never blocks (the File is published with an atomic.Pointer);
// Reload and Run's reloads are serialized, so onReload sees the files in
// the order they were swapped in. A Reloader is safe for concurrent use.
type Reloader struct {
	path     string // as given, for messages and reading
	logger   *slog.Logger
	onReload func(f *File, err error)
	debounce time.Duration // filewatch.Config.Debounce: zero is filewatch.Debounce; tests shorten it before Run
	maxDelay time.Duration // filewatch.Config.MaxDelay: zero is filewatch.MaxDelay

	cur atomic.Pointer[File]

	mu      sync.Mutex // serializes reloads and onReload calls; guards the fields below
	seen    [32]byte   // SHA-256 of the content last read, valid or not
	readErr string     // the read error last reported by Run, not repeated while it lasts
}

// NewReloader returns a Reloader for the limits file at path, with initial
// (normally the result of Load(path)) in force; initial may be nil, and then
// Current is nil until a reload succeeds. logger may be nil (no logs).
// onReload, which may be nil, is called after every reload attempt, with the
// new File or with the reason it was rejected (f nil); it is called with the
// Reloader's lock held, so it must not call Reload. An empty path means
// there is no file (the embedded default is in force): Reload then fails
// with an error and Run only waits for its context. NewReloader starts no
// goroutine.
func NewReloader(path string, initial *File, logger *slog.Logger, onReload func(f *File, err error)) *Reloader {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if onReload == nil {
		onReload = func(*File, error) {}
	}
	r := &Reloader{
		path:     path,
		logger:   logger,
		onReload: onReload,
	}
	if initial != nil {
		r.cur.Store(initial)
		r.seen = initial.sum
	}
	return r
}

// Current returns the limits file in force. It does not lock or allocate.
func (r *Reloader) Current() *File { return r.cur.Load() }

// Reload reads and parses the file now. A valid file is swapped in (even
// when unchanged) and reported to onReload; an invalid or unreadable one is
// logged, reported to onReload with f nil and returned, and the last valid
// file stays in force.
func (r *Reloader) Reload() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reload(false)
}

// reload does one reload with r.mu held. fromWatch skips content already
// seen and read errors already reported, so that events that change nothing
// (a chmod, a touch, a sibling file) stay silent.
func (r *Reloader) reload(fromWatch bool) error {
	if r.path == "" {
		err := errorf("no limits file to reload: the embedded default is in force")
		r.reject(err)
		return err
	}
	data, err := readLimited(r.path)
	if err != nil {
		err = errorf("reload: %w", err)
		if fromWatch && r.readErr == err.Error() {
			return err
		}
		r.readErr = err.Error()
		r.seen = [32]byte{}
		r.reject(err)
		return err
	}
	r.readErr = ""
	sum := sha256.Sum256(data)
	if fromWatch && sum == r.seen {
		return nil
	}
	r.seen = sum
	f, err := Parse(data, r.path)
	if err != nil {
		r.reject(err)
		return err
	}
	old := r.cur.Swap(f)
	r.logger.Info("limits file loaded", "path", r.path, "version", f.Version, "limits", len(f.Limits))
	if old != nil && old.Version == f.Version && old.sum != f.sum {
		r.logger.Warn("limits file changed but its version did not: nodes cannot tell the two apart; bump version on every change",
			"path", r.path, "version", f.Version)
	}
	r.onReload(f, nil)
	return nil
}

// reject logs a rejected reload and reports it.
func (r *Reloader) reject(err error) {
	attrs := []any{"path", r.path, "err", err}
	if cur := r.cur.Load(); cur != nil {
		attrs = append(attrs, "keeping_version", cur.Version)
	}
	r.logger.Error("limits file rejected; the last valid one stays in force", attrs...)
	r.onReload(nil, err)
}

// Run watches the file until ctx ends and reloads it when it changes,
// returning nil then. It watches with filewatch: the file's directory, not
// the file, so it sees editors that write a new file and rename it over the
// old one, and Kubernetes ConfigMap updates (a swap of the "..data"
// symlink); when path is a symlink, the directory of its target too,
// resolved again after every burst of events. A burst is read once,
// filewatch.Debounce after it ends (at most filewatch.MaxDelay after it
// starts), and content identical to the last read is ignored. Run first
// reloads once, as soon as the watch is up, if the file differs from the
// one in force, so a change made before Run started is not missed. It
// returns an error only when the watch cannot be set up. Run must not be
// called twice at once.
func (r *Reloader) Run(ctx context.Context) error {
	if r.path == "" {
		<-ctx.Done()
		return nil
	}
	err := filewatch.Run(ctx, filewatch.Config{
		Files:    []string{r.path},
		Debounce: r.debounce,
		MaxDelay: r.maxDelay,
		Initial:  true,
		Logger:   r.logger.With("path", r.path),
	}, r.check)
	if err != nil {
		return errorf("watch %s: %w", r.path, err)
	}
	return nil
}

// check reloads if the file's content changed.
func (r *Reloader) check() {
	r.mu.Lock()
	defer r.mu.Unlock()
	_ = r.reload(true) // reported inside
}

// readLimited reads a file, up to one byte over MaxFileSize so that Parse
// can tell an oversized file.
func readLimited(path string) ([]byte, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	return io.ReadAll(io.LimitReader(fh, MaxFileSize+1))
}
