package ring

// Meta is the metadata a member gossips about itself. Package ring/gossip
// encodes it into memberlist's node metadata (at most 512 bytes encoded,
// which leaves room for addresses of up to about 490 bytes together).
type Meta struct {
	// GRPCAddr is the host:port of the member's peer gRPC service.
	GRPCAddr string
	// LimitsVersion identifies the limits file the member has loaded.
	LimitsVersion int64
	// Incarnation distinguishes runs of a member (e.g. its start time in
	// nanoseconds), so peers notice a restart.
	Incarnation int64
	// APIAddr is the host:port of the member's public weir.v1.Limiter gRPC
	// service, the address clients dial. Empty when not published.
	APIAddr string
	// HTTPAddr is the host:port of the member's public HTTP API. Empty when
	// not published.
	HTTPAddr string
	// RESPAddr is the host:port of the member's Redis-protocol endpoint
	// (weir serve --resp-addr), which the Go client uses for its takes.
	// Empty when the endpoint is off.
	RESPAddr string
	// Protocol is the range of peer protocol versions the member speaks;
	// zero: version 1 only (a member of a release before versions).
	Protocol Versions
}

// Versions is the range of peer protocol versions a member speaks, both
// ends included (package transport defines them). The zero value is what a
// member that does not advertise any speaks: version 1 only, the protocol
// of every release before versions were advertised.
type Versions struct {
	// Min and Max bound the versions spoken; 0 reads as 1.
	Min, Max uint32
}

// Bounds returns the range with the zero defaults applied: 0 reads as 1,
// and a Max below Min as Min.
func (v Versions) Bounds() (lo, hi uint32) {
	lo, hi = max(v.Min, 1), max(v.Max, 1)
	return lo, max(hi, lo)
}

// Speaks reports whether version n is in the range.
func (v Versions) Speaks(n uint32) bool {
	lo, hi := v.Bounds()
	return lo <= n && n <= hi
}

// CommonVersion returns the highest peer protocol version every live member
// of ms speaks, or 0 when they have none in common (a member too old or too
// new for another; see the README's upgrade promise). Failed members do not
// count until they are live again.
func CommonVersion(ms []Member) uint32 {
	lo, hi := uint32(1), ^uint32(0)
	for _, m := range ms {
		if !m.State.Live() {
			continue
		}
		mlo, mhi := m.Meta.Protocol.Bounds()
		lo, hi = max(lo, mlo), min(hi, mhi)
	}
	if hi == ^uint32(0) {
		return 1
	}
	if lo > hi {
		return 0
	}
	return hi
}
