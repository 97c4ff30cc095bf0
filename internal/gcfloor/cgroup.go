package gcfloor

import (
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
)

// noLimit is the smallest value a cgroup reports for "no limit": cgroup
// v1 writes 2^63 − 1 rounded down to a page.
const noLimit = 1 << 62

// CgroupMemoryMax returns the memory limit of the cgroup this process runs
// in, read from fsys, the root file system (os.DirFS("/")), and false when
// it has none or it cannot be read: cgroup v2's memory.max, or v1's
// memory.limit_in_bytes, of the group /proc/self/cgroup names, or of the
// mount's root (a container with its own cgroup namespace sees its group
// there). A container whose operator set no GOMEMLIMIT still has this
// limit, and the floor must leave it room.
func CgroupMemoryMax(fsys fs.FS) (uint64, bool) {
	b, err := fs.ReadFile(fsys, "proc/self/cgroup")
	if err != nil {
		return 0, false
	}
	var files []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		// hierarchy-ID:controllers:path; v2's unified line is 0::path.
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		switch {
		case f[0] == "0" && f[1] == "":
			files = append(files, path.Join("sys/fs/cgroup", f[2], "memory.max"), "sys/fs/cgroup/memory.max")
		case slices.Contains(strings.Split(f[1], ","), "memory"):
			files = append(files, path.Join("sys/fs/cgroup/memory", f[2], "memory.limit_in_bytes"),
				"sys/fs/cgroup/memory/memory.limit_in_bytes")
		}
	}
	for _, name := range files {
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			continue
		}
		v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		if err != nil || v >= noLimit { // "max", or v1's unlimited
			continue
		}
		return v, true
	}
	return 0, false
}
