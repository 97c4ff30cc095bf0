package jepsen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
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

// BucketCheck is the over-admission verdict for one bucket.
type BucketCheck struct {
	ID                    BucketID
	Owner                 string
	Relation              Relation
	Whole                 Window
	Before, During, After Window
	// OwnerBefore is the excess of owner decisions alone before the fault:
	// exactness says it is 0.
	OwnerBefore   Window
	Bound         float64 // OwnerChanges*B + Allowance
	OwnerChanges  int
	Allowance     float64 // FallbackAllowance over the whole run
	Lost          float64 // LostDebits at the inject (crash with replication)
	BoundWhy      string
	Indeterminate int64
	Fallbacks     int // allowed decisions with source fallback
	Pass          bool
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

// pickKeys finds one hot key owned by each node and names the cold keys,
// returning every key's owner (by node name) as node 1 sees it.
func pickKeys(ctx context.Context, c *Prober, sc ScenarioConfig, n int) (map[BucketID]string, []string, []string, error) {
	owner := make(map[BucketID]string)
	hot := make([]string, n)
	if sc.Standalone {
		for i := range n {
			hot[i] = "hot-" + strconv.Itoa(i)
		}
	} else {
		found := 0
		for j := 0; j < 1000 && found < n; j++ {
			k := "hot-" + strconv.Itoa(j)
			in, err := c.Info(ctx, 1, sc.Hot.Name, k)
			if err != nil {
				return nil, nil, nil, err
			}
			i, err := strconv.Atoi(strings.TrimPrefix(in.Owner, "n"))
			if err != nil || i < 1 || i > n {
				return nil, nil, nil, fmt.Errorf("jepsen: unexpected owner %q", in.Owner)
			}
			if hot[i-1] == "" {
				hot[i-1] = k
				owner[BucketID{sc.Hot.Name, k}] = in.Owner
				found++
			}
		}
		if found < n {
			return nil, nil, nil, errors.New("jepsen: could not find a hot key for every node")
		}
	}
	cold := make([]string, sc.ColdKeys)
	for j := range cold {
		cold[j] = "cold-" + strconv.Itoa(j)
		if sc.Standalone {
			continue
		}
		in, err := c.Info(ctx, 1, sc.Cold.Name, cold[j])
		if err != nil {
			return nil, nil, nil, err
		}
		owner[BucketID{sc.Cold.Name, cold[j]}] = in.Owner
	}
	return owner, hot, cold, nil
}

// pickLeaseKeys finds one key of the concurrency limit owned by each node
// and adds their owners to owner.
func pickLeaseKeys(ctx context.Context, c *Prober, sc ScenarioConfig, n int, owner map[BucketID]string) ([]string, error) {
	keys := make([]string, n)
	if sc.Standalone {
		for i := range n {
			keys[i] = "lease-" + strconv.Itoa(i)
		}
		return keys, nil
	}
	found := 0
	for j := 0; j < 1000 && found < n; j++ {
		k := "lease-" + strconv.Itoa(j)
		in, err := c.Info(ctx, 1, sc.Conc.Name, k)
		if err != nil {
			return nil, err
		}
		i, err := strconv.Atoi(strings.TrimPrefix(in.Owner, "n"))
		if err != nil || i < 1 || i > n {
			return nil, fmt.Errorf("jepsen: unexpected owner %q", in.Owner)
		}
		if keys[i-1] == "" {
			keys[i-1] = k
			owner[BucketID{sc.Conc.Name, k}] = in.Owner
			found++
		}
	}
	if found < n {
		return nil, errors.New("jepsen: could not find a lease key for every node")
	}
	return keys, nil
}

// check fills res's verdicts from the history.
func check(res *Result, sc ScenarioConfig, all []Op, owner map[BucketID]string, nm Nemesis, n int, tInject, tHeal, tSettle, tEnd int64) {
	ops := TakeOps(all)
	phases := []Phase{{"before", 0, tInject}, {"during", tInject, tHeal}, {"after", tHeal, tEnd + 1}}
	leasePhases := []Phase{phases[0], phases[1], {"after", tHeal, tSettle}, {"settled", tSettle, tEnd + 1}}
	res.Avail = make(map[string]Availability)
	for _, p := range phases {
		res.Avail[p.Name] = Availabilities(ops, p, nil)
	}
	hitNames := make(map[string]bool)
	for _, t := range nm.Targets {
		hitNames[Name(t)] = true
	}
	res.AvailOther = Availabilities(ops, phases[1], func(o Op) bool { return !hitNames[o.Node] })
	if b := res.Avail["before"]; b.Share() < 0.95 {
		res.Failures = append(res.Failures, fmt.Sprintf("sanity: only %.1f%% answered before the fault", 100*b.Share()))
	}

	limits := map[string]Limit{sc.Hot.Name: sc.Hot, sc.Cold.Name: sc.Cold}
	fault := sc.Fault
	if sc.Standalone {
		fault = None
	}
	hotDenied := 0
	for id, bops := range GroupByBucket(ops) {
		l := limits[id.Limit]
		b := l.Bucket()
		rel := OwnedElsewhere
		if hitNames[owner[id]] {
			rel = OwnedByTarget
		}
		bd := FaultBound(fault, rel, n)
		var ownerOps []Op
		for _, o := range bops {
			if o.Source == "owner" {
				ownerOps = append(ownerOps, o)
			}
		}
		allow, nfb := FallbackAllowance(bops, b, bd.Members, math.MinInt64, math.MaxInt64)
		allowBefore, _ := FallbackAllowance(bops, b, bd.Members, phases[0].Start, phases[0].End)
		lost := 0.0
		if bd.LastInterval {
			lost = LostDebits(bops, hitNames, tInject)
		}
		bc := BucketCheck{
			ID: id, Owner: owner[id], Relation: rel,
			Whole:         Excess(bops, b, math.MinInt64, math.MaxInt64),
			Before:        Excess(bops, b, phases[0].Start, phases[0].End),
			During:        Excess(bops, b, phases[1].Start, phases[1].End),
			After:         Excess(bops, b, phases[2].Start, phases[2].End),
			OwnerBefore:   Excess(ownerOps, b, phases[0].Start, phases[0].End),
			Bound:         bd.Tokens(b, allow, lost),
			OwnerChanges:  bd.OwnerChanges,
			Allowance:     allow,
			Lost:          lost,
			BoundWhy:      bd.Why,
			Indeterminate: Indeterminate(bops),
			Fallbacks:     nfb,
		}
		for _, o := range bops {
			if id.Limit == sc.Hot.Name && o.Result == Denied && o.Call < tInject {
				hotDenied++
			}
		}
		const eps = 1e-6
		bc.Pass = bc.OwnerBefore.Excess <= eps && bc.Before.Excess <= allowBefore+eps && bc.Whole.Excess <= bc.Bound+eps
		if !bc.Pass {
			res.Detected = true
		}
		res.Buckets = append(res.Buckets, bc)
	}
	slices.SortFunc(res.Buckets, func(a, b BucketCheck) int {
		return strings.Compare(a.ID.Limit+"/"+a.ID.Key, b.ID.Limit+"/"+b.ID.Key)
	})
	if hotDenied == 0 && tInject > 0 {
		res.Failures = append(res.Failures, "sanity: hot keys were never denied before the fault (not saturated; the check is vacuous)")
	}
	checkLeases(res, sc, all, owner, hitNames, fault, n, leasePhases)
	if fault == Pause {
		// A stopped node decides what it held once it resumes: within a
		// forward deadline, well inside a second.
		checkLinear(res, sc, HeldUntil(ops, hitNames, tInject, tHeal+int64(time.Second)))
	} else {
		checkLinear(res, sc, ops)
	}
	if sc.ExpectViolation {
		if !res.Detected {
			res.Failures = append(res.Failures, "acceptance: the broken build's over-admission went undetected")
		}
	} else {
		for _, bc := range res.Buckets {
			if !bc.Pass {
				res.Failures = append(res.Failures, fmt.Sprintf("over-admission: %s/%s (%s, owner %s): excess %.1f > bound %.1f (%d owner changes, %.0f debits of the crashed owner's last interval, fallback allowance %.1f from %d fallback admissions); before the fault: excess %.1f, owner-only %.1f",
					bc.ID.Limit, bc.ID.Key, bc.Relation, bc.Owner, bc.Whole.Excess, bc.Bound, bc.OwnerChanges, bc.Lost, bc.Allowance, bc.Fallbacks, bc.Before.Excess, bc.OwnerBefore.Excess))
			}
		}
	}
	res.Pass = len(res.Failures) == 0
}

// checkLeases fills res's lease verdicts. A key over its bound fails the
// run, except in the broken-build acceptance run, where it is expected.
func checkLeases(res *Result, sc ScenarioConfig, all []Op, owner map[BucketID]string, hitNames map[string]bool, fault Fault, n int, phases []Phase) {
	rel := func(id BucketID) Relation {
		if hitNames[owner[id]] {
			return OwnedByTarget
		}
		return OwnedElsewhere
	}
	tInject := int64(0)
	if len(phases) > 1 {
		tInject = phases[1].Start
	}
	res.Leases = CheckLeases(all, phases, time.Duration(sc.Conc.MaxLeaseTTL)*time.Millisecond,
		func(id BucketID) LeaseBound {
			lb := NewLeaseBound(sc.Conc, fault, rel(id), n)
			if FaultBound(fault, rel(id), n).LastInterval {
				lb = lb.WithLost(LostGrants(all, id, tInject))
			}
			return lb
		},
		func(id BucketID) (string, Relation) { return owner[id], rel(id) })
	for _, k := range res.Leases {
		if k.Pass {
			continue
		}
		res.LeaseDetected = true
		if sc.ExpectViolation {
			continue
		}
		if w := k.Worst(); w.Max > w.Bound {
			res.Failures = append(res.Failures, fmt.Sprintf("leases: %s/%s (%s, owner %s): %d held at once %s (at %.3fs) > bound %d (%s)",
				k.ID.Limit, k.ID.Key, k.Relation, k.Owner, w.Max, w.Phase, float64(w.At)/1e9, w.Bound, k.Bound.Why))
		}
		if len(k.FencingHealthy) > 0 {
			v := k.FencingHealthy[0]
			res.Failures = append(res.Failures, fmt.Sprintf("leases: %s/%s: %d owner grants of a healthy phase with a fencing token not above an earlier one (first: %d at %.3fs after %d at %.3fs)",
				k.ID.Limit, k.ID.Key, len(k.FencingHealthy), v.Later.Fencing, float64(v.Later.Call)/1e9, v.Earlier.Fencing, float64(v.Earlier.Return)/1e9))
		}
		if len(k.Leaks) > 0 {
			l := k.Leaks[0]
			res.Failures = append(res.Failures, fmt.Sprintf("leases: %s/%s: %d acquires refused %s while fewer than %d leases could be held (first at %.3fs by %s, at most %d held; %d abandoned leases expired before it): a lease was not reclaimed",
				k.ID.Limit, k.ID.Key, len(k.Leaks), l.Phase, k.Bound.Healthy, float64(l.Refused.Call)/1e9, l.Refused.Node, l.MostHeld, l.Abandoned))
		}
	}
}

// checkLinear fills res's linearizability verdicts: every instance of an
// owner's bucket must replay its decisions exactly. A failed instance
// fails the run (porcupine's visualization is written next to the
// history), except in the broken-build run.
func checkLinear(res *Result, sc ScenarioConfig, ops []Op) {
	limits := map[string]Limit{sc.Hot.Name: sc.Hot, sc.Cold.Name: sc.Cold}
	res.Linear = CheckLinear(ops, func(name string) (Limit, bool) { l, ok := limits[name]; return l, ok }, sc.Dir, 30*time.Second)
	for _, lc := range res.Linear {
		if lc.Pass {
			continue
		}
		res.LinearDetected = true
		if sc.ExpectViolation {
			continue
		}
		res.Failures = append(res.Failures, fmt.Sprintf("linearizability: %s/%s instance %s (%d decisions, %d timeouts): %s; see %s",
			lc.ID.Limit, lc.ID.Key, lc.Instance, lc.Ops, lc.Unknown, lc.Result, lc.Visualization))
	}
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
