package gossip

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"

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

// NotifyMsg ignores user messages; Weir sends none over gossip.
func (delegate) NotifyMsg([]byte) {}

// GetBroadcasts returns nothing; Weir piggybacks nothing on gossip.
func (delegate) GetBroadcasts(int, int) [][]byte { return nil }

// LocalState returns nothing; push/pull carries only memberlist's state.
func (delegate) LocalState(bool) []byte { return nil }

// MergeRemoteState ignores remote state.
func (delegate) MergeRemoteState([]byte, bool) {}

// logWriter turns memberlist's log.Logger lines ("[LEVEL] memberlist: msg")
// into slog records at the matching level.
type logWriter struct{ l *slog.Logger }

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
	if w.l.Enabled(context.Background(), level) {
		w.l.Log(context.Background(), level, string(line), "component", "memberlist")
	}
	return len(p), nil
}
