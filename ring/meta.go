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
}
