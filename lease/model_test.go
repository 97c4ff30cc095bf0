package lease

import (
	"cmp"
	"fmt"
	"io"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"
)

// model is the naive reference: flat slices, every question answered by a
// brute-force scan, no heap, no index. The differential tests drive it and a
// Table with the same operations and demand identical answers.
type model struct {
	cfg     Config
	now     time.Time
	next    uint64 // next fencing token
	tickets uint64
	rand    io.Reader // the same id nonce sequence as the Table's
	leases  []mLease
	waiters []mWaiter // in arrival order; a key's queue is its subsequence
	params  map[bucketKey]Params
}

type mLease struct {
	Grant
}

type mWaiter struct {
	ticket             uint64
	limit, key, holder string
	ttl                time.Duration
	deadline           time.Time
}

func newModel(c Config) *model {
	return &model{cfg: c, next: c.FirstFencing, rand: rand.NewChaCha8(modelSeed), params: map[bucketKey]Params{}}
}

// modelSeed seeds the id nonces of the model and of the Table it is
// compared with.
var modelSeed = [32]byte{42}

// nonce is the Table's nonce read from the model's copy of its source.
func (m *model) nonce() []byte {
	n := make([]byte, NonceBytes)
	if _, err := io.ReadFull(m.rand, n); err != nil {
		panic(err)
	}
	return n
}

func (m *model) held(k bucketKey) int64 {
	n := int64(0)
	for _, l := range m.leases {
		if l.Limit == k.limit && l.Key == k.key {
			n++
		}
	}
	return n
}

func (m *model) queued(k bucketKey) int {
	n := 0
	for _, w := range m.waiters {
		if w.limit == k.limit && w.key == k.key {
			n++
		}
	}
	return n
}

func (m *model) issue(k bucketKey, holder string, ttl time.Duration) Grant {
	g := Grant{
		ID: makeID(k.limit, k.key, m.next, m.nonce()), Limit: k.limit, Key: k.key,
		Holder: holder, Fencing: m.next, Expires: m.now.Add(ttl), TTL: ttl,
	}
	m.next++
	m.leases = append(m.leases, mLease{g})
	return g
}

// serve hands k's free permits to its waiters, oldest first.
func (m *model) serve(k bucketKey, ev *Events) {
	for m.held(k) < m.params[k].Permits {
		i := slices.IndexFunc(m.waiters, func(w mWaiter) bool { return w.limit == k.limit && w.key == k.key })
		if i < 0 {
			return
		}
		w := m.waiters[i]
		m.waiters = slices.Delete(m.waiters, i, i+1)
		g := m.issue(k, w.holder, w.ttl)
		g.Waiter = w.ticket
		ev.Granted = append(ev.Granted, g)
	}
}

// advance replays, one by one, the earliest due expiry or deadline.
func (m *model) advance(now time.Time, ev *Events) {
	if now.After(m.now) {
		m.now = now
	}
	for {
		li, wi := -1, -1
		for i, l := range m.leases {
			if !l.Expires.After(m.now) && (li < 0 || l.Expires.Before(m.leases[li].Expires) ||
				l.Expires.Equal(m.leases[li].Expires) && l.Fencing < m.leases[li].Fencing) {
				li = i
			}
		}
		for i, w := range m.waiters {
			if !w.deadline.After(m.now) && (wi < 0 || w.deadline.Before(m.waiters[wi].deadline) ||
				w.deadline.Equal(m.waiters[wi].deadline) && w.ticket < m.waiters[wi].ticket) {
				wi = i
			}
		}
		switch {
		case li < 0 && wi < 0:
			return
		case wi >= 0 && (li < 0 || !m.waiters[wi].deadline.After(m.leases[li].Expires)):
			ev.Dropped = append(ev.Dropped, m.waiters[wi].ticket)
			m.waiters = slices.Delete(m.waiters, wi, wi+1)
		default:
			l := m.leases[li]
			m.leases = slices.Delete(m.leases, li, li+1)
			ev.Expired = append(ev.Expired, l.Grant)
			m.serve(bucketKey{l.Limit, l.Key}, ev)
		}
	}
}

