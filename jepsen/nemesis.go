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
		case Isolate, LongPartition, Split, Loss:
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
