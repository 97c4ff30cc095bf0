package gcfloor

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"testing/fstest"
	"time"
)

func TestPercent(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		floor, live, roots uint64
		base, want         int
	}{
		{64 * mib, 8 * mib, 0, 100, 700},       // goal 8 + 8 × 7 = 64 MiB
		{64 * mib, 8 * mib, 6 * mib, 100, 400}, // goal 8 + 14 × 4 = 64 MiB
		{64 * mib, 16 * mib, 0, 100, 300},      // goal 16 + 16 × 3
		{64 * mib, 32 * mib, 0, 100, 100},      // goal 32 × 2: the default already reaches the floor
		{64 * mib, 48 * mib, 0, 100, 100},      // above half the floor: the default
		{64 * mib, 128 * mib, 0, 100, 100},     // above the floor
		{64 * mib, 8 * mib, 0, 900, 900},       // never below the base
		{64 * mib, 0, 0, 100, 1600},            // nothing scanned yet: the heap minimum, 4 MiB × 16
		{64 * mib, 100, 0, 100, 1600},          // capped there
		{64 * mib, 0, 8 * mib, 100, 800},       // only roots: goal 0 + 8 × 8 = 64 MiB
		{8 * mib, 0, 0, 100, 200},              // a small floor: the heap minimum is 8 MiB
	} {
		if got := Percent(c.floor, c.live, c.roots, c.base); got != c.want {
			t.Errorf("Percent(%d, %d, %d, %d) = %d, want %d", c.floor, c.live, c.roots, c.base, got, c.want)
		}
	}
}

// gcPercent reads GOGC without changing it.
func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

// cycles is the number of collections so far.
func cycles() uint64 {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// heapGoal is the heap size at which the next collection starts.
func heapGoal() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/goal:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

var sink []byte

// churn allocates total bytes of garbage in 1 KiB pieces and returns how
// many collections that took.
func churn(total int) uint64 {
	before := cycles()
	for range total / 1024 {
		sink = make([]byte, 1024)
	}
	sink = nil
	return cycles() - before
}

// TestFloorCollectsLess: the same garbage takes far fewer collections with
// a floor far above this test's live heap, GOGC follows the floor, and
// Stop puts the base back.
func TestFloorCollectsLess(t *testing.T) {
	defer debug.SetGCPercent(gcPercent())
	debug.SetGCPercent(100)
	runtime.GC()
	const garbage = 512 << 20
	without := churn(garbage)

	tu := Start(256<<20, 100)
	defer tu.Stop()
	if p := gcPercent(); p <= 100 || p != tu.Percent() {
		t.Fatalf("GOGC after Start = %d (tuner %d), want it raised above 100", p, tu.Percent())
	}
	with := churn(garbage)
	t.Logf("collections for %d MiB of garbage: %d without a floor, %d with 256 MiB", garbage>>20, without, with)
	if with*4 > without {
		t.Fatalf("%d collections with the floor against %d without: want at most a quarter", with, without)
	}
	// The tuner runs after each collection: it keeps GOGC raised.
	runtime.GC()
	deadline := time.Now().Add(5 * time.Second)
	for tu.Percent() <= 100 {
		if time.Now().After(deadline) {
			t.Fatalf("GOGC %d after a collection, want the floor's", tu.Percent())
		}
		time.Sleep(time.Millisecond) // polling the tuner's state, not waiting for an effect
	}
	// The goal is the floor, not more: a GOGC that raised Go's heap
	// minimum (4 MiB × GOGC/100) past the floor once let a node's
	// resident size reach 800 MB under a 64 MiB floor.
	runtime.GC()
	if goal := heapGoal(); goal < 256<<20 || goal > 256<<20*5/4 {
		t.Fatalf("heap goal %d MiB with a 256 MiB floor and a small live heap", goal>>20)
	}
	tu.Stop()
	tu.Stop()
	if p := gcPercent(); p != 100 {
		t.Fatalf("GOGC after Stop = %d, want the base 100", p)
	}
	runtime.GC()
	runtime.GC()
	if p := gcPercent(); p != 100 {
		t.Fatalf("GOGC after Stop and two collections = %d, want 100: the tuner still runs", p)
	}
}

func TestZeroFloorDoesNothing(t *testing.T) {
	defer debug.SetGCPercent(gcPercent())
	debug.SetGCPercent(100)
	tu := Start(0, 100)
	runtime.GC()
	if p := gcPercent(); p != 100 || tu.Percent() != 100 {
		t.Fatalf("GOGC = %d, tuner %d; want 100 untouched", p, tu.Percent())
	}
	tu.Stop()
}

// TestMemoryLimitCapsTheFloor: under a memory limit the floor is at most
// a quarter of it.
func TestMemoryLimitCapsTheFloor(t *testing.T) {
	defer debug.SetGCPercent(gcPercent())
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(64 << 20))
	tu := Start(256<<20, 100)
	defer tu.Stop()
	if f := tu.Floor(); f != 16<<20 {
		t.Fatalf("floor under a 64 MiB memory limit = %d MiB, want 16", f>>20)
	}
	debug.SetMemoryLimit(math.MaxInt64)
	tu2 := Start(256<<20, 100)
	defer tu2.Stop()
	if f := tu2.Floor(); f != 256<<20 {
		t.Fatalf("floor without a memory limit = %d MiB, want 256", f>>20)
	}
}

