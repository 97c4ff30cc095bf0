package node

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/weir-rl/weir/bucket"
	"github.com/weir-rl/weir/transport"
)

// This file keeps a node's owner state across a restart of the whole
// cluster (Config.StateDir). On a graceful Shutdown, once the node decides
// nothing more and has handed off what its peers took, it writes the
// buckets still in debt and its leases to StateFileName, atomically. On
// Start, before it joins, it reads the file whole, restores every entry
// locally and removes the file; the ring-change handoff (pushMoved) then
// moves the keys another member owns to it once that member is up, the
// path any bucket this node holds but does not own takes. The file is the
// handoff's own encoding (transport.EncodeStateFile): buckets are
// restored as of the instant the file was written, so they refill by the
// wall time elapsed since, and leases lose that time (a lease past expiry
// is dropped, its fencing token still raising the floor).

// StateFileName is the state file's name in Config.StateDir.
const StateFileName = "weir.state"

// saveState writes the buckets in debt and the leases this node still
// holds to its state file; without Config.StateDir it does nothing.
func (n *Node) saveState() error {
	dir := n.cfg.StateDir
	if dir == "" {
		return nil
	}
	now := n.clock()
	var st transport.State
	for _, e := range n.eng.ExportBuckets(now, nil, false) {
		if inDebt(e.Snapshot) {
			st.Buckets = append(st.Buckets, e)
		}
	}
	st.Leases = n.eng.ExportLeases(now, nil, false)
	b, err := transport.EncodeStateFile(st, now)
	if err != nil {
		return fmt.Errorf("node: state file: %w", err)
	}
	if err := writeFileAtomic(dir, StateFileName, b); err != nil {
		return fmt.Errorf("node: state file: %w", err)
	}
	n.log.Info("state saved", "path", filepath.Join(dir, StateFileName), "buckets", len(st.Buckets), "leases", len(st.Leases.Leases), "bytes", len(b))
	return nil
}

// inDebt reports whether a bucket's snapshot holds a debit worth keeping:
// a full bucket restores to what a missing one is.
func inDebt(s bucket.Snapshot) bool { return !s.Full && s.UntilFull > 0 }

// restoreState reads the state file, when there is one, and applies it
// whole: a file that cannot be read or decoded is refused with a log line
// and nothing of it is applied. restored reports a file applied, which
// dropState removes once the node runs. err is set only when the state
// directory cannot be made, a configuration error.
func (n *Node) restoreState() (restored bool, err error) {
	dir := n.cfg.StateDir
	if dir == "" {
		return false, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return false, fmt.Errorf("node: state dir: %w", err)
	}
	path := filepath.Join(dir, StateFileName)
	st, written, err := readStateFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		n.log.Info("no state file; starting with full buckets", "path", path)
		return false, nil
	case err != nil:
		n.log.Error("state file refused; starting with full buckets", "path", path, "err", err)
		return false, nil
	}
	now := n.clock()
	elapsed := max(now.Sub(written), 0)
	h := st.Leases
	for i := range h.Leases {
		h.Leases[i].Remaining -= elapsed
	}
	// Leases first: their import checks every entry before it applies one,
	// so a refusal leaves the node as it was.
	if err := n.eng.ImportLeases(now, h); err != nil {
		n.log.Error("state file refused; starting with full buckets", "path", path, "err", err)
		return false, nil
	}
	n.eng.MergeBuckets(written, st.Buckets)
	n.log.Info("state restored", "path", path, "buckets", len(st.Buckets), "leases", len(h.Leases), "age", elapsed)
	return true, nil
}

// dropState removes the applied state file, so that a crash later (which
// writes none) does not restore the same debits and leases a second time.
func (n *Node) dropState() {
	if err := removeFile(n.cfg.StateDir, StateFileName); err != nil {
		n.log.Warn("state file applied but not removed; a crash before the next save restores it again", "path", filepath.Join(n.cfg.StateDir, StateFileName), "err", err)
	}
}

// readStateFile reads and decodes the state file at path, refusing one
// larger than a state file can be before reading it.
func readStateFile(path string) (transport.State, time.Time, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return transport.State{}, time.Time{}, err
	}
	if fi.Size() > transport.MaxStateFileBody+1024 {
		return transport.State{}, time.Time{}, fmt.Errorf("%w: %d bytes, above the largest state file", transport.ErrStateFile, fi.Size())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return transport.State{}, time.Time{}, err
	}
	return transport.DecodeStateFile(b)
}

// writeFileAtomic writes b to dir/name so that a crash leaves either the
// old file or the new one whole: a temporary file in dir, synced, renamed
// over name, then the directory synced so the rename itself is durable.
func writeFileAtomic(dir, name string, b []byte) error {
	f, err := os.CreateTemp(dir, "."+name+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if e := f.Close(); err == nil {
		err = e
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, name))
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return syncDir(dir)
}

// removeFile removes dir/name and syncs dir.
func removeFile(dir, name string) error {
	if err := os.Remove(filepath.Join(dir, name)); err != nil {
		return err
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if e := d.Close(); err == nil {
		err = e
	}
	return err
}
