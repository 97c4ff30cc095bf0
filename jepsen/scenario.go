package jepsen

import (
	"context"
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
	// Allot, when not nil, writes the limit with allotments: auto
	// (node/limits): non-owner nodes decide its hot keys from slices of
	// the owner's bucket.
	Allot *Allot
}

// Allot is a limit's allotment settings as the limits file spells them;
// an empty field keeps Weir's default.
type Allot struct {
	// Threshold is allotment_threshold, the demand at a node from which it
	// asks for an allotment, as a rate ("10/s"). Default: Weir's (50/s).
	Threshold string
	// Horizon is allotment_horizon: an allotment covers this much of the
	// holder's demand. Default: Weir's (50ms).
	Horizon time.Duration
	// TTL is allotment_ttl: a holder stops using an allotment this long
	// after it asked. Default: Weir's (2s).
	TTL time.Duration
}

// yaml returns the allotment fields of a limit entry in the limits file.
func (a *Allot) yaml() string {
	if a == nil {
		return ""
	}
	s := "    allotments: auto\n"
	if a.Threshold != "" {
		s += fmt.Sprintf("    allotment_threshold: %s\n", a.Threshold)
	}
	if a.Horizon > 0 {
		s += fmt.Sprintf("    allotment_horizon: %dms\n", a.Horizon.Milliseconds())
	}
	if a.TTL > 0 {
		s += fmt.Sprintf("    allotment_ttl: %dms\n", a.TTL.Milliseconds())
	}
	return s
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
	// HotKeys is how many hot keys there are: 0 means one owned by each
	// node (so every fault hits a hot key's owner), 1 one key, whichever
	// node owns it.
	HotKeys int
	// RoundRobin and UnitCost are Workload's: every caller asks the
	// nodes in turn; hot requests cost 1.
	RoundRobin, UnitCost bool
	// AllotTargets asserts, for every hot key of a limit with allotments,
	// issue 18's targets (AllotCheck.Failures): at least 95% of B + r·T
	// admitted, and from AllotSettle on, at least 80% of the answers at
	// non-owners from an allotment and under 5% of the requests forwarded.
	// For runs without a fault.
	AllotTargets bool
	// AllotSettle is when, after the traffic starts, the allotments count
	// as settled for the locality figures. Default 2s.
	AllotSettle time.Duration

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
	// LinearSkipped names the limits whose buckets were not replayed
	// (limits with allotments; see checkLinear).
	LinearSkipped []string
	// Allot is the allotment figures of every bucket of a limit with
	// allotments (CheckAllot).
	Allot []AllotCheck
	// AllotMetrics is every node's weir_allotment* metrics at the end of
	// a run with allotments, summed over the nodes that answered (a node
	// restarted by the fault counts from its restart).
	AllotMetrics map[string]float64
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
		b.WriteString(l.Allot.yaml())
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
	res.Nodes = c.N()
	r := &scenarioRun{sc: sc, res: &res, c: c, n: res.Nodes, pr: NewProber(c, Name)}
	defer r.pr.Close()
	if err := r.setUp(ctx); err != nil {
		return res, err
	}

	stopTraffic := r.startTraffic(ctx)
	defer stopTraffic()
	tInject, tHeal, convDone, err := r.playFault(ctx)
	if err != nil {
		return res, err
	}
	tEnd := r.rec.Event("end", "")
	stopTraffic()
	if sc.Hot.Allot != nil {
		res.AllotMetrics = r.allotMetrics(ctx)
	}
	conv := <-convDone
	res.Converge = conv.after
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

	ops := r.rec.Ops()
	slices.SortFunc(ops, func(a, b Op) int { return int(a.ID - b.ID) })
	check(&res, sc, ops, r.owner, r.nm, r.n, tInject, tHeal, tSettle, tEnd)
	res.Elapsed = time.Since(start)
	return res, save(sc.Dir, ops, r.rec.Events(), res)
}

// scenarioRun is a Run in progress: the cluster under test and what Run's
// steps have chosen so far. Its methods are those steps, in the order Run
// calls them; each sets the fields its doc comment names.
type scenarioRun struct {
	sc  ScenarioConfig
	res *Result // Run's result, filled in as the steps go
	c   Nodes
	n   int // c.N()
	pr  *Prober

	all     []int               // the node indexes, 1..n (setUp)
	names   []string            // the node names, sorted (setUp)
	nm      Nemesis             // the fault and the nodes it hits (chooseTargets)
	owner   map[BucketID]string // every key's owner, as node 1 saw it (chooseKeys)
	hot     []string            // one hot key owned by each node (chooseKeys)
	cold    []string            // the cold keys (chooseKeys)
	leases  []string            // one lease key owned by each node, if leases are on (chooseKeys)
	samples []BucketID          // the keys whose owners convergence compares (chooseKeys)
	rec     *Recorder           // the history (startTraffic)
}

