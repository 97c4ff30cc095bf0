package topk

import (
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"testing"
)

// add is one step of a scripted stream.
type add struct {
	key    string
	weight int64
	denied bool
}

func TestSketchSteps(t *testing.T) {
	tests := []struct {
		name  string
		cap   int
		adds  []add
		want  []Entry
		floor int64
		total int64
	}{
		{
			name: "empty", cap: 2, want: []Entry{},
		},
		{
			name: "under capacity counts exactly", cap: 3,
			adds:  []add{{"a", 2, false}, {"b", 1, true}, {"a", 3, true}},
			want:  []Entry{{Key: "a", Count: 5, Denied: 3}, {Key: "b", Count: 1, Denied: 1}},
			total: 6,
		},
		{
			name: "full: a newcomer within the floor is counted in its cell only", cap: 2,
			adds:  []add{{"a", 5, false}, {"b", 2, false}, {"c", 1, true}},
			want:  []Entry{{Key: "a", Count: 5}, {Key: "b", Count: 2}},
			floor: 2, total: 8,
		},
		{
			name: "full: a newcomer whose cell outgrows the floor replaces the minimum and inherits it as error", cap: 2,
			adds:  []add{{"a", 5, false}, {"b", 2, false}, {"c", 1, false}, {"c", 1, false}, {"c", 1, true}},
			want:  []Entry{{Key: "a", Count: 5}, {Key: "c", Count: 3, Err: 2, Denied: 1}},
			floor: 3, total: 10,
		},
		{
			name: "the evicted key comes back with the new minimum as error", cap: 2,
			adds: []add{
				{"a", 5, false},
				{"b", 2, false},
				{"c", 1, false},
				{"c", 1, false},
				{"c", 1, false},
				{"b", 1, false},
				{"b", 1, false},
			},
			want:  []Entry{{Key: "a", Count: 5}, {Key: "b", Count: 4, Err: 3}},
			floor: 4, total: 12,
		},
		{
			name: "weights below one change nothing", cap: 2,
			adds:  []add{{"a", 0, false}, {"b", -3, true}, {"c", 1, false}},
			want:  []Entry{{Key: "c", Count: 1}},
			total: 1,
		},
		{
			name: "ties order by key", cap: 4,
			adds:  []add{{"d", 1, false}, {"b", 1, false}, {"c", 2, false}, {"a", 1, false}},
			want:  []Entry{{Key: "c", Count: 2}, {Key: "a", Count: 1}, {Key: "b", Count: 1}, {Key: "d", Count: 1}},
			floor: 1, total: 5,
		},
		{
			name: "capacity below one is one", cap: 0,
			adds:  []add{{"a", 1, false}, {"b", 1, false}, {"b", 1, false}},
			want:  []Entry{{Key: "b", Count: 2, Err: 1}},
			floor: 2, total: 3,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newFiltered(tt.cap, 1) // one cell: every key left out shares it, so the steps do not depend on the hash
			for _, a := range tt.adds {
				s.Add(a.key, a.weight, a.denied)
			}
			if got := s.Top(0); !slices.Equal(got, tt.want) {
				t.Errorf("Top = %+v, want %+v", got, tt.want)
			}
			if got := s.Floor(); got != tt.floor {
				t.Errorf("Floor = %d, want %d", got, tt.floor)
			}
			if got := s.Total(); got != tt.total {
				t.Errorf("Total = %d, want %d", got, tt.total)
			}
		})
	}
}

// TestFilteredBoundsHold checks Space-Saving's bounds on random streams
// whatever the filter's size, down to one cell that every key shares:
// Count-Err ≤ true ≤ Count and Err ≤ Floor for every monitored key, true ≤
// Floor for every key left out, and Floor ≤ W/Cap.
func TestFilteredBoundsHold(t *testing.T) {
	for _, cells := range []int{1, 7, 64, 1024} {
		for _, skew := range []bool{false, true} {
			rng := rand.New(rand.NewPCG(uint64(cells), 11))
			z := rand.NewZipf(rng, 1.1, 1, 4999)
			const capacity = 32
			s := newFiltered(capacity, cells)
			exact := map[string]int64{}
			for i := range 50_000 {
				k := uint64(rng.IntN(5000))
				if skew {
					k = z.Uint64()
				}
				key, w := "k"+strconv.FormatUint(k, 10), int64(1+rng.IntN(4))
				s.Add(key, w, false)
				exact[key] += w
				if i%997 == 0 {
					checkMonitoredCounts(t, s)
				}
			}
			checkMonitoredCounts(t, s)
			all := s.Top(0)
			floor := s.Floor()
			checkBounds(t, all, exact, floor)
			if bound := s.Total() / capacity; floor > bound {
				t.Errorf("cells %d, skew %v: Floor %d above W/Cap = %d", cells, skew, floor, bound)
			}
			monitored := map[string]bool{}
			for _, e := range all {
				monitored[e.Key] = true
			}
			for k, w := range exact {
				if !monitored[k] && w > floor {
					t.Errorf("cells %d, skew %v: %s weighs %d > Floor %d but is not monitored", cells, skew, k, w, floor)
				}
			}
		}
	}
}

