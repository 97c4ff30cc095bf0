package jepsen

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// SoakConfig is one soak (make soak): Members weir processes in Net
// (which has Members+1 namespaces: the last one is the spare that joins)
// for Duration under a recorded hot-key workload and an unrecorded bulk
// load at Load of the calibrated capacity, with a step of SoakSchedule
// every Every, the nodes' resources sampled every SampleEvery.
type SoakConfig struct {
	Bin     string
	Net     *Net
	Members int
	Dir     string
	Seed    uint64

	Duration, Every time.Duration
	// KillDown is how long a killed node stays down; Drain how long the
	// balancer has taken a node out of rotation before it is stopped.
	KillDown, Drain time.Duration
	SampleEvery     time.Duration

	// Rate is the bulk load in takes per second; 0 calibrates it: the
	// bulk callers run flat out for Calibrate, and Rate is Load times the
	// answers per second they got.
	Rate      float64
	Load      float64
	Calibrate time.Duration
	Callers   int // bulk callers
	Keys      int // bulk keys, uniform
	// Bulk is the bulk keys' limit, written as is (its rate may be any
	// ParseRate form).
	Bulk BulkLimit

	// The recorded workload: Hot (one key owned by each first member) and
	// Cold (ColdKeys keys) limits, Workers callers, each at WorkerRate,
	// asking every node in turn.
	Hot, Cold  Limit
	ColdKeys   int
	Workers    int
	WorkerRate float64

	Flat FlatLimits
}

// BulkLimit is the bulk load's limit.
type BulkLimit struct {
	Name     string
	Capacity int
	Rate     string // "1/m"
}

// DefaultSoak returns the soak of make soak for d: 3 members, a step
// every 3 minutes, half the calibrated capacity from 32 callers over
// 100,000 keys of a limit (2 per minute, burst 2) that keeps a third of
// them in debt, so the store, the replication and the handoffs carry real
// state; and the fault suite's hot and cold limits, recorded at 40
// requests a second.
func DefaultSoak(d time.Duration) SoakConfig {
	sc := DefaultScenario()
	return SoakConfig{
		Members: 3, Duration: d, Every: 3 * time.Minute,
		KillDown: 5 * time.Second, Drain: time.Second, SampleEvery: 10 * time.Second,
		Load: 0.5, Calibrate: 10 * time.Second, Callers: 32, Keys: 100_000,
		Bulk: BulkLimit{Name: "bulk", Capacity: 2, Rate: "2/m"},
		Hot:  sc.Hot, Cold: sc.Cold, ColdKeys: sc.ColdKeys, Workers: 8, WorkerRate: 5,
		Flat: DefaultFlatLimits,
	}
}

// SoakResult is the outcome of a soak.
type SoakResult struct {
	Seed       uint64
	Duration   time.Duration
	Calibrated float64 // bulk answers per second flat out (0: Rate was given)
	// CalibrationAnswers is the calibration's answers by kind: flat out,
	// error answers (limiter_overloaded) are expected and not judged.
	CalibrationAnswers map[string]int64
	Rate               float64 // the bulk load asked for
	Achieved           float64 // bulk answers per second over the run
	Answers            map[string]int64
	// Errors is the first MaxErrors error answers to the bulk load;
	// ErrorsBySegment counts them by the step before them.
	Errors          []ErrorEvent
	ErrorsBySegment []SegmentErrors
	Recorded        map[string]int64 // the recorded takes by outcome and status
	Steps           []SoakEvent
	Samples         int
	Warm            time.Duration
	Window          time.Duration
	Flat            []ProcFlat
	Buckets         []SoakBucketCheck
	LogErrors       map[string]int // level=ERROR lines per node log
	Failures        []string
	Pass            bool
	Elapsed         time.Duration
	Dir             string
}

