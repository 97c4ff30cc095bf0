package topk

import (
	"cmp"
	"slices"
	"strings"
)

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

// Sketch is a Space-Saving summary of at most Cap keys. The zero value is
// not usable; call New. It is not safe for concurrent use.
type Sketch struct {
	capacity int
	total    int64
	index    map[string]int // key → position in heap
	heap     []Entry        // min-heap on Count
}

// New returns an empty sketch that monitors at most capacity keys
// (capacity below 1 is taken as 1).
func New(capacity int) *Sketch {
	capacity = max(capacity, 1)
	return &Sketch{
		capacity: capacity,
		index:    make(map[string]int, capacity),
		heap:     make([]Entry, 0, capacity),
	}
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
func (s *Sketch) Add(key string, weight int64, denied bool) {
	if weight < 1 {
		return
	}
	s.total += weight
	var d int64
	if denied {
		d = weight
	}
	if i, ok := s.index[key]; ok {
		s.heap[i].Count += weight
		s.heap[i].Denied += d
		s.down(i)
		return
	}
	if len(s.heap) < s.capacity {
		s.heap = append(s.heap, Entry{Key: strings.Clone(key), Count: weight, Denied: d})
		s.index[s.heap[len(s.heap)-1].Key] = len(s.heap) - 1
		s.up(len(s.heap) - 1)
		return
	}
	// Replace the minimum: the newcomer inherits its count as error.
	low := s.heap[0]
	delete(s.index, low.Key)
	s.heap[0] = Entry{Key: strings.Clone(key), Count: low.Count + weight, Err: low.Count, Denied: d}
	s.index[s.heap[0].Key] = 0
	s.down(0)
}

// Top returns the n heaviest monitored keys (all of them for n < 1 or
// n ≥ Len), by Count descending, then Key ascending.
func (s *Sketch) Top(n int) []Entry {
	out := slices.Clone(s.heap)
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
	s.index[s.heap[i].Key] = i
	s.index[s.heap[j].Key] = j
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
