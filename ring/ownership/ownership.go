package ownership

import (
	"errors"
	"fmt"
	"strings"

	"github.com/buraksezer/consistent"
	"github.com/cespare/xxhash/v2"
)

// Ring shape. Keys hash (xxhash) into Partitions partitions; partitions are
// placed on members by consistent hashing with bounded loads: each member
// sits at Replication points of the hash circle, and no member takes more
// than ceil(Load × average) partitions. The bound applies to partitions, not
// to keys: one hot key (or one hot hash tag) still lands on one member. 271
// (a prime) partitions keep the spread within a few percent for clusters up
// to a few dozen members and make a rebuild cost microseconds; 40 replicas
// smooth the circle (the library default is 20); when a member joins or
// leaves, about 1/n of the partitions move. Clusters larger than Partitions
// members get one partition per member (the bounded-load rule needs at
// least one per member).
const (
	DefaultPartitions  = 271
	DefaultReplication = 40
	DefaultLoad        = 1.25
)

// Hash names the key hash on the wire (weir.v1.RingResponse.hash).
const Hash = "xxhash64"

// HashTagRule names the hash-tag rule on the wire: Redis Cluster's.
const HashTagRule = "redis-cluster"

// Params shape a partition table. The zero value is invalid; start from
// DefaultParams.
type Params struct {
	// Partitions is the number of partitions, at least 1.
	Partitions int
	// Replication is the number of points per member on the hash circle,
	// at least 1.
	Replication int
	// Load bounds a member's partitions at ceil(Load × average); above 1.
	Load float64
}

// DefaultParams returns the shape every node uses.
func DefaultParams() Params {
	return Params{Partitions: DefaultPartitions, Replication: DefaultReplication, Load: DefaultLoad}
}

// Validate reports a parameter out of range. It changes nothing.
func (p Params) Validate() error {
	switch {
	case p.Partitions < 1:
		return fmt.Errorf("ownership: partitions %d must be at least 1", p.Partitions)
	case p.Replication < 1:
		return fmt.Errorf("ownership: replication %d must be at least 1", p.Replication)
	case !(p.Load > 1):
		return fmt.Errorf("ownership: load %v must be above 1", p.Load)
	}
	return nil
}

// HashKey returns the string that places the bucket (limit, key) on the
// ring. If key holds a hash tag, a non-empty substring between the first
// '{' and the first '}' after it (Redis Cluster's rule), only the tag is
// hashed, so all buckets of one tag share an owner whatever their limit.
// Otherwise the limit and the key are both hashed, separated by a NUL.
func HashKey(limit, key string) string {
	if tag, ok := hashTag(key); ok {
		return tag
	}
	return limit + "\x00" + key
}

// hashTag returns key's hash tag (see HashKey), if it has one.
func hashTag(key string) (string, bool) {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			return key[i+1 : i+1+j], true
		}
	}
	return "", false
}

// KeySum returns the hash that places (limit, key) on the ring, the
// xxhash of HashKey(limit, key), without building that string: a node
// places every take it decides, and the string was an allocation each
// time. OwnerIndexSum takes it.
func KeySum(limit, key string) uint64 {
	if tag, ok := hashTag(key); ok {
		return xxhash.Sum64String(tag)
	}
	var d xxhash.Digest
	d.Reset()
	_, _ = d.WriteString(limit)
	_, _ = d.WriteString("\x00")
	_, _ = d.WriteString(key)
	return d.Sum64()
}

// Sum returns the hash of a hash key (HashKey), as KeySum does of its
// parts.
func Sum(hashKey string) uint64 { return xxhash.Sum64String(hashKey) }

// Table maps partitions to ring members. The zero Table has no members and
// names no owner. A Table is immutable; it is safe for concurrent use.
type Table struct {
	members []string // ring members, sorted by name
	owners  []int32  // partition → index into members
}

// ErrBadTable is what FromOwners returns for an inconsistent table.
var ErrBadTable = errors.New("ownership: bad partition table")

// Build places Partitions partitions (at least one per member) on members,
// which must be distinct and sorted by name. It is a pure function: equal
// inputs give equal tables on every node and client.
func Build(members []string, p Params) Table {
	if len(members) == 0 {
		return Table{}
	}
	ring := make([]consistent.Member, len(members))
	idx := make(map[string]int32, len(members))
	for i, m := range members {
		ring[i] = member(m)
		idx[m] = int32(i)
	}
	n := max(p.Partitions, len(members))
	c := consistent.New(ring, consistent.Config{
		Hasher:            hasher{},
		PartitionCount:    n,
		ReplicationFactor: p.Replication,
		Load:              p.Load,
	})
	t := Table{members: append([]string(nil), members...), owners: make([]int32, n)}
	for part := range t.owners {
		t.owners[part] = idx[c.GetPartitionOwner(part).String()]
	}
	return t
}

// FromOwners rebuilds a Table published by a node: the ring members and,
// per partition, the index of its owner among them. It returns ErrBadTable
// when an index is out of range or either list is empty.
func FromOwners(members []string, owners []uint32) (Table, error) {
	if len(members) == 0 || len(owners) == 0 {
		return Table{}, fmt.Errorf("%w: %d members, %d partitions", ErrBadTable, len(members), len(owners))
	}
	t := Table{members: append([]string(nil), members...), owners: make([]int32, len(owners))}
	for i, o := range owners {
		if int(o) >= len(members) {
			return Table{}, fmt.Errorf("%w: partition %d names member %d of %d", ErrBadTable, i, o, len(members))
		}
		t.owners[i] = int32(o)
	}
	return t, nil
}

// Partition returns the partition of hashKey in a table of n partitions.
func Partition(hashKey string, n int) int { return partitionOf(Sum(hashKey), n) }

// partitionOf is Partition of a key's hash (Sum, KeySum).
func partitionOf(sum uint64, n int) int { return int(sum % uint64(n)) }

// Owner returns the name of the member that owns hashKey (see HashKey). It
// neither locks nor allocates; ok is false for the zero Table.
func (t Table) Owner(hashKey string) (string, bool) { return t.OwnerSum(Sum(hashKey)) }

// OwnerSum is Owner of a key's hash (KeySum, Sum).
func (t Table) OwnerSum(sum uint64) (string, bool) {
	i, ok := t.OwnerIndexSum(sum)
	if !ok {
		return "", false
	}
	return t.members[i], true
}

// OwnerIndex is Owner as an index into Members.
func (t Table) OwnerIndex(hashKey string) (int, bool) { return t.OwnerIndexSum(Sum(hashKey)) }

// OwnerIndexSum is OwnerIndex of a key's hash (KeySum, Sum).
func (t Table) OwnerIndexSum(sum uint64) (int, bool) {
	if len(t.owners) == 0 {
		return 0, false
	}
	return int(t.owners[partitionOf(sum, len(t.owners))]), true
}

// Members returns the ring members, sorted by name. Do not modify it.
func (t Table) Members() []string { return t.members }

// Owners returns, per partition, the index of its owner in Members, for
// publishing the table. It returns a fresh slice.
func (t Table) Owners() []uint32 {
	out := make([]uint32, len(t.owners))
	for i, o := range t.owners {
		out[i] = uint32(o)
	}
	return out
}

// Partitions returns the number of partitions; zero for the zero Table.
func (t Table) Partitions() int { return len(t.owners) }

// hasher adapts xxhash to consistent.Hasher.
type hasher struct{}

func (hasher) Sum64(b []byte) uint64 { return xxhash.Sum64(b) }

// member adapts a member name to consistent.Member.
type member string

func (m member) String() string { return string(m) }
