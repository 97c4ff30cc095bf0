package transport

import (
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Version is a peer protocol version. Version 1 is the protocol of the first
// release that advertised versions: every field of peer.proto at that
// release, the forward's traceparent and budget_ns, the reply's expired,
// the tenant's tenant_prefix and tenant_max_buckets and the handoff's
// limit_def included. A later version
// adds fields (never changes or reuses one); a field an older receiver
// would misread by ignoring it is sent only when the cluster's version
// includes it (Speaks).
type Version = uint32

// The peer protocol versions this build speaks. Each release speaks at
// least the newest version of the release before it, so that the two
// interoperate during a rolling upgrade (README, "Upgrades").
const (
	// V1 is the first versioned protocol.
	V1 Version = 1
	// V2 adds HandoffRequest.buckets: a handoff's or replica batch's
	// buckets packed into one byte string (packed.go).
	V2 Version = 2
	// V3 adds the replica link: replica batches on a connection of their
	// own to the peer port instead of Handoff calls (link.go).
	V3 Version = 3
	// MinVersion is the oldest version this build speaks.
	MinVersion = V1
	// MaxVersion is the newest version this build speaks.
	MaxVersion = V3
)

// Speaks reports whether a cluster speaking version cluster may use a
// feature introduced in version feature: only when every live member
// speaks it, which the cluster's version (the highest common one) says.
func Speaks(cluster, feature Version) bool { return cluster >= feature }

// checkVersion returns nil when this build speaks v (0 reads as V1, a
// sender before versions), or a FailedPrecondition status naming both
// versions.
func checkVersion(v Version) error {
	v = max(v, V1)
	if v < MinVersion || v > MaxVersion {
		return status.Error(codes.FailedPrecondition, fmt.Sprintf(
			"transport: peer protocol version %d not spoken here (this node speaks %d to %d)", v, MinVersion, MaxVersion))
	}
	return nil
}
