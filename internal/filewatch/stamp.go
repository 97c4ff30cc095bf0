package filewatch

import (
	"context"
	"os"
)

// Stamp is what a caller read from a set of files looked like just before
// it read them: each file's identity, size and modification time (nil for
// a file that could not be stat'ed). A caller that loads its files before
// Run starts keeps the Stamp of that load, and with Config.Initial reloads
// only when Changed says the files are not the ones it read, so a file
// replaced in between is loaded and an unchanged start reloads nothing.
type Stamp []os.FileInfo

// StampOf stats paths, in order. Take it before reading the files: a file
// replaced while it is read then reads as changed afterwards.
func StampOf(paths ...string) Stamp {
	s := make(Stamp, len(paths))
	for i, p := range paths {
		s[i], _ = os.Stat(p)
	}
	return s
}

// Changed reports whether paths are not the files s was taken of: another
// count, a file missing now or then, another file (renamed over it),
// another size or another modification time.
func (s Stamp) Changed(paths ...string) bool {
	if len(paths) != len(s) {
		return true
	}
	for i, fi := range StampOf(paths...) {
		old := s[i]
		if fi == nil || old == nil || !os.SameFile(fi, old) || fi.Size() != old.Size() || !fi.ModTime().Equal(old.ModTime()) {
			return true
		}
	}
	return false
}

// RunReloading is Run for a caller that loaded its files before Run and
// reloads them when they change: reload runs once per burst of events,
// and once as soon as the watches are up (Config.Initial) when loaded,
// the Stamp of the caller's last good load, no longer matches cfg.Files.
// So a file replaced between the load and the watch is reloaded, and an
// unchanged start reloads nothing.
func RunReloading(ctx context.Context, cfg Config, loaded func() Stamp, reload func()) error {
	cfg.Initial = true
	first := true
	return Run(ctx, cfg, func() {
		if first {
			first = false
			if !loaded().Changed(cfg.Files...) {
				return
			}
		}
		reload()
	})
}
