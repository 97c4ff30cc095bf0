package topk

import (
	"cmp"
	"hash/maphash"
	"slices"
	"strings"
)

// filterCells is how many filter cells a sketch keeps per monitored key.
// On a stream of many light keys a newcomer replaces the minimum about
// once in filterCells adds, instead of on every add.
const filterCells = 8

// cell is one filter cell: the weight counted there for keys not
// monitored, and how many monitored keys hash to it. An add whose cell
// holds no monitored key skips the lookup of the monitored keys, so on a
// long tail of light keys most adds read one cell and the sketch's own
// fields, and nothing else.
type cell struct {
	w   int64
	mon int
}

// Entry is one monitored key and its estimated weight.
type Entry struct {
	// Key is the monitored key.
	Key string
	// Count over-estimates the key's total weight: true ≤ Count.
	Count int64
	// Err bounds the over-estimate: Count-Err ≤ true.
	Err int64
	// Denied is the weight added with denied=true while the key was
	// monitored: a lower bound of its denied weight (the upper bound is
	// Denied+Err).
	Denied int64
}

// Sketch is a Space-Saving summary of at most Cap keys, filtered: once it
// is full, weight added to a key it does not monitor is counted in one of
// filterCells×Cap cells chosen by the key's hash, and the key replaces
// the minimum only when its cell has outgrown the minimum. The zero value
// is not usable; call New. It is not safe for concurrent use.
type Sketch struct {
	capacity int
	total    int64
	index    map[string]*item // key → its item
	heap     []*item          // min-heap on Count
	// filter bounds the weight of the keys not monitored: a key's weight
	// while not monitored is at most its cell's w, and no cell's w exceeds
	// Floor.
	filter []cell
	seed   maphash.Seed
}

// item is a monitored key and its position in the heap. Sifting moves
// pointers and updates pos, so the map is written only when a key enters
// or leaves.
type item struct {
	Entry
	pos int
}

// New returns an empty sketch that monitors at most capacity keys
// (capacity below 1 is taken as 1).
func New(capacity int) *Sketch {
	return newFiltered(capacity, filterCells*max(capacity, 1))
}

// newFiltered returns an empty sketch of capacity keys with cells filter
// cells (at least one).
func newFiltered(capacity, cells int) *Sketch {
	capacity = max(capacity, 1)
	return &Sketch{
		capacity: capacity,
		index:    make(map[string]*item, capacity),
		heap:     make([]*item, 0, capacity),
		filter:   make([]cell, max(cells, 1)),
		seed:     maphash.MakeSeed(),
	}
}

// cellOf returns the index of key's filter cell.
func (s *Sketch) cellOf(key string) int {
	return int(maphash.String(s.seed, key) % uint64(len(s.filter)))
}

// Cap returns the most keys the sketch monitors.
func (s *Sketch) Cap() int { return s.capacity }

// Len returns the number of keys monitored now (at most Cap).
func (s *Sketch) Len() int { return len(s.heap) }

// Total returns the weight added so far.
func (s *Sketch) Total() int64 { return s.total }

// Floor bounds the weight of every key the sketch does not monitor: the
// smallest monitored count once the sketch is full, 0 before.
func (s *Sketch) Floor() int64 {
	if len(s.heap) < s.capacity {
		return 0
	}
	return s.heap[0].Count
}

// Add adds weight to key; denied says the weight was refused (it counts
// towards the key's weight all the same: demand, not admission, is what
// finds a noisy neighbour). A weight below 1 is ignored. The key is copied
// when it becomes monitored, so the sketch never pins the caller's memory.
//
// A key not monitored by a full sketch is first counted in its filter
// cell. While the cell plus weight stays within Floor, that is all: the
// key's whole weight is at most its cell, so at most Floor, which is what
// Floor promises of a key left out. Otherwise the key replaces the
// minimum as in plain Space-Saving, with Floor+weight as its count and
// Floor as its error, and the evicted key's count goes into its own cell.
// Counts and errors are those of Space-Saving, so its bounds hold; only
// the replacements are fewer.
func (s *Sketch) Add(key string, weight int64, denied bool) {
	if weight < 1 {
		return
	}
	s.total += weight
	var d int64
	if denied {
		d = weight
	}
	c := &s.filter[s.cellOf(key)]
	if c.mon > 0 {
		if it, ok := s.index[key]; ok {
			it.Count += weight
			it.Denied += d
			s.down(it.pos)
			return
		}
	}
	if len(s.heap) < s.capacity {
		it := &item{Entry: Entry{Key: strings.Clone(key), Count: weight, Denied: d}, pos: len(s.heap)}
		c.mon++
		s.heap = append(s.heap, it)
		s.index[it.Key] = it
		s.up(it.pos)
		return
	}
	floor := s.heap[0].Count
	if c.w+weight <= floor {
		c.w += weight
		return
	}
	// Replace the minimum: the newcomer inherits its count as error. The
	// item is reused, so a full sketch allocates only the key's copy.
	it := s.heap[0]
	delete(s.index, it.Key)
	out := &s.filter[s.cellOf(it.Key)]
	out.mon--
	if out.w < floor {
		out.w = floor
	}
	it.Entry = Entry{Key: strings.Clone(key), Count: floor + weight, Err: floor, Denied: d}
	c.mon++
	s.index[it.Key] = it
	s.down(0)
}

// Top returns the n heaviest monitored keys (all of them for n < 1 or
// n ≥ Len), by Count descending, then Key ascending.
func (s *Sketch) Top(n int) []Entry {
	out := make([]Entry, len(s.heap))
	for i, it := range s.heap {
		out[i] = it.Entry
	}
	sortEntries(out)
	if n > 0 && n < len(out) {
		out = out[:n]
	}
	return out
}

// Summary returns the n heaviest keys with the floor that bounds every key
// left out: the sketch's Floor, or the n-th count when keys were cut.
func (s *Sketch) Summary(n int) Summary {
	top := s.Top(n)
	floor := s.Floor()
	if len(top) < len(s.heap) {
		floor = max(floor, top[len(top)-1].Count)
	}
	return Summary{Entries: top, Floor: floor}
}

// sortEntries orders by Count descending, then Key ascending.
func sortEntries(es []Entry) {
	slices.SortFunc(es, func(a, b Entry) int {
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		return strings.Compare(a.Key, b.Key)
	})
}

func (s *Sketch) less(i, j int) bool { return s.heap[i].Count < s.heap[j].Count }

func (s *Sketch) swap(i, j int) {
	s.heap[i], s.heap[j] = s.heap[j], s.heap[i]
	s.heap[i].pos = i
	s.heap[j].pos = j
}

func (s *Sketch) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !s.less(i, p) {
			return
		}
		s.swap(i, p)
		i = p
	}
}

func (s *Sketch) down(i int) {
	n := len(s.heap)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && s.less(r, l) {
			m = r
		}
		if !s.less(m, i) {
			return
		}
		s.swap(i, m)
		i = m
	}
}