func (m *model) acquire(now time.Time, r Request, p Params) (Outcome, Events, bool) {
	var ev Events
	m.advance(now, &ev)
	k := bucketKey{r.Limit, r.Key}
	m.params[k] = p
	m.serve(k, &ev)
	held := m.held(k)
	if held < p.Permits {
		if len(m.leases) >= m.cfg.MaxLeases {
			return Outcome{Held: held}, ev, false
		}
		return Outcome{Status: Granted, Grant: m.issue(k, r.Holder, p.TTL(r.TTL)), Held: held + 1}, ev, true
	}
	var first time.Time
	for _, l := range m.leases {
		if l.Limit == k.limit && l.Key == k.key && (first.IsZero() || l.Expires.Before(first)) {
			first = l.Expires
		}
	}
	out := Outcome{Reason: ReasonBusy, RetryAfter: first.Sub(m.now), Held: held}
	wait := min(r.Wait, p.MaxWait)
	if p.QueueLength == 0 || wait <= 0 {
		return out, ev, true
	}
	if m.queued(k) >= p.QueueLength {
		out.Reason = ReasonQueueFull
		return out, ev, true
	}
	if len(m.waiters) >= m.cfg.MaxWaiters {
		return Outcome{Held: held}, ev, false
	}
	m.tickets++
	w := mWaiter{ticket: m.tickets, limit: r.Limit, key: r.Key, holder: r.Holder, ttl: p.TTL(r.TTL), deadline: m.now.Add(wait)}
	m.waiters = append(m.waiters, w)
	return Outcome{Status: Queued, Waiter: w.ticket, Deadline: w.deadline, Held: held}, ev, true
}

func (m *model) find(id string) int {
	return slices.IndexFunc(m.leases, func(l mLease) bool { return l.ID == id })
}

func (m *model) renew(now time.Time, id string, ttl time.Duration, p Params) (Grant, Events, bool) {
	var ev Events
	m.advance(now, &ev)
	i := m.find(id)
	if i < 0 {
		return Grant{}, ev, false
	}
	l := &m.leases[i]
	l.TTL = p.TTL(ttl)
	l.Expires = m.now.Add(l.TTL)
	g := l.Grant
	k := bucketKey{g.Limit, g.Key}
	m.params[k] = p
	m.serve(k, &ev)
	return g, ev, true
}

func (m *model) release(now time.Time, id string) (bool, Events) {
	var ev Events
	m.advance(now, &ev)
	i := m.find(id)
	if i < 0 {
		return false, ev
	}
	l := m.leases[i]
	m.leases = slices.Delete(m.leases, i, i+1)
	m.serve(bucketKey{l.Limit, l.Key}, &ev)
	return true, ev
}

func (m *model) cancel(ticket uint64) bool {
	i := slices.IndexFunc(m.waiters, func(w mWaiter) bool { return w.ticket == ticket })
	if i >= 0 {
		m.waiters = slices.Delete(m.waiters, i, i+1)
	}
	return i >= 0
}

func (m *model) export(now time.Time, pick func(limit, key string) bool, remove bool) (Handoff, Events) {
	var ev Events
	m.advance(now, &ev)
	h := Handoff{NextFencing: m.next}
	for _, l := range m.leases {
		if pick(l.Limit, l.Key) {
			h.Leases = append(h.Leases, Snapshot{
				ID: l.ID, Limit: l.Limit, Key: l.Key, Holder: l.Holder,
				Fencing: l.Fencing, TTL: l.TTL, Remaining: l.Expires.Sub(m.now),
			})
		}
	}
	slices.SortFunc(h.Leases, func(a, b Snapshot) int {
		return cmp.Or(cmp.Compare(a.Limit, b.Limit), cmp.Compare(a.Key, b.Key), cmp.Compare(a.Fencing, b.Fencing))
	})
	if remove {
		m.leases = slices.DeleteFunc(m.leases, func(l mLease) bool { return pick(l.Limit, l.Key) })
		// Dropped waiters come key by key in (limit, key) order, FIFO within a key.
		var gone []mWaiter
		for _, w := range m.waiters {
			if pick(w.limit, w.key) {
				gone = append(gone, w)
			}
		}
		slices.SortStableFunc(gone, func(a, b mWaiter) int {
			return cmp.Or(cmp.Compare(a.limit, b.limit), cmp.Compare(a.key, b.key))
		})
		for _, w := range gone {
			ev.Dropped = append(ev.Dropped, w.ticket)
		}
		m.waiters = slices.DeleteFunc(m.waiters, func(w mWaiter) bool { return pick(w.limit, w.key) })
	}
	return h, ev
}

func (m *model) importH(now time.Time, h Handoff) Events {
	var ev Events
	m.advance(now, &ev)
	m.next = max(m.next, h.NextFencing)
	for _, s := range h.Leases {
		m.next = max(m.next, s.Fencing+1)
		if s.Remaining <= 0 {
			continue
		}
		g := Grant{
			ID: s.ID, Limit: s.Limit, Key: s.Key, Holder: s.Holder, Fencing: s.Fencing,
			Expires: m.now.Add(s.Remaining), TTL: s.TTL,
		}
		if i := m.find(s.ID); i >= 0 {
			m.leases[i].Grant = g
		} else {
			m.leases = append(m.leases, mLease{g})
		}
	}
	return ev
}