// checkMonitoredCounts checks what Add relies on to skip the lookup of the
// monitored keys: every cell counts the monitored keys that hash to it.
func checkMonitoredCounts(t *testing.T, s *Sketch) {
	t.Helper()
	mon := make([]int, len(s.filter))
	for _, it := range s.heap {
		mon[s.cellOf(it.Key)]++
	}
	for i, c := range s.filter {
		if c.mon != mon[i] {
			t.Fatalf("cell %d counts %d monitored keys, holds %d", i, c.mon, mon[i])
		}
	}
}

// TestFilterSparesReplacementsOnALongTail measures what the filter is
// for, the figure the docs give: on a hot-key shard's uniform stream (128
// keys monitored of 12,500, as 100k keys over 8 shards), about one add in
// eight replaces a monitored key, where plain Space-Saving replaces on
// nearly every add. go test -v prints the share.
func TestFilterSparesReplacementsOnALongTail(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 9))
	s := New(128)
	const adds = 1_000_000
	replaced := 0
	for range adds {
		k := "tenant-" + strconv.Itoa(rng.IntN(12_500))
		_, monitored := s.index[k]
		full := s.Len() == s.Cap()
		s.Add(k, 1, false)
		if _, now := s.index[k]; full && !monitored && now {
			replaced++
		}
	}
	share := float64(replaced) / adds
	t.Logf("%.3f of adds replaced a monitored key", share)
	if share > 0.2 {
		t.Errorf("%.3f of adds replaced a monitored key, want about 1/%d", share, filterCells)
	}
}

func TestSummaryFloorCoversCutKeys(t *testing.T) {
	s := New(10)
	for i, w := range []int64{9, 7, 5, 3} {
		s.Add(strconv.Itoa(i), w, false)
	}
	sum := s.Summary(2)
	if len(sum.Entries) != 2 || sum.Entries[1].Count != 7 {
		t.Fatalf("Summary(2).Entries = %+v", sum.Entries)
	}
	if sum.Floor != 7 {
		t.Errorf("Floor of a cut summary = %d, want the 2nd count 7 (keys left out weigh at most that)", sum.Floor)
	}
	if all := s.Summary(0); all.Floor != 0 || len(all.Entries) != 4 {
		t.Errorf("Summary(0) of a sketch not full = %+v, want 4 entries and floor 0", all)
	}
}

// zipfStream returns n draws of keys "k0".."k(imax)" from a Zipf law, and
// their exact weights.
func zipfStream(seed uint64, n int, imax uint64) ([]string, map[string]int64) {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	z := rand.NewZipf(r, 1.2, 1, imax)
	keys := make([]string, n)
	exact := map[string]int64{}
	for i := range keys {
		k := "k" + strconv.FormatUint(z.Uint64(), 10)
		keys[i] = k
		exact[k]++
	}
	return keys, exact
}

// trueTop returns the n heaviest keys of exact, heaviest first.
func trueTop(exact map[string]int64, n int) []Entry {
	var all []Entry
	for k, c := range exact {
		all = append(all, Entry{Key: k, Count: c})
	}
	sortEntries(all)
	return all[:n]
}

// checkBounds fails t when an entry's bounds do not hold against exact.
func checkBounds(t *testing.T, got []Entry, exact map[string]int64, maxErr int64) {
	t.Helper()
	for _, e := range got {
		tr := exact[e.Key]
		if e.Count < tr || e.Count-e.Err > tr {
			t.Errorf("%s: count %d err %d, but true weight %d is outside [count-err, count]", e.Key, e.Count, e.Err, tr)
		}
		if e.Err > maxErr {
			t.Errorf("%s: err %d above the bound %d", e.Key, e.Err, maxErr)
		}
	}
}

func TestZipfTop10WithinBound(t *testing.T) {
	const capacity = 256
	keys, exact := zipfStream(1, 500_000, 100_000)
	s := New(capacity)
	for _, k := range keys {
		s.Add(k, 1, false)
	}
	bound := s.Total() / capacity
	if f := s.Floor(); f > bound {
		t.Errorf("Floor %d above W/Cap = %d", f, bound)
	}
	got := s.Top(10)
	want := trueTop(exact, 10)
	for i := range want {
		if got[i].Key != want[i].Key {
			t.Errorf("rank %d: got %s (count %d), true top is %s (%d)", i+1, got[i].Key, got[i].Count, want[i].Key, want[i].Count)
		}
	}
	checkBounds(t, got, exact, bound)
	// Every key heavier than the floor is monitored.
	top := map[string]bool{}
	for _, e := range s.Top(0) {
		top[e.Key] = true
	}
	for k, c := range exact {
		if c > s.Floor() && !top[k] {
			t.Errorf("%s weighs %d > floor %d but is not monitored", k, c, s.Floor())
		}
	}
}

