package gossip

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/hashicorp/memberlist"

	"github.com/weir-rl/weir/ring"
)

// Meta encodings: the first byte of an encoded ring.Meta. Version 1 carries
// GRPCAddr as the tail; version 2 carries the three addresses
// length-prefixed (uvarint), so a member gossips its public addresses. A
// member writes version 1 when it has neither a public address nor
// protocol versions (older members decode it) and reads both.
//
// After version 2's addresses come extensions, each a uvarint tag, a
// uvarint length and that many bytes. A decoder skips tags it does not
// know, and a decoder from before extensions stops after the addresses, so
// a field added this way never breaks an older member's decoding.
const (
	metaVersion1 = 1
	metaVersion2 = 2
)

// Extension tags of meta version 2.
const (
	// metaExtProtocol holds ring.Meta.Protocol: uvarint Min, uvarint Max.
	metaExtProtocol = 1
	// metaExtRESP holds ring.Meta.RESPAddr, the bytes of the address.
	metaExtRESP = 2
)

// maxMetaLen is the encoded limit imposed by memberlist.
const maxMetaLen = memberlist.MetaMaxSize

// errMetaTooLong is returned when an encoded Meta would exceed maxMetaLen.
var errMetaTooLong = fmt.Errorf("gossip: meta longer than %d bytes encoded", maxMetaLen)

// validateMeta reports whether m fits memberlist's metadata limit
// (addresses of up to about 490 bytes together).
func validateMeta(m ring.Meta) error {
	if len(appendMeta(nil, m, 0)) > maxMetaLen {
		return errMetaTooLong
	}
	return nil
}

// metaLeaving is the flag bit saying the member is leaving gracefully.
// memberlist reports a graceful leave and a failure with the same
// NotifyLeave (the Node's State field is not updated), so a leaving member
// first gossips this flag (and sends the leaving note, msgLeaving); peers
// then treat its NotifyLeave as a leave.
const metaLeaving = 1

// appendMeta encodes m compactly with flags: a version byte, the flags
// byte, the two integers as zig-zag varints, then the address bytes: the
// rest (version 1), or three length-prefixed strings (version 2).
func appendMeta(b []byte, m ring.Meta, flags byte) []byte {
	v2 := m.APIAddr != "" || m.HTTPAddr != "" || m.RESPAddr != "" || m.Protocol != (ring.Versions{})
	if v2 {
		b = append(b, metaVersion2, flags)
	} else {
		b = append(b, metaVersion1, flags)
	}
	b = binary.AppendVarint(b, m.LimitsVersion)
	b = binary.AppendVarint(b, m.Incarnation)
	if !v2 {
		return append(b, m.GRPCAddr...)
	}
	for _, s := range [...]string{m.GRPCAddr, m.APIAddr, m.HTTPAddr} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	if m.Protocol != (ring.Versions{}) {
		ext := binary.AppendUvarint(nil, uint64(m.Protocol.Min))
		ext = binary.AppendUvarint(ext, uint64(m.Protocol.Max))
		b = binary.AppendUvarint(b, metaExtProtocol)
		b = binary.AppendUvarint(b, uint64(len(ext)))
		b = append(b, ext...)
	}
	if m.RESPAddr != "" {
		b = binary.AppendUvarint(b, metaExtRESP)
		b = binary.AppendUvarint(b, uint64(len(m.RESPAddr)))
		b = append(b, m.RESPAddr...)
	}
	return b
}

// decodeMeta parses the output of appendMeta. Empty input is the zero Meta
// (a member that publishes none).
func decodeMeta(b []byte) (ring.Meta, byte, error) {
	if len(b) == 0 {
		return ring.Meta{}, 0, nil
	}
	version := b[0]
	if version != metaVersion1 && version != metaVersion2 {
		return ring.Meta{}, 0, fmt.Errorf("gossip: unknown meta version %d", b[0])
	}
	if len(b) < 2 {
		return ring.Meta{}, 0, errors.New("gossip: short meta")
	}
	flags := b[1]
	b = b[2:]
	lv, k := binary.Varint(b)
	if k <= 0 {
		return ring.Meta{}, 0, errors.New("gossip: bad meta limits version")
	}
	b = b[k:]
	inc, k := binary.Varint(b)
	if k <= 0 {
		return ring.Meta{}, 0, errors.New("gossip: bad meta incarnation")
	}
	b = b[k:]
	m := ring.Meta{LimitsVersion: lv, Incarnation: inc}
	if version == metaVersion1 {
		m.GRPCAddr = string(b)
		return m, flags, nil
	}
	for _, dst := range [...]*string{&m.GRPCAddr, &m.APIAddr, &m.HTTPAddr} {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return ring.Meta{}, 0, errors.New("gossip: bad meta address")
		}
		*dst = string(b[k : k+int(n)])
		b = b[k+int(n):]
	}
	if err := decodeMetaExts(b, &m); err != nil {
		return ring.Meta{}, 0, err
	}
	return m, flags, nil
}

// decodeMetaExts parses version 2's extensions into m, skipping tags it
// does not know.
func decodeMetaExts(b []byte, m *ring.Meta) error {
	return walkMetaExts(b, func(tag uint64, val []byte) error {
		switch tag {
		case metaExtProtocol:
			v, err := decodeVersions(val)
			if err != nil {
				return err
			}
			m.Protocol = v
		case metaExtRESP:
			m.RESPAddr = string(val)
		}
		return nil
	})
}

// walkMetaExts calls fn with each extension's tag and value in b, in
// order, and stops at fn's first error or a malformed tag or length.
func walkMetaExts(b []byte, fn func(tag uint64, val []byte) error) error {
	for len(b) > 0 {
		tag, k := binary.Uvarint(b)
		if k <= 0 {
			return errors.New("gossip: bad meta extension tag")
		}
		b = b[k:]
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return errors.New("gossip: bad meta extension length")
		}
		val := b[k : k+int(n)]
		b = b[k+int(n):]
		if err := fn(tag, val); err != nil {
			return err
		}
	}
	return nil
}

// decodeVersions parses the value of metaExtProtocol.
func decodeVersions(val []byte) (ring.Versions, error) {
	lo, k := binary.Uvarint(val)
	if k <= 0 || lo > math.MaxUint32 {
		return ring.Versions{}, errors.New("gossip: bad meta protocol versions")
	}
	hi, k2 := binary.Uvarint(val[k:])
	if k2 <= 0 || hi > math.MaxUint32 {
		return ring.Versions{}, errors.New("gossip: bad meta protocol versions")
	}
	return ring.Versions{Min: uint32(lo), Max: uint32(hi)}, nil
}