// RunSoak runs a soak and checks it. progress gets a line per step. An
// error means the harness could not run it; check failures are in the
// result.
func RunSoak(ctx context.Context, cfg SoakConfig, progress io.Writer) (SoakResult, error) {
	start := time.Now()
	res := SoakResult{Seed: cfg.Seed, Duration: cfg.Duration, Dir: cfg.Dir}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return res, fmt.Errorf("jepsen: %w", err)
	}
	limits := filepath.Join(cfg.Dir, "limits.yaml")
	if err := writeSoakLimits(limits, cfg); err != nil {
		return res, err
	}
	c := NewCluster(ClusterConfig{Bin: cfg.Bin, Net: cfg.Net, Limits: limits, LogDir: cfg.Dir})
	defer c.Close()
	pr := NewProber(c, Name)
	defer pr.Close()
	s := &soak{cfg: cfg, c: c, pr: pr, res: &res}
	if err := s.setUp(ctx); err != nil {
		return res, err
	}
	if err := s.calibrate(ctx, progress); err != nil {
		return res, err
	}
	fmt.Fprintf(progress, "soak: %v at %.0f takes/s (bulk) + %.0f/s (recorded), a step every %v\n",
		cfg.Duration, res.Rate, float64(cfg.Workers)*cfg.WorkerRate, cfg.Every)
	if err := s.play(ctx, progress); err != nil {
		return res, err
	}
	s.check()
	res.Elapsed = time.Since(start)
	return res, s.save()
}

// soak is a RunSoak in progress.
type soak struct {
	cfg SoakConfig
	c   *Cluster
	pr  *Prober
	res *SoakResult

	members []int // in the cluster now, sorted
	bal     *Balancer
	hot     []string
	cold    []string
	rec     *Recorder
	bulk    *BulkLoad
	mu      sync.Mutex // guards samples
	samples []ResourceSample
}

// setUp starts the members, waits for them to agree (30 s at most),
// picks the recorded keys and puts the members in the balancer's
// rotation.
func (s *soak) setUp(ctx context.Context) error {
	for i := 1; i <= s.cfg.Members; i++ {
		if err := s.c.Start(i); err != nil {
			return err
		}
		s.members = append(s.members, i)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := s.pr.WaitConverged(wctx, s.members, s.names(s.members), nil); err != nil {
		return fmt.Errorf("jepsen: cluster did not form: %w", err)
	}
	var err error
	ks := ScenarioConfig{Hot: s.cfg.Hot, Cold: s.cfg.Cold, ColdKeys: s.cfg.ColdKeys}
	if _, s.hot, s.cold, err = pickKeys(wctx, s.pr, ks, s.cfg.Members); err != nil {
		return err
	}
	urls := make([]string, s.cfg.Net.N)
	for i := range urls {
		urls[i] = s.c.URL(i + 1)
	}
	s.bal = NewBalancer(urls)
	for _, i := range s.members {
		s.bal.In(i)
	}
	return nil
}

func (s *soak) names(nodes []int) []string {
	out := make([]string, len(nodes))
	for j, i := range nodes {
		out[j] = Name(i)
	}
	slices.Sort(out)
	return out
}

// calibrate sets res.Rate: cfg.Rate, or Load times the answers per
// second the bulk callers get flat out for cfg.Calibrate (after a second
// of warm-up).
func (s *soak) calibrate(ctx context.Context, progress io.Writer) error {
	s.res.Rate = s.cfg.Rate
	if s.cfg.Rate > 0 {
		return nil
	}
	ans := &Answers{}
	l := &BulkLoad{
		Limit: s.cfg.Bulk.Name, Keys: s.cfg.Keys, Callers: s.cfg.Callers, Deadline: 2 * time.Second,
		Seed: s.cfg.Seed + 1, Balancer: s.bal, Answers: ans,
	}
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { l.Run(cctx); close(done) }()
	err := sleepCtx(ctx, time.Second)
	from, t0 := l.Sent(), time.Now()
	if err == nil {
		err = sleepCtx(ctx, s.cfg.Calibrate)
	}
	n, el := l.Sent()-from, time.Since(t0)
	cancel()
	<-done
	if err != nil {
		return err
	}
	s.res.Calibrated = float64(n) / el.Seconds()
	s.res.Rate = s.cfg.Load * s.res.Calibrated
	counts := ans.Counts()
	s.res.CalibrationAnswers = counts
	_, errs := AnswerTotals(counts)
	fmt.Fprintf(progress, "soak: calibrated %.0f takes/s flat out over %v (%d error answers while flat out: %v)\n",
		s.res.Calibrated, s.cfg.Calibrate, errs, counts)
	if s.res.Rate < 1 {
		return errors.New("jepsen: calibration got no answers")
	}
	return nil
}

// play runs the loads and the sampler for the soak's length, playing the
// schedule.
func (s *soak) play(ctx context.Context, progress io.Writer) error {
	s.rec = NewRecorder()
	s.rec.Event("start", "wall clock "+time.Now().UTC().Format(time.RFC3339Nano)+" (node logs are in UTC)")
	urls := make(map[string]string, s.cfg.Net.N)
	for i := 1; i <= s.cfg.Net.N; i++ {
		urls[Name(i)] = s.c.URL(i)
	}
	wl := Workload{
		HotLimit: s.cfg.Hot.Name, ColdLimit: s.cfg.Cold.Name, HotKeys: s.hot, ColdKeys: s.cold,
		WorkersPerNode: max(1, s.cfg.Workers/s.cfg.Net.N), RatePerWorker: s.cfg.WorkerRate, HotShare: 0.7,
		Deadline: time.Second, Seed: s.cfg.Seed, RoundRobin: true,
	}
	s.bulk = &BulkLoad{
		Limit: s.cfg.Bulk.Name, Keys: s.cfg.Keys, Callers: s.cfg.Callers, Rate: s.res.Rate,
		Deadline: 2 * time.Second, Seed: s.cfg.Seed, Balancer: s.bal, Answers: &Answers{Clock: s.rec.Now},
	}
	lctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { RunClients(lctx, urls, wl, s.rec) })
	wg.Go(func() { s.bulk.Run(lctx) })
	wg.Go(func() { s.sample(lctx) })
	err := s.schedule(ctx, progress)
	if err == nil {
		err = sleepCtx(ctx, s.cfg.Duration-time.Duration(s.rec.Now()))
	}
	end := s.rec.Event("end", "")
	stop()
	wg.Wait()
	s.res.Achieved = float64(s.bulk.Sent()) / (float64(end) / 1e9)
	return err
}

