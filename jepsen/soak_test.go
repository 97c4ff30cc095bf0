package jepsen

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestSoakScheduleCyclesAndSparesTheSeed(t *testing.T) {
	steps := SoakSchedule(30*time.Minute, 3*time.Minute, 3)
	if len(steps) != 9 {
		t.Fatalf("%d steps, want 9 (3, 6, ..., 27 min): %+v", len(steps), steps)
	}
	want := []SoakStep{
		{3 * time.Minute, SoakJoin, 4},
		{6 * time.Minute, SoakLeave, 2},
		{9 * time.Minute, SoakKill, 3},
		{12 * time.Minute, SoakJoin, 2},
		{15 * time.Minute, SoakLeave, 3},
		{18 * time.Minute, SoakKill, 4},
		{21 * time.Minute, SoakJoin, 3},
		{24 * time.Minute, SoakLeave, 4},
		{27 * time.Minute, SoakKill, 2},
	}
	if !slices.Equal(steps, want) {
		t.Fatalf("steps\n got %+v\nwant %+v", steps, want)
	}
	// Replay the membership: the seed never moves, a join starts a node
	// that is out, a leave or kill hits a member, and there are always 3
	// or 4 members.
	members := map[int]bool{1: true, 2: true, 3: true}
	for _, st := range SoakSchedule(3*time.Hour, time.Minute, 3) {
		if st.Node == 1 {
			t.Fatalf("step %+v hits the seed", st)
		}
		switch st.Kind {
		case SoakJoin:
			if members[st.Node] {
				t.Fatalf("join of member %d", st.Node)
			}
			members[st.Node] = true
		case SoakLeave, SoakKill:
			if !members[st.Node] {
				t.Fatalf("%s of non-member %d", st.Kind, st.Node)
			}
			if st.Kind == SoakLeave {
				delete(members, st.Node)
			}
		}
		if len(members) < 3 || len(members) > 4 {
			t.Fatalf("after %+v: %d members", st, len(members))
		}
	}
}

func TestSoakScheduleLeavesTimeToSettle(t *testing.T) {
	steps := SoakSchedule(5*time.Minute, time.Minute, 3)
	if len(steps) != 4 || steps[3].At != 4*time.Minute {
		t.Fatalf("5 min, every minute: %+v, want 4 steps, the last at 4m", steps)
	}
	if s := SoakSchedule(5*time.Minute, 0, 3); s != nil {
		t.Fatalf("no interval: %+v", s)
	}
	if s := SoakSchedule(time.Minute, 3*time.Minute, 3); len(s) != 0 {
		t.Fatalf("a run shorter than the interval: %+v", s)
	}
}

func TestSoakWindows(t *testing.T) {
	for _, c := range []struct{ d, warm, window time.Duration }{
		{30 * time.Minute, time.Minute, 5 * time.Minute},
		{5 * time.Minute, 30 * time.Second, 90 * time.Second},
	} {
		warm, window := SoakWindows(c.d)
		if warm != c.warm || window != c.window {
			t.Errorf("SoakWindows(%v) = %v, %v; want %v, %v", c.d, warm, window, c.warm, c.window)
		}
		if warm+window > c.d-window {
			t.Errorf("SoakWindows(%v): the windows overlap", c.d)
		}
	}
}

// sampleSeries returns a node's samples every 10 s over d from one process,
// each field from f(at).
func sampleSeries(node string, pid int, d time.Duration, f func(at time.Duration) ResourceSample) []ResourceSample {
	var out []ResourceSample
	for at := time.Duration(0); at <= d; at += 10 * time.Second {
		s := f(at)
		s.At, s.Node, s.Pid = at, node, pid
		out = append(out, s)
	}
	return out
}

