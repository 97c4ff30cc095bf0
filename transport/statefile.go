package transport

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/weir-rl/weir/transport/peerpb"
)

// The state file keeps a node's owner state across a restart of the whole
// cluster (weir serve --state-dir). Its body is the handoff's own wire
// form, a peerpb.HandoffRequest whose entries encodeState makes, so a
// bucket or a lease has one encoding whether it crosses the network or a
// restart. Layout, big-endian:
//
//	magic     8 bytes  "WEIRSTAT"
//	version   4 bytes  StateFileVersion
//	written   8 bytes  the writer's now, Unix ns: the instant the
//	                   relative quantities of the body are measured from
//	length    8 bytes  the body's length
//	body      length bytes
//	sum      32 bytes  SHA-256 of everything before it
//
// A file of another magic or version, of a length other than the one its
// header names, or whose sum does not match is refused whole.

// StateFileVersion is the version of the state file this build writes and
// the only one it reads.
const StateFileVersion = 1

// MaxStateFileBody bounds the body a reader accepts (1 GiB): about ten
// million buckets, well above --max-buckets' default.
const MaxStateFileBody = 1 << 30

const (
	stateMagic  = "WEIRSTAT"
	stateHeader = 8 + 4 + 8 + 8
	stateSum    = sha256.Size
)

// ErrStateFile is wrapped by every refusal of DecodeStateFile.
var ErrStateFile = errors.New("state file refused")

// EncodeStateFile returns the state file holding st, whose relative
// quantities (tokens as of now, time until full, lease time left) are
// measured at written.
func EncodeStateFile(st State, written time.Time) ([]byte, error) {
	body, err := proto.Marshal(&peerpb.HandoffRequest{Entries: encodeState(st)})
	if err != nil {
		return nil, fmt.Errorf("transport: state file: %w", err)
	}
	if len(body) > MaxStateFileBody {
		return nil, fmt.Errorf("transport: state file: body of %d bytes above %d", len(body), MaxStateFileBody)
	}
	b := make([]byte, stateHeader, stateHeader+len(body)+stateSum)
	copy(b, stateMagic)
	binary.BigEndian.PutUint32(b[8:], StateFileVersion)
	binary.BigEndian.PutUint64(b[12:], uint64(written.UnixNano()))
	binary.BigEndian.PutUint64(b[20:], uint64(len(body)))
	b = append(b, body...)
	sum := sha256.Sum256(b)
	return append(b, sum[:]...), nil
}

// DecodeStateFile reads a state file whole: it returns its state and the
// instant it was written at, or an error wrapping ErrStateFile that says
// why it was refused (foreign magic, another version, a truncated or
// overlong file, a sum that does not match, a body that does not parse).
// Nothing is returned from a refused file.
func DecodeStateFile(b []byte) (State, time.Time, error) {
	// A file shorter than the magic is truncated when it begins like it.
	startsLikeMagic := bytes.HasPrefix(b, []byte(stateMagic)) || (len(b) < len(stateMagic) && bytes.HasPrefix([]byte(stateMagic), b))
	switch {
	case !startsLikeMagic:
		return State{}, time.Time{}, fmt.Errorf("%w: not a weir state file (bad magic)", ErrStateFile)
	case len(b) < stateHeader+stateSum:
		return State{}, time.Time{}, fmt.Errorf("%w: truncated: %d bytes, a header and sum need %d", ErrStateFile, len(b), stateHeader+stateSum)
	}
	if v := binary.BigEndian.Uint32(b[8:]); v != StateFileVersion {
		return State{}, time.Time{}, fmt.Errorf("%w: version %d, this build reads %d", ErrStateFile, v, StateFileVersion)
	}
	written := int64(binary.BigEndian.Uint64(b[12:]))
	n := binary.BigEndian.Uint64(b[20:])
	if n > MaxStateFileBody {
		return State{}, time.Time{}, fmt.Errorf("%w: body of %d bytes above %d", ErrStateFile, n, MaxStateFileBody)
	}
	if want := uint64(stateHeader) + n + stateSum; uint64(len(b)) != want {
		return State{}, time.Time{}, fmt.Errorf("%w: %d bytes where the header names %d (truncated or trailing data)", ErrStateFile, len(b), want)
	}
	end := stateHeader + int(n)
	if sum := sha256.Sum256(b[:end]); !bytes.Equal(sum[:], b[end:]) {
		return State{}, time.Time{}, fmt.Errorf("%w: checksum mismatch (corrupt)", ErrStateFile)
	}
	st, err := decodeStateBody(b[stateHeader:end])
	if err != nil {
		return State{}, time.Time{}, err
	}
	return st, time.Unix(0, written), nil
}

// decodeStateBody parses a state file's body.
func decodeStateBody(body []byte) (State, error) {
	var req peerpb.HandoffRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		return State{}, fmt.Errorf("%w: body: %w", ErrStateFile, err)
	}
	return decodeState(req.GetEntries()), nil
}
