package bucket

import (
	"testing"
	"time"
)

// importSink keeps the benchmarked import from being optimised away.
var importSink State

// BenchmarkImportAt rebuilds a state from a snapshot for every pair of the
// algorithms in BenchmarkTakeAt: the diagonal is the exact restore of a
// handoff under the same limit, the rest the conservative conversion after
// a changed algorithm. The snapshot is of 400 of 1000 taken, exported 100 µs
// after the take; the import runs at that same instant, so every iteration
// takes the same path.
func BenchmarkImportAt(b *testing.B) {
	limits := []Limit{
		tb(1000, 1_000_000, time.Second),
		gcra(1000, 1_000_000, time.Second),
		sw(1000, time.Millisecond),
		fw(1000, Minute),
		{Algorithm: FixedWindow, Capacity: 1000, Calendar: Month},
	}
	name := func(l Limit) string { return l.Algorithm.String() + "_" + l.PolicyWindow().String() }
	now := at(100 * time.Microsecond)
	for _, src := range limits {
		var s State
		if _, err := TakeAt(src, &s, epoch, 400); err != nil {
			b.Fatal(err)
		}
		snap := ExportAt(src, s, now)
		for _, dst := range limits {
			b.Run(name(src)+"/to_"+name(dst), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					importSink = ImportAt(dst, snap, now)
				}
			})
		}
	}
}
