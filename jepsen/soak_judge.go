package jepsen

import (
	"fmt"
	"slices"
	"time"
)

// The soak's pure parts: its fault schedule, the flatness judgement of the
// nodes' resource samples and the windows it compares. soak.go runs them
// against real processes.

// SoakKind is one kind of step of the soak's fault schedule.
type SoakKind string

// The soak's steps, played in this order, over and over.
const (
	// SoakJoin starts the spare node: it joins the cluster.
	SoakJoin SoakKind = "join"
	// SoakLeave stops a member gracefully (SIGTERM) after the load
	// balancer has taken it out of rotation; it becomes the spare.
	SoakLeave SoakKind = "leave"
	// SoakKill kills a member (SIGKILL) and starts it again after
	// SoakConfig.KillDown; the load balancer learns of it from failed
	// connections.
	SoakKill SoakKind = "kill"
)

// SoakStep is one step of the schedule: at At after the load starts, Kind
// happens to node Node.
type SoakStep struct {
	At   time.Duration
	Kind SoakKind
	Node int
}

// SoakSchedule returns the steps of a soak of length d with a step every
// every, on a cluster that starts as nodes 1..n with node n+1 spare. Node 1
// (the seed) is never touched, so one process spans the whole run. The
// steps cycle join, leave, kill: a join starts the spare; a leave stops a
// member other than the seed, the next one in turn, which becomes the
// spare; a kill hits a member other than the seed, the next one in turn.
// So the cluster has n or n+1 members between steps. A step is scheduled
// only while at least every/2 of the run is left after it, for the step to
// settle before the end.
func SoakSchedule(d, every time.Duration, n int) []SoakStep {
	if every <= 0 || n < 2 {
		return nil
	}
	members := make([]int, n)
	for i := range members {
		members[i] = i + 1
	}
	spare := n + 1
	kinds := []SoakKind{SoakJoin, SoakLeave, SoakKill}
	var steps []SoakStep
	leaves, kills := 0, 0
	for k := 1; time.Duration(k)*every <= d-every/2; k++ {
		st := SoakStep{At: time.Duration(k) * every, Kind: kinds[(k-1)%len(kinds)]}
		others := members[1:] // members stays sorted and starts with the seed
		switch st.Kind {
		case SoakJoin:
			st.Node = spare
			members = append(members, spare)
			slices.Sort(members)
		case SoakLeave:
			st.Node = others[leaves%len(others)]
			leaves++
			members = slices.DeleteFunc(members, func(m int) bool { return m == st.Node })
			spare = st.Node
		case SoakKill:
			st.Node = others[kills%len(others)]
			kills++
		}
		steps = append(steps, st)
	}
	return steps
}

// ResourceSample is one reading of one node process's resources.
type ResourceSample struct {
	At   time.Duration `json:"at"` // since the load started
	Node string        `json:"node"`
	Pid  int           `json:"pid"`
	// RSS is VmRSS from /proc/<pid>/status, in bytes.
	RSS int64 `json:"rss"`
	// FDs is the number of entries of /proc/<pid>/fd.
	FDs int `json:"fds"`
	// Goroutines is go_goroutines from the node's /metrics (-1 when the
	// node did not answer).
	Goroutines int `json:"goroutines"`
	// Conns is the node's established TCP connections on its HTTP port
	// (from /proc/<pid>/net/tcp): the callers' keep-alive connections,
	// each an open file and a goroutine, whose number follows how the load
	// balancer spreads the callers, not the node's health.
	Conns int `json:"conns"`
}

// FlatLimits is how much a resource may grow from the first window to
// the last before the soak calls it a leak: last <= first*Factor + Slack,
// on the medians of each window. Open files and goroutines are judged
// without the callers' HTTP connections (ResourceSample.Conns).
type FlatLimits struct {
	RSSFactor  float64
	RSSSlack   int64 // bytes
	GoFactor   float64
	GoSlack    int
	FDSlack    int
	MinSamples int // per window; fewer and the process is not judged
}

// DefaultFlatLimits are the soak's tolerances. Go's heap grows to its
// working set and the runtime returns memory lazily, so RSS gets a
// quarter and 16 MiB; goroutines a fifth and 50 (a fourth member adds its
// peer streams and batchers); open files 20 (a fourth member's gossip and
// peer connections). A leak of one goroutine or file per request, per
// connection or per fault, over thousands of requests a second and ten
// faults, is far past every one of them.
var DefaultFlatLimits = FlatLimits{RSSFactor: 1.25, RSSSlack: 16 << 20, GoFactor: 1.2, GoSlack: 50, FDSlack: 20, MinSamples: 3}

// SoakWindows returns the warm-up and the length of the windows the
// flatness judgement compares for a soak of length d: the first window
// starts after the warm-up (Go's heap and the bucket store grow to their
// working set in the first minute), the last ends at d. Both are 1 minute
// and 5 minutes for runs of 16 minutes and more, scaled down for shorter
// runs so that the windows never overlap.
func SoakWindows(d time.Duration) (warm, window time.Duration) {
	warm = min(time.Minute, d/10)
	window = min(5*time.Minute, (d-warm)/3)
	return warm, window
}

