package jepsen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// converged is how the cluster's convergence after the heal ended: the
// instant (on the recorder's base) it converged and how long after the
// heal, or the error of not converging in time. The zero value is a run
// without a fault.
type converged struct {
	at    int64
	after time.Duration
	err   error
}

// playFault lets the traffic run for Before and, unless the fault is None,
// injects the fault, holds it for During, heals it, starts watching for
// convergence and lets the traffic run for After. It returns the inject
// and heal-start instants (0 without a fault) and a channel that yields how
// convergence ended, once; its error is a cancelled ctx or a fault that
// could not be injected or healed.
func (r *scenarioRun) playFault(ctx context.Context) (tInject, tHeal int64, convDone <-chan converged, err error) {
	done := make(chan converged, 1)
	if err := sleepCtx(ctx, r.sc.Before); err != nil {
		return 0, 0, nil, err
	}
	if r.sc.Fault == None {
		done <- converged{}
		return 0, 0, done, nil
	}
	tInject = r.rec.Event("inject", r.nm.String())
	inject := r.nm.Inject
	if r.sc.Fault == Upgrade {
		inject = r.rollingUpgrade
	}
	if err := inject(ctx, r.c); err != nil {
		return 0, 0, nil, err
	}
	if err := sleepCtx(ctx, r.sc.During); err != nil {
		return 0, 0, nil, err
	}
	tHeal = r.rec.Event("heal-start", r.nm.String())
	if err := r.nm.Heal(ctx, r.c); err != nil {
		return 0, 0, nil, err
	}
	r.rec.Event("heal", r.nm.String())
	go r.watchConvergence(ctx, done)
	if err := sleepCtx(ctx, r.sc.After); err != nil {
		return 0, 0, nil, err
	}
	return tInject, tHeal, done, nil
}

// rollingUpgrade replaces the targets one at a time, in their shuffled
// order: each leaves gracefully and starts again from the new binary, and
// the next goes only once every node agrees on the members again (within
// 30 s each), as an operator's rollout waits for readiness.
func (r *scenarioRun) rollingUpgrade(ctx context.Context, c Nodes) error {
	for _, t := range r.nm.Order {
		r.rec.Event("upgrade", Name(t))
		if err := c.Upgrade(t); err != nil {
			return err
		}
		if err := c.Stop(t, 10*time.Second); err != nil {
			return err
		}
		if err := c.Start(t); err != nil {
			return err
		}
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, err := r.pr.WaitConverged(wctx, r.all, r.names, nil)
		cancel()
		if err != nil {
			return fmt.Errorf("jepsen: after upgrading %s: %w", Name(t), err)
		}
	}
	return nil
}

// watchConvergence waits, for at most ConvergeWithin, until every node
// agrees on the members and the sample owners, records the "converged"
// event when they do, and sends the outcome on done (Run copies it into
// the result: this goroutine may outlive a cancelled Run).
func (r *scenarioRun) watchConvergence(ctx context.Context, done chan<- converged) {
	cvctx, cancel := context.WithTimeout(ctx, r.sc.ConvergeWithin)
	defer cancel()
	d, err := r.pr.WaitConverged(cvctx, r.all, r.names, r.samples)
	var at int64
	if err == nil {
		at = r.rec.Event("converged", d.String())
	}
	done <- converged{at, d, err}
}

// sleepCtx waits for d, or returns ctx's error if it ends first.
func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
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
