package ring

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/hashicorp/memberlist"
)

// Meta is the metadata a member gossips about itself.
type Meta struct {
	// GRPCAddr is the host:port of the member's peer gRPC service.
	GRPCAddr string
	// LimitsVersion identifies the limits file the member has loaded.
	LimitsVersion int64
	// Incarnation distinguishes runs of a member (e.g. its start time in
	// nanoseconds), so peers notice a restart.
	Incarnation int64
}

// metaVersion is the first byte of an encoded Meta.
const metaVersion = 1

// maxMetaLen is the encoded limit imposed by memberlist.
const maxMetaLen = memberlist.MetaMaxSize

// errMetaTooLong is returned when an encoded Meta would exceed maxMetaLen.
var errMetaTooLong = fmt.Errorf("ring: meta longer than %d bytes encoded", maxMetaLen)

// Validate reports whether m fits memberlist's metadata limit (a GRPCAddr of
// up to about 490 bytes).
func (m Meta) Validate() error {
	if len(m.appendTo(nil)) > maxMetaLen {
		return errMetaTooLong
	}
	return nil
}

// metaLeaving is the flag bit saying the member is leaving gracefully.
// memberlist reports a graceful leave and a failure with the same
// NotifyLeave (the Node's State field is not updated), so a leaving member
// first gossips this flag; peers then treat its NotifyLeave as a leave.
const metaLeaving = 1

// appendTo encodes m compactly: a version byte, a flags byte, the two
// integers as zig-zag varints, then the address bytes (the rest).
func (m Meta) appendTo(b []byte) []byte { return m.appendFlags(b, 0) }

func (m Meta) appendFlags(b []byte, flags byte) []byte {
	b = append(b, metaVersion, flags)
	b = binary.AppendVarint(b, m.LimitsVersion)
	b = binary.AppendVarint(b, m.Incarnation)
	return append(b, m.GRPCAddr...)
}

// decodeMeta parses the output of Meta.appendFlags. Empty input is the zero
// Meta (a member that publishes none).
func decodeMeta(b []byte) (Meta, byte, error) {
	if len(b) == 0 {
		return Meta{}, 0, nil
	}
	if b[0] != metaVersion {
		return Meta{}, 0, fmt.Errorf("ring: unknown meta version %d", b[0])
	}
	if len(b) < 2 {
		return Meta{}, 0, errors.New("ring: short meta")
	}
	flags := b[1]
	b = b[2:]
	lv, k := binary.Varint(b)
	if k <= 0 {
		return Meta{}, 0, errors.New("ring: bad meta limits version")
	}
	b = b[k:]
	inc, k := binary.Varint(b)
	if k <= 0 {
		return Meta{}, 0, errors.New("ring: bad meta incarnation")
	}
	return Meta{GRPCAddr: string(b[k:]), LimitsVersion: lv, Incarnation: inc}, flags, nil
}
