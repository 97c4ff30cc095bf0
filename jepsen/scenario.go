package jepsen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// Limit is a token-bucket limit written to the run's limits file.
type Limit struct {
	Name       string
	Capacity   int
	RatePerSec int
}

// Bucket is the ideal bucket of l.
func (l Limit) Bucket() Bucket {
	return Bucket{Capacity: float64(l.Capacity), Rate: float64(l.RatePerSec)}
}

// ScenarioConfig is one run: a fresh cluster, traffic, one fault.
type ScenarioConfig struct {
	Name  string // directory and table name, e.g. "3-kill"
	Fault Fault
	Hit   int // nodes the fault hits; 0 means 1 (Split: N/2)
	Seed  uint64
	Dir   string // the scenario's output directory (created)
	// Nodes starts the cluster under test: for example NetnsNodes for
	// processes in a Net, or a Compose cluster. Node i must call itself
	// Name(i).
	Nodes func(NodesConfig) (Nodes, error)

	Before, During, After time.Duration
	// ConvergeWithin is how long after heal every node must agree on the
	// members and the sample owners. Default 10s.
	ConvergeWithin time.Duration
	Loss           float64 // for Fault Loss

	Hot, Cold      Limit
	ColdKeys       int
	WorkersPerNode int
	RatePerWorker  float64
	HotShare       float64
	Deadline       time.Duration

	// Conc is the concurrency limit of the lease holders; HoldersPerNode
	// of them run on every node (0: no lease traffic).
	Conc           ConcLimit
	HoldersPerNode int
	MinHold        time.Duration
	MaxHold        time.Duration
	// AbandonShare is the share of granted leases whose holder dies
	// holding them: no renew, no release (the reclamation check).
	AbandonShare float64

	// Standalone runs every node with --cluster=false (the broken build);
	// ExpectViolation then passes the run only when the over-admission
	// checker fails it.
	Standalone      bool
	ExpectViolation bool
}

// DefaultScenario returns a ScenarioConfig with the quick-suite workload
// and phase lengths; the caller sets Name, Fault, Seed, Dir and Nodes.
func DefaultScenario() ScenarioConfig {
	return ScenarioConfig{
		// After is long enough for the "settled" phase: it starts once every
		// lease granted before convergence has surely ended (convergence +
		// MaxHold + max_lease_ttl, about 6-8 s after the heal).
		Before: 4 * time.Second, During: 5 * time.Second, After: 11 * time.Second,
		ConvergeWithin: 10 * time.Second, Loss: 0.3,
		Hot:      Limit{Name: "hot", Capacity: 12, RatePerSec: 6},
		Cold:     Limit{Name: "cold", Capacity: 4, RatePerSec: 1},
		ColdKeys: 40, WorkersPerNode: 3, RatePerWorker: 12, HotShare: 0.7,
		Deadline: time.Second,
		Conc:     ConcLimit{Name: "conc", Permits: 4, LeaseTTLms: 2000, MaxLeaseTTL: 2000},
		// 12 holders on 3 keys: about 4 per key, so permits are often all
		// held and some acquires are refused.
		HoldersPerNode: 4, MinHold: 100 * time.Millisecond, MaxHold: 2500 * time.Millisecond,
		AbandonShare: 0.1,
	}
}

// Result is the outcome of one scenario.
type Result struct {
	Name       string
	Fault      Fault
	Nodes      int
	Targets    []string
	Seed       uint64
	Buckets    []BucketCheck
	Avail      map[string]Availability // by phase
	AvailOther Availability            // during, nodes not hit
	Converge   time.Duration           // after heal; 0 when not measured
	Failures   []string
	Pass       bool
	Detected   bool // some bucket exceeded its bound
	// Leases is the lease verdict per key; LeaseDetected says some key
	// held more leases at once than its bound.
	Leases        []LeaseKeyCheck
	LeaseDetected bool
	// Linear is the per-instance linearizability verdict of the owners'
	// decisions (CheckLinear); LinearDetected says some instance failed.
	Linear         []LinearCheck
	LinearDetected bool
	// Hot is the hot keys' limit (for the HTML report).
	Hot Limit
	// KnownBug marks a scenario the caller expects to fail (xfail): the
	// summary shows XFAIL instead of FAIL. Set by the runner, not by Run.
	KnownBug bool
	Elapsed  time.Duration
	Dir      string
}

func seedFor(seed uint64, name string) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(name))
	return rand.New(rand.NewPCG(seed, h.Sum64()))
}

