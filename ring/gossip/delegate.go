package gossip

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
)

// eventQueue carries memberlist notifications to the Membership's event
// loop.
// memberlist calls the EventDelegate while holding its node lock, so push
// never blocks and never calls back into memberlist: it appends under a
// short private mutex (lossless and ordered, unlike a full channel) and
// pokes a one-slot channel.
type eventQueue struct {
	mu     sync.Mutex // guards events
	events []event
	ready  chan struct{} // one slot: "events is not empty"
}

func newEventQueue() *eventQueue { return &eventQueue{ready: make(chan struct{}, 1)} }

func (q *eventQueue) push(ev event) {
	q.mu.Lock()
	q.events = append(q.events, ev)
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// drain returns and clears the queued events.
func (q *eventQueue) drain() []event {
	q.mu.Lock()
	defer q.mu.Unlock()
	evs := q.events
	q.events = nil
	return evs
}

// delegate implements memberlist.Delegate and memberlist.EventDelegate for
// a Membership. Every method is non-blocking.
type delegate struct {
	q    *eventQueue
	meta *atomic.Pointer[[]byte] // this node's encoded Meta
}

var (
	_ memberlist.Delegate      = delegate{}
	_ memberlist.EventDelegate = delegate{}
)

func toEvent(kind eventKind, n *memberlist.Node) event {
	return event{
		kind: kind,
		name: n.Name,
		addr: n.Address(),
		meta: slices.Clone(n.Meta),
	}
}

// NotifyJoin queues a join event.
func (d delegate) NotifyJoin(n *memberlist.Node) { d.q.push(toEvent(evJoin, n)) }

// NotifyLeave queues a leave (failed or left) event.
func (d delegate) NotifyLeave(n *memberlist.Node) { d.q.push(toEvent(evLeave, n)) }

// NotifyUpdate queues an update event.
func (d delegate) NotifyUpdate(n *memberlist.Node) { d.q.push(toEvent(evUpdate, n)) }

// NodeMeta returns this node's encoded Meta (validated to fit the limit).
func (d delegate) NodeMeta(limit int) []byte {
	b := *d.meta.Load()
	if len(b) > limit {
		return nil
	}
	return b
}

// NotifyMsg queues a leaving note (see msgLeaving); it ignores any other
// user message.
func (d delegate) NotifyMsg(b []byte) {
	if name, ok := parseLeavingNote(b); ok {
		d.q.push(event{kind: evLeaving, name: name})
	}
}

// GetBroadcasts returns nothing; Weir piggybacks nothing on gossip.
func (delegate) GetBroadcasts(int, int) [][]byte { return nil }

// LocalState returns nothing; push/pull carries only memberlist's state.
func (delegate) LocalState(bool) []byte { return nil }

// MergeRemoteState ignores remote state.
func (delegate) MergeRemoteState([]byte, bool) {}

// logWriter turns memberlist's log.Logger lines ("[LEVEL] memberlist: msg")
// into slog records at the matching level. A line saying that a packet or
// stream failed to decrypt (its sender lacks the gossip key: a stray or
// hostile party, or a member with another secret) is counted with
// onDecrypt and logged through dec, at most once per decryptLogEvery, so a
// flood of junk packets cannot flood the log.
type logWriter struct {
	l         *slog.Logger
	onDecrypt func()   // nil: not counted
	dec       *rateLog // every decryptLogEvery
}

func (w logWriter) Write(p []byte) (int, error) {
	line := bytes.TrimSpace(p)
	level := slog.LevelInfo
	for _, lv := range []struct {
		tag   string
		level slog.Level
	}{{"[DEBUG]", slog.LevelDebug}, {"[INFO]", slog.LevelInfo}, {"[WARN]", slog.LevelWarn}, {"[ERR]", slog.LevelError}, {"[ERROR]", slog.LevelError}} {
		if rest, ok := bytes.CutPrefix(line, []byte(lv.tag)); ok {
			level, line = lv.level, bytes.TrimSpace(rest)
			break
		}
	}
	line = bytes.TrimPrefix(line, []byte("memberlist: "))
	if isDecryptFailure(line) {
		if w.onDecrypt != nil {
			w.onDecrypt()
		}
		log, suppressed := w.dec.note(time.Now())
		if !log {
			return len(p), nil
		}
		if w.l.Enabled(context.Background(), slog.LevelWarn) {
			w.l.Warn("gossip: a packet or stream failed to decrypt (wrong or no cluster secret); further failures are counted and logged at most every 10s",
				"component", "memberlist", "detail", string(line), "suppressed_since_last", suppressed)
		}
		return len(p), nil
	}
	if w.l.Enabled(context.Background(), level) {
		w.l.Log(context.Background(), level, string(line), "component", "memberlist")
	}
	return len(p), nil
}

// isDecryptFailure reports whether a memberlist log line (without its
// level and prefix) says that input from the network failed to decrypt:
// "Decrypt packet failed: ..." for UDP, "failed to receive: <decrypt
// error>" for a TCP stream.
func isDecryptFailure(line []byte) bool {
	if bytes.HasPrefix(line, []byte("Decrypt packet failed")) {
		return true
	}
	return bytes.HasPrefix(line, []byte("failed to receive")) &&
		(bytes.Contains(line, []byte("decrypt")) || bytes.Contains(line, []byte("not encrypted")))
}

// decryptLogEvery is the shortest interval between two logged decrypt
// failures.
const decryptLogEvery = 10 * time.Second

// rateLog rate-limits the log lines of a repeated failure (decrypt
// failures, failed joins): the first is logged, then at most one per
// every, each saying how many were suppressed since the last. It is safe
// for concurrent use (memberlist logs from several goroutines).
type rateLog struct {
	every      time.Duration // fixed at construction
	mu         sync.Mutex    // guards the fields below
	last       time.Time     // when a failure was last logged; zero: never
	suppressed int           // failures since then that were not logged
}

// note records one failure at now and reports whether to log it, with the
// number suppressed since the last logged one.
func (d *rateLog) note(now time.Time) (log bool, suppressed int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.last.IsZero() && now.Sub(d.last) < d.every {
		d.suppressed++
		return false, 0
	}
	suppressed, d.last, d.suppressed = d.suppressed, now, 0
	return true, suppressed
}