// schedule plays SoakSchedule's steps at their instants.
func (s *soak) schedule(ctx context.Context, progress io.Writer) error {
	for _, st := range SoakSchedule(s.cfg.Duration, s.cfg.Every, s.cfg.Members) {
		if err := sleepCtx(ctx, st.At-time.Duration(s.rec.Now())); err != nil {
			return err
		}
		ev, err := s.step(ctx, st)
		if err != nil {
			return err
		}
		s.res.Steps = append(s.res.Steps, ev)
		fmt.Fprintf(progress, "soak: %6.1fs %s %s: converged %s\n", float64(ev.At)/1e9, ev.Kind, ev.Node, ev.Converge)
	}
	return nil
}

// step plays one step and waits (30 s at most) for the members to agree
// again; a node that comes back goes into rotation then. Its error is a
// node that could not be started or stopped.
func (s *soak) step(ctx context.Context, st SoakStep) (SoakEvent, error) {
	i := st.Node
	var ev SoakEvent
	switch st.Kind {
	case SoakJoin:
		ev = s.event(st)
		if err := s.c.Start(i); err != nil {
			return ev, err
		}
		s.members = append(s.members, i)
		slices.Sort(s.members)
	case SoakLeave:
		s.bal.Out(i)
		if err := sleepCtx(ctx, s.cfg.Drain); err != nil {
			return ev, err
		}
		ev = s.event(st)
		if err := s.c.Stop(i, 10*time.Second); err != nil {
			return ev, err
		}
		s.members = slices.DeleteFunc(s.members, func(m int) bool { return m == i })
	case SoakKill:
		ev = s.event(st)
		if err := s.c.Kill(i); err != nil {
			return ev, err
		}
		if err := sleepCtx(ctx, s.cfg.KillDown); err != nil {
			return ev, err
		}
		if err := s.c.Start(i); err != nil {
			return ev, err
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	d, err := s.pr.WaitConverged(wctx, s.members, s.names(s.members), nil)
	cancel()
	ev.Converge = d.Round(time.Millisecond).String()
	if err != nil {
		ev.Converge = err.Error()
		s.res.Failures = append(s.res.Failures, fmt.Sprintf("convergence: after %s %s at %.0fs: %v", st.Kind, Name(i), float64(ev.At)/1e9, err))
	}
	if st.Kind != SoakLeave {
		s.bal.In(i)
	}
	return ev, ctx.Err()
}

func (s *soak) event(st SoakStep) SoakEvent {
	return SoakEvent{At: s.rec.Event(string(st.Kind), Name(st.Node)), Kind: st.Kind, Node: Name(st.Node)}
}

// check fills the verdicts: over-admission per bucket and segment, the
// hot keys saturated, no bulk error answers, every node's resources flat.
func (s *soak) check() {
	res, cfg := s.res, s.cfg
	end := s.rec.Now()
	for _, e := range s.rec.Events() {
		if e.Kind == "end" {
			end = e.At
		}
	}
	ops := TakeOps(s.rec.Ops())
	limits := map[string]Limit{cfg.Hot.Name: cfg.Hot, cfg.Cold.Name: cfg.Cold}
	res.Buckets = CheckSoakBuckets(ops, limits, SoakSegments(res.Steps, end), cfg.Members)
	res.Failures = append(res.Failures, bucketFailures(res.Buckets)...)
	if hotDeniedBefore(ops, cfg.Hot.Name, end+1) == 0 {
		res.Failures = append(res.Failures, "sanity: the hot keys were never denied (not saturated; the excess check is vacuous)")
	}
	res.Recorded = make(map[string]int64)
	for _, o := range ops {
		k := string(o.Result)
		switch {
		case o.Status != 0 && o.Status != 200:
			k += " " + strconv.Itoa(o.Status)
		case o.Status == 0 && o.Err != "":
			k += " (no answer: " + shortErr(o.Err) + ")"
		}
		res.Recorded[k]++
	}
	res.Answers = s.bulk.Answers.Counts()
	res.Errors = s.bulk.Answers.Errors()
	res.ErrorsBySegment = ErrorsBySegment(res.Errors, SoakSegments(res.Steps, end))
	if _, errs := AnswerTotals(res.Answers); errs > 0 {
		res.Failures = append(res.Failures, fmt.Sprintf("answers: %d error answers to the bulk load (see the answers table)", errs))
	}
	s.mu.Lock()
	samples := slices.Clone(s.samples)
	s.mu.Unlock()
	res.Samples = len(samples)
	res.Warm, res.Window = SoakWindows(time.Duration(end))
	res.Flat = Flatness(samples, res.Warm, res.Window, time.Duration(end), cfg.Flat)
	res.Failures = append(res.Failures, FlatFailures(res.Flat, cfg.Flat)...)
	res.LogErrors = logErrors(cfg.Dir, cfg.Net.N)
	res.Pass = len(res.Failures) == 0
}

// logErrors counts the level=ERROR lines of every node's log.
func logErrors(dir string, n int) map[string]int {
	out := make(map[string]int)
	for i := 1; i <= n; i++ {
		f, err := os.Open(filepath.Join(dir, Name(i)+".log"))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "level=ERROR") {
				out[Name(i)]++
			}
		}
		f.Close()
	}
	return out
}