func writeLimits(path string, conc ConcLimit, ls ...Limit) error {
	var b strings.Builder
	b.WriteString("# written by the jepsen harness\nversion: 1\nlimits:\n")
	for _, l := range ls {
		fmt.Fprintf(&b, "  - name: %s\n    algorithm: token_bucket\n    capacity: %d\n    rate: %d/s\n    on_owner_unreachable: local\n",
			l.Name, l.Capacity, l.RatePerSec)
	}
	if conc.Name != "" {
		fmt.Fprintf(&b, "  - name: %s\n    kind: concurrency\n    permits: %d\n    lease_ttl: %dms\n    max_lease_ttl: %dms\n    strict: %t\n    on_owner_unreachable: local\n",
			conc.Name, conc.Permits, conc.LeaseTTLms, conc.MaxLeaseTTL, conc.Strict)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("jepsen: %w", err)
	}
	return nil
}

// Run runs one scenario and checks it. An error means the harness could not
// run it (setup failure, cancelled); check failures are in Result.
func Run(ctx context.Context, sc ScenarioConfig) (Result, error) {
	start := time.Now()
	res := Result{Name: sc.Name, Fault: sc.Fault, Seed: sc.Seed, Dir: sc.Dir}
	if err := os.MkdirAll(sc.Dir, 0o755); err != nil {
		return res, fmt.Errorf("jepsen: %w", err)
	}
	limitsPath := filepath.Join(sc.Dir, "limits.yaml")
	res.Hot = sc.Hot
	if err := writeLimits(limitsPath, sc.Conc, sc.Hot, sc.Cold); err != nil {
		return res, err
	}
	c, err := sc.Nodes(NodesConfig{Limits: limitsPath, LogDir: sc.Dir, Standalone: sc.Standalone})
	if err != nil {
		return res, err
	}
	defer c.Close()
	defer func() { _ = healAll(c) }()
	n := c.N()
	res.Nodes = n
	pr := NewProber(c, Name)
	defer pr.Close()

	all := make([]int, n)
	names := make([]string, n)
	for i := range n {
		all[i], names[i] = i+1, Name(i+1)
	}
	slices.Sort(names)
	for _, i := range all {
		if err := c.Start(i); err != nil {
			return res, err
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if sc.Standalone {
		for _, i := range all {
			if _, err := pr.WaitConverged(wctx, []int{i}, []string{Name(i)}, nil); err != nil {
				return res, err
			}
		}
	} else if _, err := pr.WaitConverged(wctx, all, names, nil); err != nil {
		return res, fmt.Errorf("jepsen: cluster did not form: %w", err)
	}

	// Targets and keys: one hot key owned by each node, cold keys anywhere.
	rng := seedFor(sc.Seed, sc.Name)
	hit := sc.Hit
	if hit == 0 {
		hit = 1
		switch sc.Fault {
		case Split:
			hit = n / 2
		case Ring:
			hit = n
		}
	}
	perm := rng.Perm(n)
	nm := Nemesis{Fault: sc.Fault, Loss: sc.Loss}
	if sc.Fault == Ring {
		for _, p := range perm {
			nm.Order = append(nm.Order, p+1)
		}
	}
	for _, p := range perm[:hit] {
		nm.Targets = append(nm.Targets, p+1)
	}
	slices.Sort(nm.Targets)
	for _, t := range nm.Targets {
		res.Targets = append(res.Targets, Name(t))
	}
	owner, hot, cold, err := pickKeys(wctx, pr, sc, n)
	if err != nil {
		return res, err
	}
	var leaseKeys []string
	if sc.HoldersPerNode > 0 {
		if leaseKeys, err = pickLeaseKeys(wctx, pr, sc, n, owner); err != nil {
			return res, err
		}
	}
	var samples []BucketID
	for _, k := range hot {
		samples = append(samples, BucketID{sc.Hot.Name, k})
	}
	for _, k := range cold[:min(4, len(cold))] {
		samples = append(samples, BucketID{sc.Cold.Name, k})
	}
	if !sc.Standalone {
		if _, err := pr.WaitConverged(wctx, all, names, samples); err != nil {
			return res, fmt.Errorf("jepsen: owners disagree before the run: %w", err)
		}
	}
	cancel()

	// Traffic and the fault.
	rec := NewRecorder()
	rec.Event("start", "wall clock "+time.Now().UTC().Format(time.RFC3339Nano)+" (node logs are in UTC)")
	urls := make(map[string]string, n)
	for _, i := range all {
		urls[Name(i)] = c.URL(i)
	}
	wl := Workload{
		HotLimit: sc.Hot.Name, ColdLimit: sc.Cold.Name, HotKeys: hot, ColdKeys: cold,
		WorkersPerNode: sc.WorkersPerNode, RatePerWorker: sc.RatePerWorker, HotShare: sc.HotShare,
		Deadline: sc.Deadline, Seed: sc.Seed,
	}
	cctx, stopClients := context.WithCancel(ctx)
	clientsDone := make(chan struct{})
	lw := LeaseWorkload{
		Limit: sc.Conc, Keys: leaseKeys, HoldersPerNode: sc.HoldersPerNode,
		MinHold: sc.MinHold, MaxHold: sc.MaxHold, Pause: 200 * time.Millisecond, AbandonShare: sc.AbandonShare,
		Deadline: sc.Deadline, Seed: sc.Seed,
	}
	go func() {
		var wg sync.WaitGroup
		wg.Go(func() { RunClients(cctx, urls, wl, rec) })
		wg.Go(func() { RunHolders(cctx, urls, lw, n*sc.WorkersPerNode, rec) })
		wg.Wait()
		close(clientsDone)
	}()
	defer func() { stopClients(); <-clientsDone }()

	tInject, tHeal := int64(0), int64(0)
	type converged struct {
		at  int64 // on the recorder's base
		err error
	}
	convDone := make(chan converged, 1)
	sleep := func(d time.Duration) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
			return nil
		}
	}
	if err := sleep(sc.Before); err != nil {
		return res, err
	}
	if sc.Fault != None {
		tInject = rec.Event("inject", nm.String())
		if err := nm.Inject(ctx, c); err != nil {
			return res, err
		}
		if err := sleep(sc.During); err != nil {
			return res, err
		}
		tHeal = rec.Event("heal-start", nm.String())
		if err := nm.Heal(ctx, c); err != nil {
			return res, err
		}
		rec.Event("heal", nm.String())
		go func() {
			cvctx, cancel := context.WithTimeout(ctx, sc.ConvergeWithin)
			defer cancel()
			d, err := pr.WaitConverged(cvctx, all, names, samples)
			var at int64
			if err == nil {
				at = rec.Event("converged", d.String())
				res.Converge = d
			}
			convDone <- converged{at, err}
		}()
		if err := sleep(sc.After); err != nil {
			return res, err
		}
	} else {
		convDone <- converged{}
	}
	tEnd := rec.Event("end", "")
	stopClients()
	<-clientsDone
	conv := <-convDone
	if conv.err != nil {
		res.Failures = append(res.Failures, "convergence: "+conv.err.Error())
	}
	if sc.Fault == None {
		tInject, tHeal = tEnd, tEnd
	}
	// Settled: every lease granted before convergence has surely ended.
	tSettle := tEnd + 1
	if conv.at > 0 {
		tSettle = min(tEnd+1, conv.at+int64(sc.MaxHold)+sc.Conc.MaxLeaseTTL*int64(time.Millisecond))
	}

	ops := rec.Ops()
	slices.SortFunc(ops, func(a, b Op) int { return int(a.ID - b.ID) })
	check(&res, sc, ops, owner, nm, n, tInject, tHeal, tSettle, tEnd)
	res.Elapsed = time.Since(start)
	return res, save(sc.Dir, ops, rec.Events(), res)
}

// healAll flushes every namespace's rules (a no-op when none were added).
func healAll(c Nodes) error {
	var errs []error
	for i := 1; i <= c.N(); i++ {
		errs = append(errs, c.Heal(context.Background(), i))
	}
	return errors.Join(errs...)
}

func save(dir string, ops []Op, ev []Event, res Result) error {
	f, err := os.Create(filepath.Join(dir, "history.jsonl"))
	if err != nil {
		return fmt.Errorf("jepsen: %w", err)
	}
	werr := WriteJSONL(f, ops)
	cerr := f.Close()
	evb, _ := json.MarshalIndent(ev, "", "  ")
	rb, _ := json.MarshalIndent(res, "", "  ")
	return errors.Join(werr, cerr,
		os.WriteFile(filepath.Join(dir, "events.json"), evb, 0o644),
		os.WriteFile(filepath.Join(dir, "result.json"), rb, 0o644))
}
