// Package jepsen is Weir's fault-injection harness: real `weir serve`
// processes in Linux network namespaces, nemeses that kill, pause, isolate,
// split and degrade them, paced clients that record every operation, and
// checkers that turn the recorded history into numbers the README can cite.
//
// # Layout
//
// The pure, unit-tested core needs neither root nor a cluster:
//
//   - history.go: Op, one recorded request with its call and return times on
//     one monotonic base, and the JSONL encoding of a history;
//   - checker.go: the over-admission checker (Excess): the largest excess of
//     definitely admitted cost over an ideal token bucket, over every window;
//   - bound.go: the design bound of each fault (Bound), from docs/architecture.md §6,
//     and the fallback allowance of local ceilings;
//   - avail.go: availability and latency per phase;
//   - allot_check.go: allotments (CheckAllot): for a limit with allotments,
//     excess with no allowance (and without local ceilings' grants, which
//     a fault's bound allows), utilisation of B + r·T and locality
//     (answers from allotments, forwards), and the hot-key workload
//     (AllotScenario);
//   - lease_check.go: the lease checker (CheckLeases): leases surely held
//     at once per key and phase against LeaseBound, reclamation of leases
//     whose holder died (Leaks), and fencing order;
//   - linear.go: per bucket instance linearizability with porcupine
//     (CheckLinear), from the evidence every take asks for;
//   - report.go: the one-screen summary table;
//   - html.go: the self-contained HTML report (WriteHTML);
//   - soak_judge.go, soak_check.go: the soak's fault schedule
//     (SoakSchedule), the flatness judgement of its resource samples
//     (Flatness) and its per-step excess bounds (CheckSoakBuckets);
//   - soak_load.go: the soak's bulk load through a load balancer
//     (Balancer, BulkLoad) and its answer counts (ClassifyTake, Answers);
//   - soak_report.go: the soak's summary (WriteSoakSummary).
//
// The shell needs root, iproute2 and iptables and is only exercised by the
// runner (jepsen/cmd/jepsen) and by tests gated on WEIR_JEPSEN=1:
//
//   - nodes.go: Nodes, the cluster as a scenario drives it, and Prober;
//   - netns.go: a bridge and N namespaces with veth pairs (Net), and the
//     iptables rules nemeses use (silent DROPs, one-way cuts, random loss);
//   - cluster.go: N weir processes started with `ip netns exec` (Cluster);
//   - compose.go: the deploy/ docker compose cluster (Compose);
//   - nemesis.go: faults with Inject and Heal;
//   - client.go: the recording, paced clients;
//   - lease_client.go: the recording lease holders;
//   - scenario.go: one run: start, warm up, before, fault, after, check;
//   - soak.go, soak_sample.go: the soak (RunSoak, make soak): three nodes
//     for half an hour under load, a join, a leave or a kill every few
//     minutes, each node's RSS, goroutines and open files sampled from
//     /proc and /metrics.
//
// # The over-admission checker
//
// Clients run in one process and time every request with time.Since on one
// base, so a request took effect somewhere inside [Call, Return]. For a
// window [t1, t2] the checker counts only the allowed requests that surely
// fell inside it (t1 <= Call and Return <= t2), like Jepsen's counter
// checker counts only acknowledged increments for its lower bound. An ideal
// token bucket of capacity B and rate r admits at most B + r*(t2-t1) over
// any window, whatever its state at t1 (docs/architecture.md §11), so
//
//	excess = max over windows of (surely admitted cost - B - r*(t2-t1))
//
// is a lower bound on the true over-admission: it never reports a violation
// that did not happen. Timeouts and errors are indeterminate; they are not
// counted (they could only raise the true figure) and are reported as the
// width of the upper bound.
//
// # Bounds
//
// A fault's bound (Bound, FallbackAllowance) is B per change of a key's
// owner that may lose the bucket (the design's count per fault is in
// FaultBound); for a crash (kill), whose successor starts the key from its
// replica, instead the debits the crashed owner answered in the LostWindow
// before the crash (LostDebits); plus what local ceilings admit by
// construction: each node
// that answered the key from fallback holds one share, max(1, floor(B/N)),
// refilled at r/N over the span of its fallback decisions, taken from the
// history. Before the fault, the bucket's own decisions (owner and
// allotment: a holder spends tokens its owner debited first) must be exact
// together. A limit's allotments add nothing to a bound: a holder that dies
// or is cut off strands at most its allotment (AllotBoundNote). A run
// fails when a key's measured excess exceeds its bound.
package jepsen
