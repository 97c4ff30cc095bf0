package bucket

import (
	"strings"
	"sync"
)

// A shard keeps its buckets in its own hash table rather than a Go map, for
// memory: this is where the store's bytes per bucket are decided.
//
// Why not map[bkey{name, key string}]uint32, as before: its slot holds two
// string headers (32 B) and a value, and at the swiss map's load factors
// that cost about 65 B per bucket on top of the 32 B State and the key copy,
// about 149 B in all. Packing the name and key into one map key string
// would make every lookup of a long key allocate or copy; a per-shard byte
// arena would need its own compaction. Instead:
//
//   - every bucket is a slot (State, key, hash, limit-name id: 56 B) in
//     fixed pages, so a bucket never moves and is never its own heap object;
//   - the index is an open-addressing table of uint64 (the upper 32 bits of
//     the bucket's hash and its slot number), probed linearly and kept at
//     most 3/4 full, with backward-shift deletion so it needs no tombstones.
//     The stored hash lets a probe skip non-matching slots without touching
//     them and lets growth rehash without hashing any key again;
//   - the limit name is interned per shard and referenced by a 4-byte id,
//     counted so that an id is freed with the last bucket of its name.
//
// Per bucket that is the 56-byte slot, 8 bytes of index divided by its load
// (between 3/8 and 3/4: 11 to 21 bytes, 17 at 1,000,000 keys in 64 shards)
// and the key copy: 89.5 bytes with 14-byte keys, measured by
// BenchmarkStoreBytesPerBucket. The store's hash picks the shard with its
// low bits and the place in the index with its high 32 bits, so a take
// hashes each check once (the map hashed it a second time). Growth rehashes
// a shard's whole index under its lock: about 80 µs to go from 16,384 to
// 32,768 entries, the last growth at the default sizing. Like a Go map, the index and the pages
// keep their size when buckets go; freed slots are reused first.

// slot is one bucket: its state and identity. It is 56 bytes.
type slot struct {
	st   State
	key  string // the store's own copy
	hash uint32 // upper half of the bucket's hash, as in the index
	name uint32 // 1 + index into shard.names; 0 marks a free slot
}

// pageSize is the number of bucket slots a shard allocates at once. A page
// holds pointers and is over 512 bytes, so the runtime puts an 8-byte
// header before it: 256 slots (14,336 bytes) would land in the 16,384-byte
// size class and waste 8 bytes per bucket, while 255 fill 14,288 of a
// 14,336-byte class.
const pageSize = 255

// interned is one limit name shared by the buckets of a shard.
type interned struct {
	s    string
	refs uint32 // buckets that use it
}

// shard is one lock stripe. mu guards every other field.
type shard struct {
	mu      sync.Mutex
	index   []uint64          // hash>>32<<32 | (slot+1); 0 is empty; length a power of two or 0
	n       uint32            // live buckets
	pages   []*[pageSize]slot // bucket slots, in pages so growth never copies or doubles
	used    uint32            // slots handed out so far
	free    []uint32          // slots of removed buckets, reused first
	hand    uint32            // next slot eviction inspects, < used unless used is 0
	names   []interned        // limit names by id
	ids     map[string]uint32 // limit name -> id
	freeIDs []uint32          // ids no bucket uses
	gen     uint64            // bumped when a bucket changes other than by a take (Decision.Instance)
	carried map[uint32]Limit  // slot -> the limit kept with its bucket (Check.Carry); nil until one is
	owners  map[uint32]string // slot -> the tenant prefix its bucket counts for (TakeTenantAt); nil until one does
	_       [64]byte          // keeps neighbouring shards' locks off one cache line
}

// at returns slot idx. sh is locked.
func (sh *shard) at(idx uint32) *slot { return &sh.pages[idx/pageSize][idx%pageSize] }

// find returns the slot of the bucket (name, key) whose hash is h. sh is
// locked.
func (sh *shard) find(h uint64, name, key string) (uint32, bool) {
	if len(sh.index) == 0 {
		return 0, false
	}
	tag := h >> 32
	mask := uint64(len(sh.index) - 1)
	for p := tag & mask; ; p = (p + 1) & mask {
		e := sh.index[p]
		if e == 0 {
			return 0, false
		}
		if e>>32 != tag {
			continue
		}
		idx := uint32(e) - 1
		if sl := sh.at(idx); sl.key == key && sh.names[sl.name-1].s == name {
			return idx, true
		}
	}
}