// save writes the history, the events, the samples and the result into
// the soak's directory.
func (s *soak) save() error {
	ops := s.rec.Ops()
	slices.SortFunc(ops, func(a, b Op) int { return int(a.ID - b.ID) })
	f, err := os.Create(filepath.Join(s.cfg.Dir, "history.jsonl"))
	if err != nil {
		return fmt.Errorf("jepsen: %w", err)
	}
	werr := WriteJSONL(f, ops)
	cerr := f.Close()
	var sb strings.Builder
	enc := json.NewEncoder(&sb)
	s.mu.Lock()
	for _, x := range s.samples {
		_ = enc.Encode(x)
	}
	s.mu.Unlock()
	evb, _ := json.MarshalIndent(s.rec.Events(), "", "  ")
	rb, _ := json.MarshalIndent(s.res, "", "  ")
	return errors.Join(werr, cerr,
		os.WriteFile(filepath.Join(s.cfg.Dir, "samples.jsonl"), []byte(sb.String()), 0o644),
		os.WriteFile(filepath.Join(s.cfg.Dir, "events.json"), evb, 0o644),
		os.WriteFile(filepath.Join(s.cfg.Dir, "result.json"), rb, 0o644))
}

// writeSoakLimits writes the soak's limits file: the recorded hot and
// cold limits and the bulk limit.
func writeSoakLimits(path string, cfg SoakConfig) error {
	if err := writeLimits(path, ConcLimit{}, cfg.Hot, cfg.Cold); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("jepsen: %w", err)
	}
	_, werr := fmt.Fprintf(f, "  - name: %s\n    algorithm: token_bucket\n    capacity: %d\n    rate: %s\n    on_owner_unreachable: local\n",
		cfg.Bulk.Name, cfg.Bulk.Capacity, cfg.Bulk.Rate)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return fmt.Errorf("jepsen: %w", werr)
	}
	return nil
}

// shortErr names a recorded request's transport error: refused (the node
// was down), reset, timeout or other.
func shortErr(e string) string {
	switch {
	case strings.Contains(e, "refused"):
		return "refused"
	case strings.Contains(e, "reset"), strings.Contains(e, "EOF"):
		return "reset"
	case strings.Contains(e, "deadline"), strings.Contains(e, "timeout"):
		return "timeout"
	}
	return "other"
}