func TestFlatnessJudgesEachResource(t *testing.T) {
	d := 30 * time.Minute
	warm, window := SoakWindows(d)
	flat := func(time.Duration) ResourceSample {
		return ResourceSample{RSS: 40 << 20, FDs: 30, Goroutines: 120, Conns: 10}
	}
	minutes := func(at time.Duration) float64 { return at.Minutes() }
	for _, c := range []struct {
		name string
		f    func(time.Duration) ResourceSample
		fail string // "" passes; else the resource the failure names
	}{
		{"flat", flat, ""},
		{"warm-up growth is not judged", func(at time.Duration) ResourceSample {
			s := flat(at)
			if at < warm {
				s.RSS = 10 << 20
			}
			return s
		}, ""},
		{"RSS leak", func(at time.Duration) ResourceSample {
			s := flat(at)
			s.RSS += int64(minutes(at) * float64(2<<20)) // 2 MiB a minute
			return s
		}, "RSS"},
		{"goroutine leak", func(at time.Duration) ResourceSample {
			s := flat(at)
			s.Goroutines += int(minutes(at) * 5)
			return s
		}, "goroutines"},
		{"file leak", func(at time.Duration) ResourceSample {
			s := flat(at)
			s.FDs += int(minutes(at))
			return s
		}, "open files"},
		{"more callers' connections are not a leak", func(at time.Duration) ResourceSample {
			s := flat(at)
			if at > 20*time.Minute {
				s.Conns += 40
				s.FDs += 40
				s.Goroutines += 40
			}
			return s
		}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			fl := Flatness(sampleSeries("n1", 7, d, c.f), warm, window, d, DefaultFlatLimits)
			if len(fl) != 1 || !fl[0].Judged {
				t.Fatalf("not judged: %+v", fl)
			}
			fails := FlatFailures(fl, DefaultFlatLimits)
			if c.fail == "" {
				if len(fails) != 0 || !fl[0].Pass {
					t.Fatalf("failures %v (%+v)", fails, fl[0])
				}
				return
			}
			if len(fails) != 1 || !strings.Contains(fails[0], c.fail) || fl[0].Pass {
				t.Fatalf("failures %v, want one naming %s", fails, c.fail)
			}
		})
	}
}

func TestFlatnessSkipsRestartedProcesses(t *testing.T) {
	d := 30 * time.Minute
	warm, window := SoakWindows(d)
	leaky := func(at time.Duration) ResourceSample {
		return ResourceSample{RSS: int64(at.Minutes()) << 24, FDs: 30, Goroutines: 100}
	}
	n2 := append(sampleSeries("n2", 10, 12*time.Minute, leaky), sampleSeries("n2", 11, d, leaky)[73:]...)
	fl := Flatness(append(sampleSeries("n1", 7, d, func(time.Duration) ResourceSample {
		return ResourceSample{RSS: 40 << 20, FDs: 30, Goroutines: 100}
	}), n2...), warm, window, d, DefaultFlatLimits)
	if len(fl) != 2 || fl[0].Node != "n1" || !fl[0].Judged || fl[1].Judged || fl[1].FirstPid != 10 || fl[1].LastPid != 11 {
		t.Fatalf("flatness %+v, want n1 judged and n2 (restarted) not", fl)
	}
	if f := FlatFailures(fl, DefaultFlatLimits); len(f) != 0 {
		t.Fatalf("failures %v", f)
	}
	if f := FlatFailures(fl[1:], DefaultFlatLimits); len(f) != 1 || !strings.Contains(f[0], "nothing judged") {
		t.Fatalf("only restarted nodes: failures %v, want one saying nothing was judged", f)
	}
}

func TestClassifyTake(t *testing.T) {
	for _, c := range []struct {
		status int
		body   string
		want   string
	}{
		{200, `{"allowed":true,"results":[]}`, AnswerAllowed},
		{200, `{"allowed":false}`, AnswerDenied},
		{429, `{"error":"rate_limited"}`, AnswerDenied},
		{200, `{"results":[]}`, "error 200 bad-reply"},
		{200, `not json`, "error 200 bad-reply"},
		{503, `{"error":"limiter_overloaded"}`, "error 503 limiter_overloaded"},
		{503, `{"error":"limiter_unavailable","detail":"deadline exceeded"}`, "error 503 limiter_unavailable"},
		{500, ``, "error 500 -"},
	} {
		if got := ClassifyTake(c.status, []byte(c.body)); got != c.want {
			t.Errorf("ClassifyTake(%d, %s) = %q, want %q", c.status, c.body, got, c.want)
		}
	}
}

