package resp

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

type budgetKey struct{}

// TestBudgetStartsNoTimerUntilDone: a budget that nothing waits on reports
// its deadline and expiry from the clock alone, passes values through,
// and starts no timer; the first Done after the deadline is closed.
func TestBudgetStartsNoTimerUntilDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		parent := context.WithValue(context.Background(), budgetKey{}, "v")
		c := withBudget(parent, time.Second)
		defer c.stop()
		if d, ok := c.Deadline(); !ok || !d.Equal(time.Now().Add(time.Second)) {
			t.Fatalf("Deadline %v, %v; want now+1s", d, ok)
		}
		if err := c.Err(); err != nil {
			t.Fatalf("Err before the deadline: %v", err)
		}
		if c.Value(budgetKey{}) != "v" {
			t.Fatal("the parent's value is lost")
		}
		time.Sleep(time.Second)
		if err := c.Err(); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Err at the deadline: %v", err)
		}
		if c.started.Load() != nil {
			t.Fatal("Deadline, Err and Value started a timer")
		}
		select {
		case <-c.Done():
		default:
			t.Fatal("Done after the deadline is open")
		}
	})
}

// TestBudgetDoneClosesAtDeadline: a caller that waits is woken exactly at
// the deadline, and a child context is cancelled with it.
func TestBudgetDoneClosesAtDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := withBudget(context.Background(), 50*time.Millisecond)
		defer c.stop()
		child, cancel := context.WithCancel(c)
		defer cancel()
		start := time.Now()
		<-child.Done()
		if waited := time.Since(start); waited != 50*time.Millisecond {
			t.Fatalf("woken after %v, want 50ms", waited)
		}
		if !errors.Is(c.Err(), context.DeadlineExceeded) || !errors.Is(child.Err(), context.DeadlineExceeded) {
			t.Fatalf("Err %v, child's %v; want deadline exceeded", c.Err(), child.Err())
		}
	})
}

// TestBudgetFollowsParent: the parent's earlier deadline and its
// cancellation show through, waited on or not.
func TestBudgetFollowsParent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		parent, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		defer cancel()
		c := withBudget(parent, time.Hour)
		defer c.stop()
		if d, _ := c.Deadline(); !d.Equal(time.Now().Add(10 * time.Millisecond)) {
			t.Fatalf("Deadline %v, want the parent's", d)
		}
		cancel()
		if !errors.Is(c.Err(), context.Canceled) {
			t.Fatalf("Err after the parent's cancel: %v", c.Err())
		}
		select {
		case <-c.Done():
		default:
			t.Fatal("Done open after the parent's cancel")
		}
	})
}

// TestBudgetStop: stop cancels, before and after a timer was started.
func TestBudgetStop(t *testing.T) {
	for _, wait := range []bool{false, true} {
		c := withBudget(context.Background(), time.Hour)
		if wait {
			_ = c.Done()
		}
		c.stop()
		if !errors.Is(c.Err(), context.Canceled) {
			t.Fatalf("waited %v: Err after stop %v, want canceled", wait, c.Err())
		}
		select {
		case <-c.Done():
		default:
			t.Fatalf("waited %v: Done open after stop", wait)
		}
	}
}

// BenchmarkBudget is a take's deadline that nothing waits on: the lazy
// budget against context.WithTimeout, each read once as the engine does.
func BenchmarkBudget(b *testing.B) {
	parent := context.Background()
	b.Run("lazy", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			c := withBudget(parent, time.Second)
			if c.Err() != nil {
				b.Fatal(c.Err())
			}
			c.stop()
		}
	})
	b.Run("WithTimeout", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			c, cancel := context.WithTimeout(parent, time.Second)
			if c.Err() != nil {
				b.Fatal(c.Err())
			}
			cancel()
		}
	})
}