// setUp starts every node and waits, for at most 30 s from then, until the
// cluster has formed (each node alone when standalone), the fault's
// targets and the keys are chosen, and every node agrees on the owners of
// the sample keys. It sets all, names and what chooseTargets and
// chooseKeys set.
func (r *scenarioRun) setUp(ctx context.Context) error {
	r.all = make([]int, r.n)
	r.names = make([]string, r.n)
	for i := range r.n {
		r.all[i], r.names[i] = i+1, Name(i+1)
	}
	slices.Sort(r.names)
	for _, i := range r.all {
		if err := r.c.Start(i); err != nil {
			return err
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if r.sc.Standalone {
		for _, i := range r.all {
			if _, err := r.pr.WaitConverged(wctx, []int{i}, []string{Name(i)}, nil); err != nil {
				return err
			}
		}
	} else if _, err := r.pr.WaitConverged(wctx, r.all, r.names, nil); err != nil {
		return fmt.Errorf("jepsen: cluster did not form: %w", err)
	}
	r.chooseTargets()
	if err := r.chooseKeys(wctx); err != nil {
		return err
	}
	if !r.sc.Standalone {
		if _, err := r.pr.WaitConverged(wctx, r.all, r.names, r.samples); err != nil {
			return fmt.Errorf("jepsen: owners disagree before the run: %w", err)
		}
	}
	return nil
}

// chooseTargets picks, from the scenario's seed and name, the nodes the
// fault hits: sc.Hit of them, by default one (Split: half, Ring: all, in a
// shuffled ring order). It sets nm and res.Targets.
func (r *scenarioRun) chooseTargets() {
	rng := seedFor(r.sc.Seed, r.sc.Name)
	hit := r.sc.Hit
	if hit == 0 {
		hit = 1
		switch r.sc.Fault {
		case Split:
			hit = r.n / 2
		case Ring, Upgrade:
			hit = r.n
		}
	}
	perm := rng.Perm(r.n)
	r.nm = Nemesis{Fault: r.sc.Fault, Loss: r.sc.Loss}
	if r.sc.Fault == Ring || r.sc.Fault == Upgrade {
		for _, p := range perm {
			r.nm.Order = append(r.nm.Order, p+1)
		}
	}
	for _, p := range perm[:hit] {
		r.nm.Targets = append(r.nm.Targets, p+1)
	}
	slices.Sort(r.nm.Targets)
	for _, t := range r.nm.Targets {
		r.res.Targets = append(r.res.Targets, Name(t))
	}
}

// chooseKeys asks node 1 for the keys: one hot key owned by each node,
// the cold keys anywhere and, with lease traffic, one lease key owned by
// each node. It sets owner, hot, cold, leases and samples (the hot keys and
// the first four cold keys).
func (r *scenarioRun) chooseKeys(ctx context.Context) error {
	var err error
	if r.owner, r.hot, r.cold, err = pickKeys(ctx, r.pr, r.sc, r.n); err != nil {
		return err
	}
	if r.sc.HoldersPerNode > 0 {
		if r.leases, err = pickLeaseKeys(ctx, r.pr, r.sc, r.n, r.owner); err != nil {
			return err
		}
	}
	for _, k := range r.hot {
		r.samples = append(r.samples, BucketID{r.sc.Hot.Name, k})
	}
	for _, k := range r.cold[:min(4, len(r.cold))] {
		r.samples = append(r.samples, BucketID{r.sc.Cold.Name, k})
	}
	return nil
}

// startTraffic starts the take clients and the lease holders on every
// node, recording into a new history, rec. The returned stop ends them and
// waits until they have; it may be called more than once.
func (r *scenarioRun) startTraffic(ctx context.Context) (stop func()) {
	sc := r.sc
	r.rec = NewRecorder()
	r.rec.Event("start", "wall clock "+time.Now().UTC().Format(time.RFC3339Nano)+" (node logs are in UTC)")
	urls := make(map[string]string, r.n)
	for _, i := range r.all {
		urls[Name(i)] = r.c.URL(i)
	}
	wl := Workload{
		HotLimit: sc.Hot.Name, ColdLimit: sc.Cold.Name, HotKeys: r.hot, ColdKeys: r.cold,
		WorkersPerNode: sc.WorkersPerNode, RatePerWorker: sc.RatePerWorker, HotShare: sc.HotShare,
		Deadline: sc.Deadline, Seed: sc.Seed, RoundRobin: sc.RoundRobin, UnitCost: sc.UnitCost,
	}
	cctx, stopClients := context.WithCancel(ctx)
	clientsDone := make(chan struct{})
	lw := LeaseWorkload{
		Limit: sc.Conc, Keys: r.leases, HoldersPerNode: sc.HoldersPerNode,
		MinHold: sc.MinHold, MaxHold: sc.MaxHold, Pause: 200 * time.Millisecond, AbandonShare: sc.AbandonShare,
		Deadline: sc.Deadline, Seed: sc.Seed,
	}
	go func() {
		var wg sync.WaitGroup
		wg.Go(func() { RunClients(cctx, urls, wl, r.rec) })
		wg.Go(func() { RunHolders(cctx, urls, lw, r.n*sc.WorkersPerNode, r.rec) })
		wg.Wait()
		close(clientsDone)
	}()
	return func() { stopClients(); <-clientsDone }
}

// allotMetrics sums the weir_allotment* metrics of every node that
// answers.
func (r *scenarioRun) allotMetrics(ctx context.Context) map[string]float64 {
	out := make(map[string]float64)
	for _, i := range r.all {
		m, err := r.pr.Metrics(ctx, i, "weir_allotment")
		if err != nil {
			continue
		}
		for k, v := range m {
			out[k] += v
		}
	}
	return out
}
