package placement

import (
	"time"

	"github.com/weir-rl/weir/ring"
)

// This file holds the rules that follow failures: the failure log
// (Observe), the takeover delay (heldBack, quietSince), taken-over keys
// (takenOver) and the lease ceiling.

// takenOver reports whether hk, which this node owns, was owned by a
// member whose failure is still remembered.
func (s *Snapshot) takenOver(hk uint64) bool {
	for _, f := range s.st.Failures {
		if m, ok := f.Prev.OwnerSum(hk); ok && m.Name == f.Name {
			return true
		}
	}
	return false
}

// LeaseCeiling reports whether (limit, key) is inside the takeover window
// of a failure of its owner, with maxTTL the limit's max_lease_ttl, and
// how long the window still lasts. Inside it the new owner cannot know
// which of the dead owner's leases still run, so it grants only up to a
// local share (none for strict limits). current reports whether this node
// holds a replica of the failed member's leases that was current when the
// failure was noticed at (its replication stream had not gone quiet); such
// a failure opens no window, because the replica names the leases that
// still run. A nil current opens every window.
func (s *Snapshot) LeaseCeiling(now time.Time, limit, key string, maxTTL time.Duration, current func(failed string, at time.Time) bool) (time.Duration, bool) {
	hk := ring.KeySum(limit, key)
	for _, f := range s.st.Failures {
		left := f.At.Add(maxTTL).Sub(now)
		if left <= 0 || (current != nil && current(f.Name, f.At)) {
			continue
		}
		if m, ok := f.Prev.OwnerSum(hk); ok && m.Name == f.Name {
			return left, true
		}
	}
	return 0, false
}

// heldBack reports whether hk, which this node owns, changed owner in a
// run of failures that is less than the delay old at now. An isolated
// node sees its peers fail one at a time and would otherwise believe
// itself a majority in between; failures less than the delay apart form
// one run, timed from its latest (see quietSince).
func (s *Snapshot) heldBack(now time.Time, hk uint64) bool {
	fs := s.st.Failures
	from := quietSince(fs, now, s.delay)
	for _, f := range fs {
		if f.At.Before(from) {
			continue
		}
		if m, ok := f.Prev.OwnerSum(hk); ok && m.Name != s.cfg.Self {
			return true
		}
	}
	return false
}

// quietSince returns the start of the run of failures still holding
// takeovers back at now: failures detected less than delay apart form one
// run, and a run holds back every key whose owner it changed until delay
// after its latest failure. Failures at or after the returned time count;
// none count when the latest is delay old. fs must be in detection order.
func quietSince(fs []Failure, now time.Time, delay time.Duration) time.Time {
	if len(fs) == 0 || now.Sub(fs[len(fs)-1].At) >= delay {
		return now.Add(time.Nanosecond)
	}
	from := fs[len(fs)-1].At
	for k := len(fs) - 2; k >= 0 && from.Sub(fs[k].At) < delay; k-- {
		from = fs[k].At
	}
	return from
}

// Observe returns the failure log after this node moved from view prev to
// view next at now: fs without the failures older than memory, plus every
// member live in prev and dead in next. A nil prev records nothing (the
// first view). fs is not modified.
func Observe(fs []Failure, prev, next *ring.View, now time.Time, memory time.Duration) []Failure {
	var keep []Failure
	for _, f := range fs {
		if now.Sub(f.At) < memory {
			keep = append(keep, f)
		}
	}
	if prev != nil && next != nil {
		for _, m := range next.Members {
			if m.State != ring.Dead {
				continue
			}
			if old, ok := prev.Member(m.Name); ok && old.State.Live() {
				keep = append(keep, Failure{Name: m.Name, At: now, Prev: prev})
			}
		}
	}
	return keep
}