func TestMergeOfDisjointPartsKeepsBounds(t *testing.T) {
	const capacity = 128
	keys, exact := zipfStream(2, 300_000, 50_000)
	parts := []*Sketch{New(capacity), New(capacity), New(capacity)}
	for i, k := range keys {
		parts[i%3].Add(k, 1, i%5 == 0)
	}
	var sums []Summary
	var bound int64
	for _, p := range parts {
		sums = append(sums, p.Summary(20))
		bound += p.Summary(20).Floor
	}
	got := Merge(sums, 10)
	if len(got) != 10 {
		t.Fatalf("Merge returned %d entries, want 10", len(got))
	}
	want := trueTop(exact, 10)
	for i := range want {
		if got[i].Key != want[i].Key {
			t.Errorf("rank %d: merged %s (%d), true %s (%d)", i+1, got[i].Key, got[i].Count, want[i].Key, want[i].Count)
		}
	}
	checkBounds(t, got, exact, bound)
	for _, e := range got {
		if e.Denied > exact[e.Key] {
			t.Errorf("%s: denied %d above its whole weight %d", e.Key, e.Denied, exact[e.Key])
		}
	}
}

func TestMergeCountsMissingKeysAtTheFloor(t *testing.T) {
	a := Summary{Entries: []Entry{{Key: "x", Count: 10, Err: 1}}, Floor: 4}
	b := Summary{Entries: []Entry{{Key: "y", Count: 6}}, Floor: 2}
	got := Merge([]Summary{a, b}, 0)
	want := []Entry{{Key: "x", Count: 12, Err: 3}, {Key: "y", Count: 10, Err: 4}}
	if !slices.Equal(got, want) {
		t.Errorf("Merge = %+v, want %+v", got, want)
	}
}

func TestMemoryBoundedUnderAMillionKeys(t *testing.T) {
	const capacity = 1024
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	before := heap()
	s := New(capacity)
	buf := make([]byte, 0, 32)
	for i := range 1_000_000 {
		buf = strconv.AppendInt(append(buf[:0], "tenant:"...), int64(i), 10)
		s.Add(string(buf), int64(1+i%3), false)
		if s.Len() > capacity {
			t.Fatalf("after %d keys the sketch holds %d > %d", i+1, s.Len(), capacity)
		}
	}
	after := heap()
	runtime.KeepAlive(s)
	// 1024 entries of a ~14-byte key, a 48-byte Entry and a map slot each:
	// well under 512 KiB. A sketch that kept every key would hold ~60 MiB.
	const limit = 512 << 10
	if after > before && after-before > limit {
		t.Errorf("heap grew by %d bytes for %d monitored keys, want < %d", after-before, s.Len(), limit)
	}
	if s.Len() != capacity {
		t.Errorf("Len = %d, want %d", s.Len(), capacity)
	}
}

func BenchmarkAdd(b *testing.B) {
	keys, _ := zipfStream(3, 1<<16, 1_000_000)
	benchAdd(b, New(1024), keys)
}

// benchAdd adds keys to s, cycling, one per iteration; len(keys) is a
// power of two.
func benchAdd(b *testing.B, s *Sketch, keys []string) {
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		s.Add(keys[i&(len(keys)-1)], 1, false)
		i++
	}
}

// BenchmarkAddUniform is the hot-key sketch's worst case, the one a node
// pays for every request on uniform keys: a shard of 128 keys under a
// stream of 100k distinct keys, almost every add replacing the minimum.
func BenchmarkAddUniform(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 9))
	keys := make([]string, 1<<16)
	for i := range keys {
		keys[i] = "tenant-" + strconv.Itoa(rng.IntN(100_000))
	}
	benchAdd(b, New(128), keys)
}

// BenchmarkAddUniformEvicted is BenchmarkAddUniform as a node runs it: one
// limit's 8 shards over 100k keys, and between adds four random reads of a
// 256 MiB array, as a node's bucket store evicts the sketches' lines. The
// reads cost the same in every version; what differs is the sketch's
// misses.
func BenchmarkAddUniformEvicted(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 9))
	keys := make([]string, 1<<16)
	for i := range keys {
		keys[i] = "tenant-" + strconv.Itoa(rng.IntN(100_000))
	}
	var shards [8]*Sketch
	for i := range shards {
		shards[i] = New(128)
	}
	far := make([]int64, 32<<20)
	for i := range far {
		far[i] = int64(i)
	}
	var sum int64
	i := uint64(0)
	for b.Loop() {
		for j := range uint64(4) {
			sum += far[(i*0x9E3779B97F4A7C15+j*0xBF58476D1CE4E5B9)>>39]
		}
		k := keys[i&(1<<16-1)]
		shards[k[len(k)-1]&7].Add(k, 1, false)
		i++
	}
	if sum == 0 {
		b.Log(sum) // keeps the reads
	}
}