func TestTransportClass(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("dial: %w", &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}), "refused"},
		{fmt.Errorf("read: %w", syscall.ECONNRESET), "reset"},
		{fmt.Errorf("post: %w", io.EOF), "reset"},
		{fmt.Errorf("post: %w", errContextDeadline), "timeout"},
		{errors.New("something else"), "other"},
	} {
		if got := TransportClass(c.err); got != c.want {
			t.Errorf("TransportClass(%v) = %q, want %q", c.err, got, c.want)
		}
	}
	if !Reroutable("refused") || !Reroutable("reset") || Reroutable("timeout") || Reroutable("other") {
		t.Error("Reroutable: want refused and reset only")
	}
}

var errContextDeadline = timeoutErr{}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "deadline" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestAnswerTotals(t *testing.T) {
	a := &Answers{}
	for range 5 {
		a.Add(AnswerAllowed)
	}
	a.Add(AnswerDenied)
	a.Add("error 503 limiter_overloaded")
	a.Add("error transport timeout")
	a.Add("rerouted refused")
	answers, errs := AnswerTotals(a.Counts())
	if answers != 8 || errs != 2 {
		t.Fatalf("AnswerTotals = %d answers, %d errors; want 8, 2", answers, errs)
	}
	if rows := answerRows(a.Counts()); !slices.Equal(rows, []string{
		AnswerAllowed, AnswerDenied,
		"error 503 limiter_overloaded", "error transport timeout", "rerouted refused",
	}) {
		t.Fatalf("rows %v", rows)
	}
}

// TestBulkLoadReroutesAroundADeadNode runs the bulk load against two real
// HTTP servers, one of which is closed: its requests are rerouted, the
// balancer takes it out of rotation, and every final answer comes from
// the live one.
func TestBulkLoadReroutesAroundADeadNode(t *testing.T) {
	live := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"allowed":true}`)
	}))
	defer live.Close()
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()
	b := NewBalancer([]string{live.URL, deadURL})
	b.In(1)
	b.In(2)
	l := &BulkLoad{Limit: "bulk", Keys: 10, Callers: 2, Deadline: time.Second, Balancer: b, Answers: &Answers{}}
	ctx, cancel := contextWithCondition(t, func() bool { return l.Sent() >= 50 })
	defer cancel()
	l.Run(ctx)
	c := l.Answers.Counts()
	if c[AnswerAllowed] < 50 || c["rerouted refused"] < 1 {
		t.Fatalf("answers %v: want 50 allowed and a reroute", c)
	}
	if _, errs := AnswerTotals(c); errs != 0 {
		t.Fatalf("answers %v: error answers", c)
	}
	if r := b.Rotation(); !slices.Equal(r, []int{1}) {
		t.Fatalf("rotation %v, want [1]: the dead node was not taken out", r)
	}
}

func TestCountEstablished(t *testing.T) {
	table := `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0B4D000A:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0000000000000000 100 0 0 10 0
   1: 0B4D000A:1F90 01004D0A:A1B2 01 00000000:00000000 00:00000000 00000000     0        0 2 1 0000000000000000 20 4 30 10 -1
   2: 0B4D000A:1F90 01004D0A:A1B3 01 00000000:00000000 00:00000000 00000000     0        0 3 1 0000000000000000 20 4 30 10 -1
   3: 0B4D000A:1F93 0C4D000A:1F93 01 00000000:00000000 00:00000000 00000000     0        0 4 1 0000000000000000 20 4 30 10 -1
   4: 0B4D000A:1F90 01004D0A:A1B4 06 00000000:00000000 00:00000000 00000000     0        0 5 1 0000000000000000 20 4 30 10 -1
