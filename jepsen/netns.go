package jepsen

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// Net is a bridge and N network namespaces on 10.77.0.0/24 (Subnet). The bridge
// lives in its own namespace Prefix+"0" (the "switch"), whose empty
// netfilter forwards everything, so the host's iptables (a FORWARD policy
// of DROP, br_netfilter) never sees node-to-node traffic and is left
// untouched. The runner (root namespace) is 10.77.0.1 on veth Prefix+"h",
// plugged into the bridge; node i (1-based) is 10.77.0.(10+i) on eth0 in
// namespace Prefix+i. Every name starts with Prefix, so leftovers of a
// crashed run can be found and removed.
//
// Net shells out to ip(8) and iptables(8) and needs root.
type Net struct {
	Prefix string // e.g. "wj"; at most 8 characters
	N      int
	// Subnet is the first three octets with a trailing dot; "" means
	// "10.77.0.". Two Nets set up at once need different subnets.
	Subnet string
}

func (nw *Net) subnet() string {
	if nw.Subnet == "" {
		return "10.77.0."
	}
	return nw.Subnet
}

// Switch is the namespace holding the bridge.
func (nw *Net) Switch() string { return nw.Prefix + "0" }

// hostVeth is the runner's end of its link to the bridge.
func (nw *Net) hostVeth() string { return nw.Prefix + "h" }

// NS is node i's namespace (i from 1).
func (nw *Net) NS(i int) string { return nw.Prefix + strconv.Itoa(i) }

// IP is node i's address (i from 1).
func (nw *Net) IP(i int) string { return nw.subnet() + strconv.Itoa(10+i) }

// HostIP is the runner's address on the bridge.
func (nw *Net) HostIP() string { return nw.subnet() + "1" }

func run(ctx context.Context, name string, args ...string) error {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("jepsen: %s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Setup removes leftovers with this prefix and creates the switch with its
// bridge, the runner's link and the nodes' namespaces and veth pairs.
func (nw *Net) Setup(ctx context.Context) error {
	if nw.Prefix == "" || len(nw.Prefix) > 8 || nw.N < 1 || nw.N > 200 {
		return errors.New("jepsen: Net needs a prefix of 1-8 characters and 1-200 nodes")
	}
	nw.Cleanup(ctx)
	sw, h := nw.Switch(), nw.hostVeth()
	steps := [][]string{
		{"netns", "add", sw},
		{"-n", sw, "link", "set", "lo", "up"},
		{"-n", sw, "link", "add", "br0", "type", "bridge"},
		{"-n", sw, "link", "set", "br0", "up"},
		{"link", "add", h, "type", "veth", "peer", "name", "up0", "netns", sw},
		{"-n", sw, "link", "set", "up0", "master", "br0", "up"},
		{"addr", "add", nw.HostIP() + "/24", "dev", h},
		{"link", "set", h, "up"},
	}
	for i := 1; i <= nw.N; i++ {
		ns, veth := nw.NS(i), "v"+strconv.Itoa(i)
		steps = append(steps,
			[]string{"netns", "add", ns},
			[]string{"-n", sw, "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns},
			[]string{"-n", sw, "link", "set", veth, "master", "br0", "up"},
			[]string{"-n", ns, "addr", "add", nw.IP(i) + "/24", "dev", "eth0"},
			[]string{"-n", ns, "link", "set", "eth0", "up"},
			[]string{"-n", ns, "link", "set", "lo", "up"},
		)
	}
	for _, s := range steps {
		if err := run(ctx, "ip", s...); err != nil {
			nw.Cleanup(context.WithoutCancel(ctx))
			return err
		}
	}
	return nil
}

// Cleanup kills the processes left in this prefix's namespaces (by the pids
// `ip netns pids` lists), deletes the runner's veth and the namespaces
// (which takes their veths and the bridge with them). It is idempotent and
// ignores what does not exist.
func (nw *Net) Cleanup(ctx context.Context) {
	ctx = context.WithoutCancel(ctx)
	_ = exec.CommandContext(ctx, "ip", "link", "del", nw.hostVeth()).Run()
	out, _ := exec.CommandContext(ctx, "ip", "netns", "list").Output()
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || !nw.owns(f[0]) {
			continue
		}
		pids, _ := exec.CommandContext(ctx, "ip", "netns", "pids", f[0]).Output()
		for _, p := range strings.Fields(string(pids)) {
			if pid, err := strconv.Atoi(p); err == nil && pid > 1 {
				_ = syscall.Kill(pid, syscall.SIGCONT)
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		_ = run(ctx, "ip", "netns", "del", f[0])
	}
}

// owns reports whether a namespace name is Prefix followed by digits.
func (nw *Net) owns(ns string) bool {
	return strings.HasPrefix(ns, nw.Prefix) && isDigits(ns[len(nw.Prefix):])
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func (nw *Net) ipt(ctx context.Context, i int, args ...string) error {
	return run(ctx, "ip", append([]string{"netns", "exec", nw.NS(i), "iptables", "-w"}, args...)...)
}

// Block silently drops all traffic between node i and each of peers, inside
// i's namespace (INPUT from and OUTPUT to their addresses). The runner's
// address is untouched, so clients still reach node i.
func (nw *Net) Block(ctx context.Context, i int, peers []int) error {
	return nw.apply(ctx, i, cutRules(nw.IP, peers, nil, false))
}

// Loss drops each packet between node i and each of peers with probability
// p, in both directions (iptables statistic match).
func (nw *Net) Loss(ctx context.Context, i int, peers []int, p float64) error {
	return nw.apply(ctx, i, cutRules(nw.IP, peers, lossMatch(p), false))
}

// Deafen drops, inside node i's namespace, every packet from each of from;
// what i sends still goes out. A one-way cut.
func (nw *Net) Deafen(ctx context.Context, i int, from []int) error {
	return nw.apply(ctx, i, cutRules(nw.IP, from, nil, true))
}

// apply runs each rule with iptables in node i's namespace, stopping at the
// first error.
func (nw *Net) apply(ctx context.Context, i int, rules [][]string) error {
	for _, r := range rules {
		if err := nw.ipt(ctx, i, r...); err != nil {
			return err
		}
	}
	return nil
}

// cutRules returns the iptables arguments (after `iptables -w`) that drop
// traffic between a node and each of peers, whose addresses ip gives, with
// the extra match (nil: every packet): INPUT from and OUTPUT to each peer,
// or with oneWay only INPUT.
func cutRules(ip func(int) string, peers []int, match []string, oneWay bool) [][]string {
	var rules [][]string
	for _, p := range peers {
		rules = append(rules, slices.Concat([]string{"-A", "INPUT", "-s", ip(p)}, match, []string{"-j", "DROP"}))
		if !oneWay {
			rules = append(rules, slices.Concat([]string{"-A", "OUTPUT", "-d", ip(p)}, match, []string{"-j", "DROP"}))
		}
	}
	return rules
}

// lossMatch is the iptables match of random loss with probability p.
func lossMatch(p float64) []string {
	return []string{"-m", "statistic", "--mode", "random", "--probability", strconv.FormatFloat(p, 'f', 3, 64)}
}

// healRules flush what cutRules added.
var healRules = [][]string{{"-F", "INPUT"}, {"-F", "OUTPUT"}}

// Heal removes every rule Block, Deafen and Loss added in node i's namespace.
func (nw *Net) Heal(ctx context.Context, i int) error {
	var errs []error
	for _, r := range healRules {
		errs = append(errs, nw.ipt(ctx, i, r...))
	}
	return errors.Join(errs...)
}