// TestCgroupMemoryMax reads the limit of the process's cgroup as v2 and
// v1 mounts show it, in the process's group or at the mount's root, and
// none when it is unlimited or unreadable.
func TestCgroupMemoryMax(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  uint64 // 0: none
	}{
		{"v2 in its group", map[string]string{
			"proc/self/cgroup":                          "0::/kubepods/pod1/c1\n",
			"sys/fs/cgroup/kubepods/pod1/c1/memory.max": "134217728\n",
		}, 128 << 20},
		{"v2, own namespace: the root", map[string]string{
			"proc/self/cgroup":         "0::/\n",
			"sys/fs/cgroup/memory.max": "268435456\n",
		}, 256 << 20},
		{"v2 unlimited", map[string]string{
			"proc/self/cgroup":         "0::/\n",
			"sys/fs/cgroup/memory.max": "max\n",
		}, 0},
		{"v1 in its group", map[string]string{
			"proc/self/cgroup": "5:cpu,cpuacct:/x\n4:memory:/docker/abc\n0::/\n",
			"sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": "536870912\n",
		}, 512 << 20},
		{"v1 unlimited", map[string]string{
			"proc/self/cgroup":                           "4:memory:/\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n",
		}, 0},
		{"no cgroup file", map[string]string{}, 0},
		{"garbage", map[string]string{
			"proc/self/cgroup":         "0::/\n",
			"sys/fs/cgroup/memory.max": "lots\n",
		}, 0},
	} {
		fsys := fstest.MapFS{}
		for name, body := range tc.files {
			fsys[name] = &fstest.MapFile{Data: []byte(body)}
		}
		got, ok := CgroupMemoryMax(fsys)
		if ok != (tc.want != 0) || got != tc.want {
			t.Errorf("%s: CgroupMemoryMax = %d, %v; want %d", tc.name, got, ok, tc.want)
		}
	}
}

// TestCgroupLimitCapsTheFloor: a container's memory limit caps the floor
// at a quarter of it, with no GOMEMLIMIT set.
func TestCgroupLimitCapsTheFloor(t *testing.T) {
	defer debug.SetGCPercent(gcPercent())
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(math.MaxInt64))
	root := fstest.MapFS{
		"proc/self/cgroup":         {Data: []byte("0::/\n")},
		"sys/fs/cgroup/memory.max": {Data: []byte("134217728\n")},
	}
	tu := start(64<<20, 100, root)
	defer tu.Stop()
	if f := tu.Floor(); f != 32<<20 {
		t.Fatalf("floor in a 128 MiB cgroup = %d MiB, want 32", f>>20)
	}
}
