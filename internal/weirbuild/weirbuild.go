// Package weirbuild builds the weir binary for tests that run it as a
// process, with the flags `make build` uses: static (CGO_ENABLED=0) and
// -trimpath. The tests then run what is released, and every such build
// shares its compiled packages with the others and with `make build` in
// Go's build cache, so a CI on an empty cache compiles them once. It is for
// tests only.
package weirbuild

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
)

// Build builds the main package pkg (a directory or an import path) into
// out, with the extra linker flags ldflags (none when empty). A failed
// build's error carries the go command's output.
func Build(out, pkg, ldflags string) error {
	goBin, err := goTool()
	if err != nil {
		return err
	}
	args := []string{"build", "-trimpath"}
	if ldflags != "" {
		args = append(args, "-ldflags", ldflags)
	}
	cmd := exec.Command(goBin, append(args, "-o", out, pkg)...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
	}
	return nil
}

// goTool is the go command: the one on PATH, else Go's default install,
// /usr/local/go/bin/go (a test may run with a PATH that lacks it).
func goTool() (string, error) {
	if p, err := exec.LookPath("go"); err == nil {
		return p, nil
	}
	const p = "/usr/local/go/bin/go"
	if _, err := os.Stat(p); err != nil {
		return "", errors.New("weirbuild: no go command on PATH or at " + p)
	}
	return p, nil
}
