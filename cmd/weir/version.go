package main

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// Set at build time by the Makefile's build and release targets:
//
//	-ldflags "-X main.version=$(git describe --tags --always --dirty)
//	          -X main.commit=$(git rev-parse HEAD) -X main.buildTime=<UTC RFC 3339>"
//
// Empty when the binary was built without them (go build, go install).
var (
	version   = ""
	commit    = ""
	buildTime = ""
)

// versionNumber is this build's version alone, as HELLO and INFO report
// it (currentBuild's Version).
func versionNumber() string { return currentBuild().Version }

// buildInfo is what `weir version` prints.
type buildInfo struct {
	Version    string // a release tag, git describe's name, a module version or "(devel)"
	Commit     string // the full commit hash; "" when unknown
	Dirty      bool   // the tree had uncommitted changes (from the VCS stamp)
	BuildTime  string // when the binary was built; "" when unknown
	CommitTime string // when Commit was made (from the VCS stamp); "" when unknown
	GoVersion  string // the toolchain that built it
	Platform   string // GOOS/GOARCH
}

// stamp is what the linker set in version, commit and buildTime.
type stamp struct{ version, commit, buildTime string }

// currentBuild describes this binary: the linker stamp where the Makefile
// set one, else the build information Go records.
func currentBuild() buildInfo {
	bi, _ := debug.ReadBuildInfo()
	return resolveBuild(stamp{version, commit, buildTime}, bi)
}

// resolveBuild merges a linker stamp with Go's build information (nil when
// there is none), field by field: the stamp wins; else the module version
// (as `go install module@version` records it) and the VCS settings (as a
// go build with -buildvcs records them); else "(devel)" and unknown. A
// stamped version ending in -dirty marks the build dirty too.
func resolveBuild(s stamp, bi *debug.BuildInfo) buildInfo {
	out := buildInfo{
		Version: s.version, Commit: s.commit, BuildTime: s.buildTime,
		Dirty:     strings.HasSuffix(s.version, "-dirty"),
		GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH,
	}
	if bi != nil {
		if bi.GoVersion != "" {
			out.GoVersion = bi.GoVersion
		}
		if out.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			out.Version = bi.Main.Version
		}
		vcs := map[string]string{}
		for _, kv := range bi.Settings {
			vcs[kv.Key] = kv.Value
		}
		if out.Commit == "" {
			out.Commit = vcs["vcs.revision"]
			out.Dirty = out.Dirty || vcs["vcs.modified"] == "true"
		}
		out.CommitTime = vcs["vcs.time"]
	}
	if out.Version == "" {
		out.Version = "(devel)"
	}
	return out
}

// String is the line `weir version` prints, for example
//
//	weir v0.1.0 (commit 0a1b2c3d..., built 2026-12-01T23:50:00Z, go1.26.8 linux/amd64)
func (b buildInfo) String() string {
	var sb strings.Builder
	sb.WriteString("weir " + b.Version + " (commit ")
	switch {
	case b.Commit == "":
		sb.WriteString("unknown")
	case b.Dirty && !strings.HasSuffix(b.Version, "-dirty"):
		sb.WriteString(b.Commit + ", modified")
	default:
		sb.WriteString(b.Commit)
	}
	switch {
	case b.BuildTime != "":
		sb.WriteString(", built " + b.BuildTime)
	case b.CommitTime != "":
		sb.WriteString(", committed " + b.CommitTime)
	default:
		sb.WriteString(", built unknown")
	}
	sb.WriteString(", " + b.GoVersion + " " + b.Platform + ")")
	return sb.String()
}
