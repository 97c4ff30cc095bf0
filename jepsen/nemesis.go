package jepsen

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Nemesis injects one fault into Targets (1-based node indexes) and heals
// it. It is a value; Inject and Heal are called once each, in that order.
type Nemesis struct {
	Fault   Fault
	Targets []int
	Loss    float64 // packet loss probability for Fault Loss
	// Order is the ring order of Fault Ring and the replacement order of
	// Fault Upgrade (every node, shuffled).
	Order []int
}

// RingDeaf returns, for a majorities ring over order, the nodes each node
// (by number) drops packets from: all but the majority nearest it on the
// ring. With an odd majority m the window is centred on the node; with an
// even one it is the node and the m-1 after it, so with 3 nodes each node
// hears itself and its successor only.
func RingDeaf(order []int) map[int][]int {
	n := len(order)
	m := n/2 + 1
	lo := -(m - 1) / 2
	if m%2 == 0 {
		lo = 0
	}
	out := make(map[int][]int, n)
	for p, node := range order {
		hears := make(map[int]bool, m)
		for d := lo; d < lo+m; d++ {
			hears[order[((p+d)%n+n)%n]] = true
		}
		for _, other := range order {
			if !hears[other] {
				out[node] = append(out[node], other)
			}
		}
	}
	return out
}

func (nm Nemesis) String() string {
	names := make([]string, len(nm.Targets))
	for i, t := range nm.Targets {
		names[i] = Name(t)
	}
	return fmt.Sprintf("%s %v", nm.Fault, names)
}

// others returns the nodes of 1..n not in Targets.
func (nm Nemesis) others(n int) []int {
	var out []int
	for i := 1; i <= n; i++ {
		if !slices.Contains(nm.Targets, i) {
			out = append(out, i)
		}
	}
	return out
}

// Inject starts the fault.
func (nm Nemesis) Inject(ctx context.Context, c Nodes) error {
	var errs []error
	for _, t := range nm.Targets {
		switch nm.Fault {
		case Kill:
			errs = append(errs, c.Kill(t))
		case Pause:
			errs = append(errs, c.Pause(t))
		case Leave:
			errs = append(errs, c.Stop(t, 10*time.Second))
		case Skew:
			errs = append(errs, restartWithOffset(c, t, 30*time.Second))
		case Isolate, LongPartition, Split:
			errs = append(errs, c.Block(ctx, t, nm.others(c.N())))
		case Ring:
			errs = append(errs, c.Deafen(ctx, t, RingDeaf(nm.Order)[t]))
		case Loss:
			errs = append(errs, c.Loss(ctx, t, nm.others(c.N()), nm.Loss))
		case None:
		default:
			return fmt.Errorf("jepsen: unknown fault %q", nm.Fault)
		}
	}
	return errors.Join(errs...)
}

// Heal ends the fault: restarts a killed or stopped node, resumes a paused
// one, removes the iptables rules.
func (nm Nemesis) Heal(ctx context.Context, c Nodes) error {
	var errs []error
	for _, t := range nm.Targets {
		switch nm.Fault {
		case Kill, Leave:
			errs = append(errs, c.Start(t))
		case Pause:
			errs = append(errs, c.Resume(t))
		case Skew:
			errs = append(errs, restartWithOffset(c, t, 0))
		case Isolate, LongPartition, Split, Loss, Ring:
			errs = append(errs, c.Heal(ctx, t))
		}
	}
	return errors.Join(errs...)
}

// restartWithOffset stops node i gracefully (it hands its buckets over) and
// starts it again with its decision clock shifted by d.
func restartWithOffset(c Nodes, i int, d time.Duration) error {
	if err := c.SetClockOffset(i, d); err != nil {
		return err
	}
	if err := c.Stop(i, 10*time.Second); err != nil {
		return err
	}
	return c.Start(i)
}