func (m *model) nextAt() (time.Time, bool) {
	var first time.Time
	ok := false
	for _, l := range m.leases {
		if !ok || l.Expires.Before(first) {
			first, ok = l.Expires, true
		}
	}
	for _, w := range m.waiters {
		if !ok || w.deadline.Before(first) {
			first, ok = w.deadline, true
		}
	}
	return first, ok
}

// The fuzzed vocabulary: three keys, three rule sets, a few lifetimes.
var (
	fzKeys   = []bucketKey{{"db", "a"}, {"db", "b"}, {"x", "{t}:a"}}
	fzParams = []Params{
		{Permits: 2, DefaultTTL: 50 * time.Millisecond, MaxTTL: 200 * time.Millisecond, QueueLength: 2, MaxWait: 100 * time.Millisecond},
		{Permits: 1, DefaultTTL: 30 * time.Millisecond},
		{Permits: 3, DefaultTTL: 80 * time.Millisecond, MaxTTL: 80 * time.Millisecond, QueueLength: 3, MaxWait: 40 * time.Millisecond},
	}
	fzDur  = []time.Duration{0, 10 * time.Millisecond, 50 * time.Millisecond, time.Second}
	fzStep = []time.Duration{0, 0, 0, time.Millisecond, 5 * time.Millisecond, 20 * time.Millisecond, -10 * time.Millisecond, 300 * time.Millisecond}
)

// diffStats counts what a run exercised, so that TestTableAgainstModel can
// demand that every branch was reached.
type diffStats struct {
	granted, queued, busy, queueFull, overloaded, waiterGrants, dropped, expired, imports int
}

