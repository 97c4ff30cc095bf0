package rlqs

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/weir-rl/weir/api"
)

// envoyBucket is Envoy's rate_limit_quota bucket as its filter keeps it:
// a token bucket kept when the same strategy arrives while the assignment
// is in force, a new full one otherwise; whole-second times to live;
// nothing admitted without an assignment or after it expires.
type envoyBucket struct {
	kind    kind
	s       strategy
	tokens  float64
	last    time.Time
	expires time.Time
}

func (e *envoyBucket) apply(now time.Time, a assignment) {
	switch a.kind {
	case kindDeny:
		e.kind, e.expires = kindDeny, now.Add(a.ttl)
	case kindTokenBucket:
		same := e.kind == kindTokenBucket && now.Before(e.expires) && e.s.maxTokens == a.s.maxTokens && e.s.perFill == a.s.perFill
		if !same {
			e.tokens, e.last = float64(a.s.maxTokens), now
		}
		e.kind, e.s, e.expires = kindTokenBucket, a.s, now.Add(a.ttl)
	}
}

// admitAll admits every request the bucket allows at now (a proxy always
// over its quota) and returns how many.
func (e *envoyBucket) admitAll(now time.Time) int64 {
	if e.kind != kindTokenBucket || !now.Before(e.expires) {
		return 0
	}
	e.tokens = min(float64(e.s.maxTokens), e.tokens+e.s.rate()*now.Sub(e.last).Seconds())
	e.last = now
	n := int64(e.tokens)
	e.tokens -= float64(n)
	return n
}

// TestPlanNeverSpendsMoreThanHeld drives one bucket's plan with random
// answers (grants from nothing to what it asked, denials, TTLs from 1 to
// 20 s), random report intervals and demands, and an Envoy that receives
// each answer up to Margin late (in order) and admits everything its bucket allows.
// The allotment protocol's condition for the owner's bound
// (docs/architecture.md §13.1) must hold at every answer: what the proxy
// admitted since the previous ask plus the Unspent it reports is at most
// what the owner counted outstanding after the previous answer, and no
// assignment outlives the holding that pays for it.
func TestPlanNeverSpendsMoreThanHeld(t *testing.T) {
	p := params{margin: 500 * time.Millisecond, defaultTTL: 10 * time.Second}
	const step = 10 * time.Millisecond
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 7))
		start := time.Unix(1_000_000, 0)
		now := start
		b := &bucket{limit: "l", key: "k", since: now, lastBusy: now, fill: time.Second}
		env := &envoyBucket{}
		type pending struct {
			at time.Time
			a  assignment
		}
		var inflight []pending
		var held, admitted int64 // held: outstanding at the owner after the last answer
		var heldUntil time.Time
		for range 150 {
			interval := time.Duration(1+rng.IntN(300)) * step
			for end := now.Add(interval); now.Before(end); now = now.Add(step) {
				kept := inflight[:0]
				for _, f := range inflight {
					if f.at.After(now) {
						kept = append(kept, f)
						continue
					}
					env.apply(f.at, f.a)
					if f.a.kind == kindTokenBucket && env.expires.After(heldUntil) {
						t.Fatalf("seed %d: assignment until %v outlives its holding (%v)", seed, env.expires.Sub(start), heldUntil.Sub(start))
					}
				}
				inflight = kept
				admitted += env.admitAll(now)
			}
			b.observe(now, int64(rng.IntN(100)))
			if !b.due(now, p.margin, 100*time.Millisecond) {
				continue
			}
			demand := b.measure(now)
			tgt := b.target(demand, b.limitResp())
			keep := b.keeps(now, p.margin) && !better(tgt, b.last.s, tgt)
			s := tgt
			if keep {
				s = b.last.s
			}
			want := b.want(now, p, s, keep)
			unspent := b.unspent(now)
			if admitted+unspent > held {
				t.Fatalf("seed %d at %v: admitted %d since the last answer and Unspent %d, over the %d held", seed, now.Sub(start), admitted, unspent, held)
			}
			resp := api.AllotResponse{TTL: time.Duration(1+rng.IntN(20)) * time.Second, Capacity: 1000, Window: 100 * time.Second}
			switch rng.IntN(5) {
			case 0:
				resp.RetryAfter = time.Duration(1+rng.IntN(3000)) * time.Millisecond
			default:
				resp.Tokens = rng.Int64N(want + 1)
			}
			sent := now.Add(time.Duration(rng.IntN(50)) * time.Millisecond) // the ask's round trip
			held, admitted = unspent+resp.Tokens, 0
			heldUntil = now.Add(resp.TTL)
			a := b.fit(sent, now, held, resp, b.target(demand, resp), p)
			// Up to Margin late, and in order: a stream delivers in order.
			at := sent.Add(time.Duration(rng.Int64N(int64(p.margin) + 1)))
			if n := len(inflight); n > 0 && inflight[n-1].at.After(at) {
				at = inflight[n-1].at
			}
			inflight = append(inflight, pending{at: at, a: a})
			now = sent
		}
	}
}

// TestFitWholeSeconds: every token bucket sent has whole-second times to
// live and fill intervals (Envoy reads only the seconds), and a limit
// under one token a second gets a fill interval of the seconds a token
// takes.
func TestFitWholeSeconds(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	b := &bucket{since: now, lastBusy: now}
	resp := api.AllotResponse{Tokens: 50, TTL: 10 * time.Second, Capacity: 10, Window: time.Minute}
	b.fill = fillFor(resp)
	if b.fill != 6*time.Second {
		t.Fatalf("fill interval %v for 10/min, want 6s", b.fill)
	}
	a := b.fit(now.Add(123*time.Millisecond), now, 50, resp, b.target(1, resp), params{margin: 500 * time.Millisecond})
	if a.kind != kindTokenBucket || a.ttl%time.Second != 0 || a.s.fill%time.Second != 0 || a.s.perFill != 1 {
		t.Fatalf("assignment %+v: want a token bucket of 1 per 6 s, whole seconds", a)
	}
	if a.ttl != 9*time.Second {
		t.Fatalf("ttl %v, want 9s (10 s - 123 ms - 500 ms, rounded down)", a.ttl)
	}
}
