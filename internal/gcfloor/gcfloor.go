// Package gcfloor gives Go's garbage collector a heap floor: while the
// live heap is small, the collector waits until the heap reaches a fixed
// size rather than twice the live heap.
//
// A Weir node's live heap is a few megabytes when it holds few keys, and
// it allocates fast: dozens of short-lived objects per request, most of
// them in gRPC and net/http. With Go's default (GOGC=100) such a process
// collects many times a second (a node under gRPC load collected 14 times
// a second on an 11 MB heap) and each collection also shrinks the stacks
// of idle goroutines that the next request grows again. With a floor the
// collector runs when the heap reaches the floor; once the live heap is
// above half the floor, the default applies unchanged, so a large node
// pays nothing for it. The price is memory: up to the floor of heap when
// the live heap is small.
//
// The floor is kept by setting GOGC after every collection from what that
// collection found: Go's goal is live + (live + roots) × GOGC/100, where
// roots are the goroutine stacks and globals it scanned, so GOGC =
// (floor − live) × 100 / (live + roots), and at least the base percent.
// It is also at most floor × 100 / 4 MiB: Go never collects below 4 MiB ×
// GOGC/100, so a larger GOGC would set the goal past the floor (a first
// version without that cap let a node under a 64 MiB floor grow to 800 MB
// resident). GOMEMLIMIT, when set, still bounds the heap, and a memory
// limit (GOMEMLIMIT, the cgroup's) caps the floor at a quarter of it.
package gcfloor

import (
	"io/fs"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
)

// DefaultFloorMiB is `weir serve`'s floor (--heap-floor-mib), in MiB, and
// the load generator's ceilings': 64 MiB, a few times the live heap of a
// node holding tens of thousands of keys.
const DefaultFloorMiB = 64

// GOGCSet reports whether the GOGC environment variable is set, read
// through getenv: the operator chose the collector's pace, and a floor is
// not kept (weir serve and the load generator's ceilings both ask).
func GOGCSet(getenv func(string) string) bool { return getenv("GOGC") != "" }

// heapMinimum is Go's smallest heap goal at GOGC=100 (4 MiB). The
// runtime scales it with GOGC, so a GOGC above floor × 100 / heapMinimum
// would put the goal above the floor whatever the live heap.
const heapMinimum = 4 << 20

// Percent returns the GOGC that makes the collector's goal at least floor
// bytes, and no more than needed, after a collection that found live bytes
// of live heap and roots bytes of stacks and globals: Go collects when the
// heap reaches max(heapMinimum × GOGC/100, live + (live + roots) ×
// GOGC/100). It is never below base (the GOGC without a floor).
func Percent(floor, live, roots uint64, base int) int {
	if live >= floor {
		return base
	}
	p := floor * 100 / heapMinimum
	if live+roots > 0 {
		p = min(p, (floor-live)*100/(live+roots))
	}
	return max(base, int(p))
}

// Tuner keeps a heap floor (Start). Its zero value is not usable.
type Tuner struct {
	floor   uint64
	base    int
	stopped atomic.Bool
	sample  []metrics.Sample
	mu      sync.Mutex // serialises tune with Stop
	percent int        // the GOGC set last
}

// Start keeps a floor of floor bytes under the heap from now until Stop:
// it sets GOGC from the live heap now and after every collection. base is
// the GOGC without a floor (100, Go's default). A memory limit caps the
// floor at a quarter of it, so that a small container keeps most of its
// memory for live data: GOMEMLIMIT (or debug.SetMemoryLimit), and the
// limit of the process's cgroup (CgroupMemoryMax), which a container has
// whether or not its operator set GOMEMLIMIT. A floor of 0 does nothing.
func Start(floor uint64, base int) *Tuner {
	return start(floor, base, os.DirFS("/"))
}

// start is Start with the cgroup files read from root.
func start(floor uint64, base int, root fs.FS) *Tuner {
	if limit := debug.SetMemoryLimit(-1); limit > 0 && uint64(limit)/4 < floor {
		floor = uint64(limit) / 4
	}
	if limit, ok := CgroupMemoryMax(root); ok && limit/4 < floor {
		floor = limit / 4
	}
	t := &Tuner{floor: floor, base: base, sample: []metrics.Sample{
		{Name: "/gc/heap/live:bytes"}, {Name: "/gc/scan/stack:bytes"}, {Name: "/gc/scan/globals:bytes"},
	}}
	if floor == 0 {
		t.stopped.Store(true)
		return t
	}
	t.tune()
	t.arm()
	return t
}

// Floor returns the floor kept, in bytes, after Start's cap.
func (t *Tuner) Floor() uint64 { return t.floor }

// Percent returns the GOGC the tuner set last (the base when it set none).
func (t *Tuner) Percent() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.percent == 0 {
		return t.base
	}
	return t.percent
}

// Stop ends the tuning and sets GOGC back to the base. It is idempotent.
func (t *Tuner) Stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped.Swap(true) {
		return
	}
	debug.SetGCPercent(t.base)
	t.percent = t.base
}

// sentinel is allocated for the next collection to find unreachable. It
// holds a pointer and 16 bytes, so it is not one of the tiny objects that
// the allocator packs together, whose cleanups may never run.
type sentinel struct {
	_ *byte
	_ [2]uint64
}

// arm asks for tune to run once the next collection has finished.
func (t *Tuner) arm() {
	runtime.AddCleanup(new(sentinel), func(t *Tuner) {
		if t.stopped.Load() {
			return
		}
		t.tune()
		t.arm()
	}, t)
}

// tune sets GOGC from the live heap of the last collection.
func (t *Tuner) tune() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped.Load() {
		return
	}
	metrics.Read(t.sample)
	var v [3]uint64
	for i, s := range t.sample {
		if s.Value.Kind() == metrics.KindUint64 {
			v[i] = s.Value.Uint64()
		}
	}
	if p := Percent(t.floor, v[0], v[1]+v[2], t.base); p != t.percent {
		debug.SetGCPercent(p)
		t.percent = p
	}
}