// diff drives a Table and a model with the operations encoded in ops and
// fails on the first difference.
func diff(t *testing.T, ops []byte) (st diffStats) {
	t.Helper()
	c := Config{MaxLeases: 7, MaxWaiters: 4, FirstFencing: 5}
	m := newModel(c)
	c.Rand = rand.NewChaCha8(modelSeed)
	tbl, err := NewTable(c)
	if err != nil {
		t.Fatal(err)
	}
	now := t0
	var ids []string     // every lease id ever granted, live or not
	var tickets []uint64 // every ticket ever issued
	lastFencing := uint64(0)
	newGrant := func(step int, g Grant) {
		t.Helper()
		if g.Fencing <= lastFencing {
			t.Fatalf("step %d: fencing %d not above %d", step, g.Fencing, lastFencing)
		}
		lastFencing = g.Fencing
		if l, k, ok := ParseID(g.ID); !ok || l != g.Limit || k != g.Key {
			t.Fatalf("step %d: ParseID(%q) = %q %q %v", step, g.ID, l, k, ok)
		}
		ids = append(ids, g.ID)
	}
	byte_ := func(i int) byte {
		if i < len(ops) {
			return ops[i]
		}
		return 0
	}
	pickID := func(b byte) string {
		if len(ids) == 0 || b == 255 {
			return "garbage"
		}
		return ids[int(b)%len(ids)]
	}
	check := func(step int, what string, got, want any) {
		t.Helper()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("step %d %s:\n table %+v\n model %+v", step, what, got, want)
		}
	}
	// events compares the side effects of a step and records new grants.
	events := func(step int, got, want Events) {
		t.Helper()
		check(step, "events", got, want)
		st.waiterGrants += len(got.Granted)
		st.dropped += len(got.Dropped)
		st.expired += len(got.Expired)
		for _, g := range got.Granted {
			newGrant(step, g)
		}
	}
	for step := 0; step*4 < len(ops); step++ {
		op, a, b, d := byte_(step*4), byte_(step*4+1), byte_(step*4+2), byte_(step*4+3)
		now = now.Add(fzStep[op>>5])
		switch op % 8 {
		case 0, 1, 2: // acquire
			k := fzKeys[int(a)%len(fzKeys)]
			p := fzParams[int(a>>4)%len(fzParams)]
			r := Request{Limit: k.limit, Key: k.key, Holder: fmt.Sprint("h", step), TTL: fzDur[b%4], Wait: fzDur[(b>>2)%4]}
			got, gev, err := tbl.Acquire(now, r, p)
			want, wev, ok := m.acquire(now, r, p)
			events(step, gev, wev)
			check(step, "acquire error", err != nil, !ok)
			if got.Status == Granted {
				newGrant(step, got.Grant)
			}
			switch {
			case err != nil:
				st.overloaded++
			case got.Status == Granted:
				st.granted++
			case got.Status == Queued:
				st.queued++
			case got.Reason == ReasonQueueFull:
				st.queueFull++
			default:
				st.busy++
			}
			if got.Status == Queued {
				tickets = append(tickets, got.Waiter)
			}
			check(step, "acquire", got, want)
		case 3: // renew
			id := pickID(b)
			p := fzParams[int(a)%len(fzParams)]
			got, gev, err := tbl.Renew(now, id, fzDur[d%4], p)
			want, wev, ok := m.renew(now, id, fzDur[d%4], p)
			events(step, gev, wev)
			check(step, "renew", fmt.Sprint(got, err != nil), fmt.Sprint(want, !ok))
		case 4: // release
			id := pickID(b)
			got, gev := tbl.Release(now, id)
			want, wev := m.release(now, id)
			events(step, gev, wev)
			check(step, "release", got, want)
		case 5: // expire
			events(step, tbl.Expire(now), func() Events { var ev Events; m.advance(now, &ev); return ev }())
		case 6: // cancel
			tk := uint64(b)
			if len(tickets) > 0 {
				tk = tickets[int(b)%len(tickets)]
			}
			check(step, "cancel", tbl.Cancel(tk), m.cancel(tk))
		case 7: // export (a snapshot, or a handoff out and back in later)
			pick := func(limit, key string) bool {
				i := slices.Index(fzKeys, bucketKey{limit, key})
				return i >= 0 && a&(1<<i) != 0
			}
			remove := b&1 != 0
			got, gev := tbl.Export(now, pick, remove)
			want, wev := m.export(now, pick, remove)
			events(step, gev, wev)
			check(step, "export", got, want)
			if remove || d&64 != 0 { // hand off and back, or re-import a snapshot (idempotent)
				back := now.Add(fzStep[d%8] / 2)
				if d&128 != 0 {
					got.NextFencing += uint64(d & 7) // a sender that was ahead
				}
				if d&32 != 0 && len(got.Leases) > 0 {
					got.Leases[0].Remaining = -got.Leases[0].Remaining / 2 // ran out in transit
				}
				st.imports++
				gev, err := tbl.Import(back, got)
				if err != nil {
					t.Fatalf("step %d: import: %v", step, err)
				}
				events(step, gev, m.importH(back, got))
				now = back
			}
		}
		for _, k := range fzKeys {
			check(step, "held "+k.key, tbl.Held(k.limit, k.key), m.held(k))
			check(step, "queued "+k.key, tbl.Queued(k.limit, k.key), m.queued(k))
		}
		check(step, "len", tbl.Len(), len(m.leases))
		check(step, "waiting", tbl.Waiting(), len(m.waiters))
		check(step, "next fencing", tbl.NextFencing(), m.next)
		gn, gok := tbl.Next()
		wn, wok := m.nextAt()
		check(step, "next", fmt.Sprint(gn, gok), fmt.Sprint(wn, wok))
		// The safety invariant: never more leases than permits, except
		// those held before permits shrank or brought in by Import.
		for _, k := range fzKeys {
			if q := tbl.Queued(k.limit, k.key); q > 0 && tbl.Held(k.limit, k.key) < m.params[k].Permits {
				t.Fatalf("step %d: %d waiters parked on %v with a free permit", step, q, k)
			}
		}
	}
	return st
}

func TestTableAgainstModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var total diffStats
	for range 300 {
		ops := make([]byte, 4*rng.IntN(200))
		busy := rng.IntN(2) == 0 // half the runs keep time still most of the time, to fill queues
		for i := range ops {
			ops[i] = byte(rng.Uint32())
			if busy && i%4 == 0 && rng.IntN(4) != 0 {
				ops[i] &= 0x1f
			}
		}
		st := diff(t, ops)
		total.granted += st.granted
		total.queued += st.queued
		total.busy += st.busy
		total.queueFull += st.queueFull
		total.overloaded += st.overloaded
		total.waiterGrants += st.waiterGrants
		total.dropped += st.dropped
		total.expired += st.expired
		total.imports += st.imports
	}
	t.Logf("exercised %+v", total)
	v := reflect.ValueOf(total)
	for i := range v.NumField() {
		if v.Field(i).Int() == 0 {
			t.Errorf("no run reached %s", v.Type().Field(i).Name)
		}
	}
}

func FuzzTable(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x64, 0, 0, 0})
	f.Add([]byte{0, 0, 0x0c, 0, 0, 0, 0x0c, 0, 0, 0, 0x0c, 0, 0x84, 0, 0, 0, 0xa5, 0, 0, 0})
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 1024 {
			ops = ops[:1024]
		}
		diff(t, ops)
	})
}