`
	if n := countEstablished(table, 8080); n != 2 {
		t.Fatalf("countEstablished = %d, want 2 (the listener, a peer port and a TIME_WAIT are not callers)", n)
	}
}

func TestParseVmRSS(t *testing.T) {
	status := "Name:\tweir\nVmPeak:\t  900000 kB\nVmRSS:\t   51200 kB\nThreads:\t9\n"
	n, err := parseVmRSS(bufio.NewScanner(strings.NewReader(status)))
	if err != nil || n != 50<<20 {
		t.Fatalf("parseVmRSS = %d, %v; want 50 MiB", n, err)
	}
	if _, err := parseVmRSS(bufio.NewScanner(strings.NewReader("Name:\tweir\n"))); err == nil {
		t.Fatal("no VmRSS line: want an error")
	}
}

// segOps returns allowed owner decisions of cost 1 on hot/k by decider,
// one every 100ms over [from, to).
func segOps(decider string, from, to time.Duration) []Op {
	var out []Op
	for at := from; at < to; at += 100 * time.Millisecond {
		out = append(out, Op{
			Limit: "hot", Key: "k", Cost: 1, Call: int64(at), Return: int64(at + time.Millisecond),
			Result: Allowed, Source: "owner", Decider: decider, Node: "n1",
		})
	}
	return out
}

func TestCheckSoakBucketsPerSegment(t *testing.T) {
	hot := Limit{Name: "hot", Capacity: 10, RatePerSec: 10}
	limits := map[string]Limit{"hot": hot}
	kill := int64(10 * time.Second)
	end := int64(20 * time.Second)
	segs := SoakSegments([]SoakEvent{{At: kill, Kind: SoakKill, Node: "n2"}}, end)
	if len(segs) != 2 || segs[0].End != kill || segs[1].Start != kill || segs[1].End != end {
		t.Fatalf("segments %+v", segs)
	}
	// Exactly the rate: no excess anywhere.
	exact := append(segOps("n2", 0, 10*time.Second), segOps("n3", 10*time.Second, 20*time.Second)...)
	bcs := CheckSoakBuckets(exact, limits, segs, 3)
	if len(bcs) != 1 || !bcs[0].Pass || bcs[0].Whole.Excess != 0 {
		t.Fatalf("exact: %+v", bcs)
	}
	// After the kill the successor grants what the killed owner's last
	// interval (90 ms: 1 decision here) had spent again: within the
	// kill segment's bound.
	lost := slices.Concat(exact, []Op{{
		Limit: "hot", Key: "k", Cost: 1, Call: kill - int64(50*time.Millisecond), Return: kill - int64(40*time.Millisecond),
		Result: Allowed, Source: "owner", Decider: "n2",
	}})
	bcs = CheckSoakBuckets(lost, limits, segs, 3)
	if !bcs[0].Pass || bcs[0].Segments[1].Lost != 1 || bcs[0].Segments[0].Lost != 0 || bcs[0].Bound != 1 {
		t.Fatalf("lost debits at the kill: %+v", bcs[0].Segments)
	}
	// A burst of 15 extra grants in the first segment, which has no
	// fault (a bucket paced at its rate has B-1 = 9 to spare): over its
	// bound, 0.
	burst := slices.Clone(exact)
	for j := range 15 {
		burst = append(burst, Op{
			Limit: "hot", Key: "k", Cost: 1, Call: int64(5*time.Second) + int64(j), Return: int64(5*time.Second) + int64(j) + 1,
			Result: Allowed, Source: "owner", Decider: "n2",
		})
	}
	bcs = CheckSoakBuckets(burst, limits, segs, 3)
	if bcs[0].Pass || bcs[0].Segments[0].Pass || bcs[0].Worst().Seg.Kind != "" {
		t.Fatalf("a burst in the quiet segment passed: %+v", bcs[0])
	}
	if f := bucketFailures(bcs); len(f) != 1 || !strings.Contains(f[0], "hot/k") || !strings.Contains(f[0], "start") {
		t.Fatalf("failures %v", f)
	}
	// Buckets of other limits are not checked.
	if bcs := CheckSoakBuckets([]Op{{Limit: "bulk", Key: "u-1", Result: Allowed, Cost: 100}}, limits, segs, 3); len(bcs) != 0 {
		t.Fatalf("unknown limit checked: %+v", bcs)
	}
}

// contextWithCondition returns a context cancelled once cond holds
// (polled every 10 ms); the test fails if it does not within 10 s.
func contextWithCondition(t *testing.T, cond func() bool) (context.Context, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Error("condition not reached within 10s")
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
	}()
	return ctx, cancel
}

func TestErrorsBySegment(t *testing.T) {
	segs := SoakSegments([]SoakEvent{{At: 100, Kind: SoakJoin, Node: "n4"}, {At: 200, Kind: SoakKill, Node: "n2"}}, 300)
	errs := []ErrorEvent{
		{At: 120, Kind: "error 503 limiter_overloaded", Node: "n1"},
		{At: 110, Kind: "error 503 limiter_overloaded", Node: "n1"},
		{At: 250, Kind: "error transport timeout", Node: "n3"},
		{At: 300, Kind: "error transport timeout", Node: "n3"}, // the end belongs to the last segment
	}
	got := ErrorsBySegment(errs, segs)
	if len(got) != 2 || got[0].Seg.Kind != SoakJoin || got[0].First != 110 || got[0].Count["error 503 limiter_overloaded from n1"] != 2 ||
		got[1].Seg.Kind != SoakKill || got[1].Count["error transport timeout from n3"] != 2 {
		t.Fatalf("ErrorsBySegment = %+v", got)
	}
	if h := errorHistogram([]ErrorEvent{{At: int64(41 * time.Second)}, {At: int64(45 * time.Second)}, {At: int64(2 * time.Minute)}}, 10*time.Second); h != "40s:2 2m0s:1" {
		t.Fatalf("errorHistogram = %q", h)
	}
}

func TestStepRows(t *testing.T) {
	seg := []SoakSegment{{Start: 0, End: 10}, {Start: 10, End: 20, Kind: SoakKill, Node: "n2"}}
	bcs := []SoakBucketCheck{
		{ID: BucketID{"hot", "a"}, Segments: []SegmentCheck{
			{Seg: seg[0], Pass: true}, {Seg: seg[1], Excess: Window{Excess: 2}, Bound: 5, Lost: 1, Fallbacks: 3, Pass: true},
		}},
		{ID: BucketID{"hot", "b"}, Segments: []SegmentCheck{
			{Seg: seg[0], Excess: Window{Excess: 1}, Pass: false}, {Seg: seg[1], Excess: Window{Excess: 4}, Bound: 4, Lost: 2, Fallbacks: 1, Pass: true},
		}},
	}
	rows := stepRows(bcs)
	if len(rows) != 2 || rows[0].key != "hot/b" || rows[0].over != 1 ||
		rows[1].key != "hot/b" || rows[1].largest.Bound != 4 || rows[1].lost != 3 || rows[1].fallbacks != 4 || rows[1].over != 0 {
		t.Fatalf("stepRows = %+v", rows)
	}
}

func TestSlowKindsCountEveryBandReached(t *testing.T) {
	cases := []struct {
		d    time.Duration
		want int
	}{{49 * time.Millisecond, 0}, {50 * time.Millisecond, 1}, {120 * time.Millisecond, 2}, {499 * time.Millisecond, 3}, {2 * time.Second, 5}}
	for _, c := range cases {
		got := SlowKinds(c.d)
		if len(got) != c.want {
			t.Errorf("SlowKinds(%v) = %q, want %d bands", c.d, got, c.want)
		}
		for _, k := range got {
			if !strings.HasPrefix(k, SlowAnswer+" ") || slices.Contains([]string{AnswerAllowed, AnswerDenied}, k) {
				t.Errorf("SlowKinds(%v): %q is not a slow kind", c.d, k)
			}
		}
	}
	if got := SlowKinds(time.Second); got[len(got)-1] != "slow ≥1s" {
		t.Errorf("SlowKinds(1s) ends with %q, want slow ≥1s", got[len(got)-1])
	}
	answers, errs := AnswerTotals(map[string]int64{AnswerAllowed: 3, "slow ≥50ms": 2})
	if answers != 3 || errs != 0 {
		t.Errorf("slow bands counted as answers: %d answers, %d errors", answers, errs)
	}
}
