package main

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

// versionLine is what `weir version` prints.
var versionLine = regexp.MustCompile(`^weir (\S+) \(commit ([^,]+), built (\S+), go\S+ \S+/\S+\)\n$`)

// TestMakeBuildStampsVersion builds weir with the Makefile's build target
// (GOFLAGS=-buildvcs=false leaves Go's own stamp empty, so only the
// Makefile's -ldflags can name the release) and checks `weir version`
// names git describe's version, the commit and a build time of now.
func TestMakeBuildStampsVersion(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatalf("make is not installed: %v", err) // make test runs under make
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	git := func(args ...string) string {
		out, err := exec.Command("git", append([]string{"-C", root}, args...)...).Output()
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(out))
	}
	// The Makefile's own fallbacks outside a git checkout.
	wantVersion, wantCommit := git("describe", "--tags", "--always", "--dirty"), git("rev-parse", "HEAD")
	if wantVersion == "" {
		wantVersion = "unknown"
	}
	if wantCommit == "" {
		wantCommit = "unknown"
	}
	start := time.Now().UTC().Truncate(time.Second)
	dir := t.TempDir()
	if out, err := exec.Command("make", "-s", "-C", root, "build", "BIN="+dir).CombinedOutput(); err != nil {
		t.Fatalf("make build: %v\n%s", err, out)
	}
	out, err := exec.Command(filepath.Join(dir, "weir"), "version").Output()
	if err != nil {
		t.Fatalf("weir version: %v", err)
	}
	m := versionLine.FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("weir version printed %q, want %s", out, versionLine)
	}
	if m[1] != wantVersion || m[2] != wantCommit {
		t.Errorf("weir version printed version %q commit %q, want %q and %q (git describe, git rev-parse)", m[1], m[2], wantVersion, wantCommit)
	}
	built, err := time.Parse(time.RFC3339, m[3])
	if err != nil || built.Before(start) || built.After(time.Now().Add(time.Second)) {
		t.Errorf("build time %q (%v): want a UTC RFC 3339 time between %v and now", m[3], err, start)
	}
}

func TestResolveBuild(t *testing.T) {
	goVer, platform := runtime.Version(), runtime.GOOS+"/"+runtime.GOARCH
	vcs := func(rev, tm, modified string) []debug.BuildSetting {
		return []debug.BuildSetting{
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: rev},
			{Key: "vcs.time", Value: tm},
			{Key: "vcs.modified", Value: modified},
		}
	}
	for _, tc := range []struct {
		name string
		s    stamp
		bi   *debug.BuildInfo
		want string
	}{
		{
			"no stamp, no build info",
			stamp{},
			nil,
			"weir (devel) (commit unknown, built unknown, " + goVer + " " + platform + ")",
		},
		{
			"no stamp, go build without VCS",
			stamp{},
			&debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}},
			"weir (devel) (commit unknown, built unknown, go1.26.0 " + platform + ")",
		},
		{
			"no stamp, go install module@version",
			stamp{},
			&debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v0.1.0"}},
			"weir v0.1.0 (commit unknown, built unknown, go1.26.0 " + platform + ")",
		},
		{
			"no stamp, VCS stamp of a clean tree",
			stamp{},
			&debug.BuildInfo{
				GoVersion: "go1.26.0", Main: debug.Module{Version: "v0.1.1-0.20261201234509-d68d05c632e2"},
				Settings: vcs("d68d05c632e270f994e97b62c877c61e6b9c871e", "2026-12-01T23:45:09Z", "false"),
			},
			"weir v0.1.1-0.20261201234509-d68d05c632e2 (commit d68d05c632e270f994e97b62c877c61e6b9c871e, committed 2026-12-01T23:45:09Z, go1.26.0 " + platform + ")",
		},
		{
			"no stamp, VCS stamp of a modified tree",
			stamp{},
			&debug.BuildInfo{
				GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"},
				Settings: vcs("d68d05c632e270f994e97b62c877c61e6b9c871e", "2026-12-01T23:45:09Z", "true"),
			},
			"weir (devel) (commit d68d05c632e270f994e97b62c877c61e6b9c871e, modified, committed 2026-12-01T23:45:09Z, go1.26.0 " + platform + ")",
		},
		{
			"the Makefile's stamp wins over the VCS stamp",
			stamp{"v0.2.0", "0123456789abcdef0123456789abcdef01234567", "2026-12-02T00:00:00Z"},
			&debug.BuildInfo{
				GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"},
				Settings: vcs("d68d05c632e270f994e97b62c877c61e6b9c871e", "2026-12-01T23:45:09Z", "true"),
			},
			"weir v0.2.0 (commit 0123456789abcdef0123456789abcdef01234567, built 2026-12-02T00:00:00Z, go1.26.0 " + platform + ")",
		},
		{
			"a dirty stamp says so once",
			stamp{"v0.2.0-3-g0123456-dirty", "0123456789abcdef0123456789abcdef01234567", "2026-12-02T00:00:00Z"},
			nil,
			"weir v0.2.0-3-g0123456-dirty (commit 0123456789abcdef0123456789abcdef01234567, built 2026-12-02T00:00:00Z, " + goVer + " " + platform + ")",
		},
		{
			"a stamped version alone",
			stamp{version: "v0.2.0"},
			&debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}},
			"weir v0.2.0 (commit unknown, built unknown, go1.26.0 " + platform + ")",
		},
	} {
		if got := resolveBuild(tc.s, tc.bi).String(); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
}