// insert adds the bucket (name, key) with hash h and state st, copying the
// key so the store retains none of the caller's memory. The caller has
// checked that it is missing and reserved room for it. It returns the
// bucket's slot. sh is locked.
func (sh *shard) insert(h uint64, name, key string, st State) uint32 {
	var idx uint32
	if l := len(sh.free); l > 0 {
		idx = sh.free[l-1]
		sh.free = sh.free[:l-1]
	} else {
		idx = sh.used
		sh.used++
		if int(idx/pageSize) == len(sh.pages) {
			sh.pages = append(sh.pages, new([pageSize]slot))
		}
	}
	*sh.at(idx) = slot{st: st, key: strings.Clone(key), hash: uint32(h >> 32), name: sh.intern(name) + 1}
	if (uint64(sh.n)+1)*4 > uint64(len(sh.index))*3 {
		sh.grow()
	}
	sh.place(uint64(uint32(h>>32))<<32 | uint64(idx+1))
	sh.n++
	return idx
}

// ownedBy records that the bucket in slot idx counts for the tenant of
// prefix (the store's copy). sh is locked.
func (sh *shard) ownedBy(idx uint32, prefix string) {
	if sh.owners == nil {
		sh.owners = make(map[uint32]string)
	}
	sh.owners[idx] = prefix
}

// carry keeps l with the bucket in slot idx (Check.Carry). sh is locked.
func (sh *shard) carry(idx uint32, l Limit) {
	if sh.carried == nil {
		sh.carried = make(map[uint32]Limit)
	}
	sh.carried[idx] = l
}

// place puts index entry e in the first empty position from its home. sh is
// locked and the index has room.
func (sh *shard) place(e uint64) {
	mask := uint64(len(sh.index) - 1)
	p := e >> 32 & mask
	for sh.index[p] != 0 {
		p = (p + 1) & mask
	}
	sh.index[p] = e
}

// grow doubles the index (to 16 entries at first) and rehashes it from the
// stored hashes. sh is locked.
func (sh *shard) grow() {
	old := sh.index
	sh.index = make([]uint64, max(16, 2*len(old)))
	for _, e := range old {
		if e != 0 {
			sh.place(e)
		}
	}
}

// remove deletes the bucket in slot idx. sh is locked.
func (sh *shard) remove(idx uint32) {
	sl := sh.at(idx)
	mask := uint64(len(sh.index) - 1)
	want := uint64(sl.hash)<<32 | uint64(idx+1)
	p := uint64(sl.hash) & mask
	for sh.index[p] != want {
		p = (p + 1) & mask
	}
	// Backward-shift deletion: move each later entry of the run into the
	// hole when its home is not between the hole and it, so that every
	// entry stays reachable from its home without tombstones.
	for j := (p + 1) & mask; sh.index[j] != 0; j = (j + 1) & mask {
		home := sh.index[j] >> 32 & mask
		if (j-home)&mask >= (j-p)&mask {
			sh.index[p] = sh.index[j]
			p = j
		}
	}
	sh.index[p] = 0
	sh.release(sl.name - 1)
	delete(sh.carried, idx)
	delete(sh.owners, idx)
	*sl = slot{}
	sh.free = append(sh.free, idx)
	sh.n--
}

// intern returns the id of name, adding a copy when no bucket of the shard
// uses it, and counts one more use. sh is locked.
func (sh *shard) intern(name string) uint32 {
	if id, ok := sh.ids[name]; ok {
		sh.names[id].refs++
		return id
	}
	var id uint32
	if l := len(sh.freeIDs); l > 0 {
		id = sh.freeIDs[l-1]
		sh.freeIDs = sh.freeIDs[:l-1]
	} else {
		id = uint32(len(sh.names))
		sh.names = append(sh.names, interned{})
	}
	n := strings.Clone(name)
	sh.names[id] = interned{s: n, refs: 1}
	sh.ids[n] = id
	return id
}

// release counts one use of name id less and frees the id at zero. sh is
// locked.
func (sh *shard) release(id uint32) {
	in := &sh.names[id]
	if in.refs--; in.refs > 0 {
		return
	}
	delete(sh.ids, in.s)
	*in = interned{}
	sh.freeIDs = append(sh.freeIDs, id)
}
