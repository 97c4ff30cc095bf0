package filewatch

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestStampChanged: a stamp reads unchanged for the files it was taken of,
// and changed for each way a file can be replaced or go missing.
func TestStampChanged(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	write := func(p, s string, mtime time.Time) {
		t.Helper()
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	write(a, "one", t0)
	write(b, "two", t0)
	s := StampOf(a, b)
	if s.Changed(a, b) {
		t.Fatal("files just stamped read as changed")
	}
	if !s.Changed(a) || !s.Changed(b, a) {
		t.Fatal("another set of files reads as unchanged")
	}
	cases := map[string]func(){
		"rewritten, same size, new mtime": func() { write(a, "uno", t0.Add(time.Second)) },
		"new size, same mtime":            func() { write(a, "three", t0) },
		"renamed over": func() {
			n := filepath.Join(dir, "new")
			write(n, "one", t0)
			if err := os.Rename(n, a); err != nil {
				t.Fatal(err)
			}
		},
		"removed": func() { _ = os.Remove(a) },
	}
	for name, change := range cases {
		write(a, "one", t0)
		s := StampOf(a, b)
		change()
		if !s.Changed(a, b) {
			t.Errorf("%s: reads as unchanged", name)
		}
	}
	if missing := StampOf(filepath.Join(dir, "none")); !missing.Changed(filepath.Join(dir, "none")) {
		t.Error("a file missing when stamped reads as unchanged")
	}
}