// ProcFlat is the flatness verdict of one node: the medians of its
// samples in the first and in the last window.
type ProcFlat struct {
	Node string
	// Pids are the node's processes in the first and the last window;
	// they differ when the node was restarted (killed, or left and
	// joined again) in between, and only a node whose process spans both
	// windows is judged.
	FirstPid, LastPid         int
	Judged                    bool
	First, Last               ResourceSample // medians (At: the window's start)
	RSSOK, GoroutinesOK, FDOK bool
	Pass                      bool
}

// Flatness compares, for every node, the medians of its samples in
// [warm, warm+window) with those in [end-window, end]. A node is judged
// only when one process has at least lim.MinSamples samples in both; it
// fails when RSS, goroutines or open files (the last two without its
// HTTP connections) grew past lim. The result is sorted by node.
func Flatness(samples []ResourceSample, warm, window, end time.Duration, lim FlatLimits) []ProcFlat {
	byNode := make(map[string][]ResourceSample)
	for _, s := range samples {
		byNode[s.Node] = append(byNode[s.Node], s)
	}
	var out []ProcFlat
	for _, node := range sortedKeys(byNode) {
		ss := byNode[node]
		first := windowSamples(ss, warm, warm+window)
		last := windowSamples(ss, end-window, end+1)
		if len(first) == 0 || len(last) == 0 {
			continue
		}
		pf := ProcFlat{Node: node, FirstPid: first[0].Pid, LastPid: last[len(last)-1].Pid}
		pf.First, pf.Last = medianSample(first, warm), medianSample(last, end-window)
		pf.Judged = pf.FirstPid == pf.LastPid && samePid(first, pf.FirstPid) && samePid(last, pf.FirstPid) &&
			len(first) >= lim.MinSamples && len(last) >= lim.MinSamples
		if pf.Judged {
			pf.RSSOK = float64(pf.Last.RSS) <= float64(pf.First.RSS)*lim.RSSFactor+float64(lim.RSSSlack)
			pf.GoroutinesOK = pf.First.Goroutines >= 0 && pf.Last.Goroutines >= 0 &&
				float64(pf.Last.Goroutines-pf.Last.Conns) <= float64(pf.First.Goroutines-pf.First.Conns)*lim.GoFactor+float64(lim.GoSlack)
			pf.FDOK = pf.Last.FDs-pf.Last.Conns <= pf.First.FDs-pf.First.Conns+lim.FDSlack
			pf.Pass = pf.RSSOK && pf.GoroutinesOK && pf.FDOK
		}
		out = append(out, pf)
	}
	return out
}

// FlatFailures returns a failure line per judged node that grew past its
// limits, and one when no node was judged (nothing spanned the run).
func FlatFailures(fl []ProcFlat, lim FlatLimits) []string {
	var out []string
	judged := 0
	for _, f := range fl {
		if !f.Judged {
			continue
		}
		judged++
		if !f.RSSOK {
			out = append(out, fmt.Sprintf("leak: %s RSS %s -> %s (limit %s)", f.Node, mib(f.First.RSS), mib(f.Last.RSS),
				mib(int64(float64(f.First.RSS)*lim.RSSFactor)+lim.RSSSlack)))
		}
		if !f.GoroutinesOK {
			out = append(out, fmt.Sprintf("leak: %s goroutines %d -> %d without HTTP connections (%d -> %d with; limit %.0f)", f.Node,
				f.First.Goroutines-f.First.Conns, f.Last.Goroutines-f.Last.Conns, f.First.Goroutines, f.Last.Goroutines,
				float64(f.First.Goroutines-f.First.Conns)*lim.GoFactor+float64(lim.GoSlack)))
		}
		if !f.FDOK {
			out = append(out, fmt.Sprintf("leak: %s open files %d -> %d without HTTP connections (%d -> %d with; limit %d)", f.Node,
				f.First.FDs-f.First.Conns, f.Last.FDs-f.Last.Conns, f.First.FDs, f.Last.FDs, f.First.FDs-f.First.Conns+lim.FDSlack))
		}
	}
	if judged == 0 {
		out = append(out, "flatness: no node process spans both windows with enough samples (nothing judged)")
	}
	return out
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// windowSamples returns the samples of ss with At in [from, to).
func windowSamples(ss []ResourceSample, from, to time.Duration) []ResourceSample {
	var out []ResourceSample
	for _, s := range ss {
		if s.At >= from && s.At < to {
			out = append(out, s)
		}
	}
	return out
}

func samePid(ss []ResourceSample, pid int) bool {
	for _, s := range ss {
		if s.Pid != pid {
			return false
		}
	}
	return true
}

// medianSample is the median of each field of ss (the lower median of an
// even count), stamped at, with the pid of ss's last sample. Goroutines
// is -1 when no sample had it.
func medianSample(ss []ResourceSample, at time.Duration) ResourceSample {
	var rss []int64
	var fds, gs, conns []int
	for _, s := range ss {
		rss = append(rss, s.RSS)
		fds = append(fds, s.FDs)
		conns = append(conns, s.Conns)
		if s.Goroutines >= 0 {
			gs = append(gs, s.Goroutines)
		}
	}
	m := ResourceSample{At: at, Node: ss[0].Node, Pid: ss[len(ss)-1].Pid, RSS: median(rss), FDs: median(fds), Conns: median(conns), Goroutines: -1}
	if len(gs) > 0 {
		m.Goroutines = median(gs)
	}
	return m
}

func median[T int | int64](xs []T) T {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}
