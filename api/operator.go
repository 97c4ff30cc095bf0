package api

import "context"

// Operator is what the operators' routes need of a node, on top of
// Decider: the cluster-wide hot keys and per-member statistics (GET
// /v1/cluster/hot and GET /v1/cluster/stats, and the status page that reads
// them). A front end is handed its Operator explicitly, as it is handed its
// Decider.
type Operator interface {
	// Hot merges the hot-key sketches of every reachable member: the n
	// heaviest keys of limit (of every limit when limit is ""). An unknown
	// limit or an n outside [1, MaxHotN] is CodeInvalid.
	Hot(ctx context.Context, limit string, n int) (HotKeys, error)
	// Stats reports every known member's counters and share of the ring.
	Stats(ctx context.Context) (ClusterStats, error)
}

// DefaultHotN is the number of hot keys GET /v1/cluster/hot lists when n
// is omitted; MaxHotN is the most it lists.
const (
	DefaultHotN = 10
	MaxHotN     = 100
)

// HotKey is one heavy key across the cluster: Cost over-estimates the cost
// asked of it (admitted and denied) by at most Error, so its true cost is
// in [Cost-Error, Cost]; Denied is a lower bound of the cost refused.
type HotKey struct {
	Key    string `json:"key"`
	Cost   int64  `json:"cost"`
	Error  int64  `json:"error"`
	Denied int64  `json:"denied"`
}

// HotLimit is the heaviest keys of one limit, heaviest first.
type HotLimit struct {
	Limit string   `json:"limit"`
	Keys  []HotKey `json:"keys"`
}

// HotKeys is the answer of GET /v1/cluster/hot. Nodes are the members whose
// sketches were merged; Missing those that could not be asked, whose
// traffic the answer leaves out. Allotments are the largest holdings the
// reachable owners record (at most 4 × n), largest first: who decides a
// hot key's takes from a slice of its bucket.
type HotKeys struct {
	Node       string      `json:"node"`
	Nodes      []string    `json:"nodes"`
	Missing    []string    `json:"missing"`
	Limits     []HotLimit  `json:"limits"`
	Allotments []Allotment `json:"allotments"`
}

// Allotment is one holding of a key's tokens as its owner records it:
// Holder (a node's name, or "client:" and a client's holder id) holds
// Tokens of the bucket of (Limit, Key), which Owner debited, for
// ExpiresInMs more at most.
type Allotment struct {
	Limit       string `json:"limit"`
	Key         string `json:"key"`
	Owner       string `json:"owner"`
	Holder      string `json:"holder"`
	Tokens      int64  `json:"tokens"`
	ExpiresInMs int64  `json:"expires_in_ms"`
}

// MemberStats is one member's counters (checks since it started) as it
// reported them, and its share of the answering node's ring.
type MemberStats struct {
	Name          string  `json:"name"`
	State         string  `json:"state"`
	Reachable     bool    `json:"reachable"`
	RingShare     float64 `json:"ring_share"`
	LimitsVersion int64   `json:"limits_version"`
	Allowed       uint64  `json:"allowed"`
	Denied        uint64  `json:"denied"`
	Fallback      uint64  `json:"fallback"`
	Buckets       int64   `json:"buckets"`
	LeasesHeld    int64   `json:"leases_held"`
}

// ClusterStats is the answer of GET /v1/cluster/stats: what the status page
// at /ui shows. Rates are the caller's to compute from two answers.
type ClusterStats struct {
	Node    string        `json:"node"`
	Epoch   uint64        `json:"epoch"`
	Members []MemberStats `json:"members"`
}
