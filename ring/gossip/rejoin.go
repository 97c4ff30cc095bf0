package gossip

import (
	"context"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// maxJoinsInFlight bounds the concurrent joins of one rejoin round. Joins
// run in parallel so that unreachable targets (each hanging up to
// Timing.TCPTimeout) do not delay the reachable ones.
const maxJoinsInFlight = 8

// rejoinLoop heals partitions that memberlist does not heal itself: it
// forgets dead members after GossipToTheDeadTime and never contacts them
// again (memberlist issue 222, metallb 589). Every round it joins the known
// failed members and the seeds that are not live members (seeds re-resolved
// each time), then sleeps a jittered RejoinInterval, or a quarter of it while
// this member is alone or has not joined yet. It stops after Leave.
func (r *Membership) rejoinLoop(ctx context.Context, ml *memberlist.Memberlist) {
	defer r.wg.Done()
	timer := time.NewTimer(0)
	defer timer.Stop()
	first := true
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		if !r.left.Load() {
			r.rejoinRound(ctx, ml)
		}
		r.rounds.Add(1)
		if first {
			first = false
			close(r.firstCh)
		}
		timer.Reset(r.nextRejoin())
	}
}

// nextRejoin returns the jittered delay before the next round.
func (r *Membership) nextRejoin() time.Duration {
	d := r.cfg.RejoinInterval
	r.mu.Lock()
	alone := r.tbl.liveCount() <= 1 && (len(r.cfg.Join) > 0 || len(r.tbl.members) > 1)
	r.mu.Unlock()
	if alone || !r.joined.Load() {
		d /= 4
	}
	return time.Duration(float64(d) * (0.75 + 0.5*rand.Float64()))
}

// rejoinRound runs one round of joins and records success in joined.
func (r *Membership) rejoinRound(ctx context.Context, ml *memberlist.Memberlist) {
	seeds, resolvedAll := r.resolveSeeds(ctx)
	r.mu.Lock()
	self := r.tbl.selfAddr()
	targets := r.tbl.rejoinTargets(seeds)
	r.mu.Unlock()
	others := 0
	for _, s := range seeds {
		if s != self {
			others++
		}
	}
	if resolvedAll && others == 0 {
		r.joined.Store(true) // the only seeds are this member: nothing to reach
	}
	if len(targets) == 0 {
		return
	}
	var wg sync.WaitGroup
	var failMu sync.Mutex
	var failures []string // "target: err" of the joins that failed
	sem := make(chan struct{}, maxJoinsInFlight)
	for _, t := range targets {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			return
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if ctx.Err() != nil {
				return
			}
			n, err := ml.Join([]string{t})
			if n > 0 {
				r.joined.Store(true)
				r.log.Debug("gossip: rejoined", "target", t)
				return
			}
			r.log.Debug("gossip: rejoin failed", "target", t, "err", err)
			failMu.Lock()
			failures = append(failures, t+": "+errText(err))
			failMu.Unlock()
		}()
	}
	wg.Wait()
	if !r.joined.Load() && len(failures) == len(targets) {
		r.noteJoinFailed(failures)
	}
}

// joinFailLogEvery is the shortest interval between two log lines saying
// that this member cannot join.
const joinFailLogEvery = 10 * time.Second

// noteJoinFailed logs, at most once per joinFailLogEvery, that a round of
// joins by a member that has never joined failed at every target. When no
// target even took the connection, it says so (the seeds are down or
// unreachable). Otherwise the likely cause is a gossip key that differs
// from theirs: a member that cannot decrypt a join closes the stream
// without an answer (and logs a decrypt failure on its side), which is
// all the joiner sees. The line says so, naming Config.KeyHint.
func (r *Membership) noteJoinFailed(failures []string) {
	log, suppressed := r.joinFail.note(time.Now())
	if !log {
		return
	}
	slices.Sort(failures)
	cause := "the likely cause is a cluster secret that differs from the members' (check " + r.cfg.keyHint() +
		" on this node and on the seeds, which log decrypt failures); otherwise check the seeds (--join) and " +
		"that their gossip port is reachable"
	switch {
	case slices.ContainsFunc(failures, isKeyMismatch):
		cause = "a seed's answer does not decrypt with this node's key: the cluster secret differs from the " +
			"members' (check " + r.cfg.keyHint() + " on this node and on the seeds)"
	case !slices.ContainsFunc(failures, func(f string) bool { return !isUnreachable(f) }):
		// Not one seed took the connection: nothing to blame on the
		// secret (at a cluster's cold start, the seeds are not up yet).
		cause = "no seed accepted a connection (not started yet, or the network drops it); check the seeds (--join) " +
			"and that their gossip port is reachable"
	}
	r.log.Warn("gossip: cannot join: no member accepted this node's gossip; "+cause+". Retrying; logged at most every 10s",
		"seeds", r.cfg.Join, "failures", failures, "suppressed_since_last", suppressed,
		"gossip_encrypted", len(r.cfg.GossipKey) > 0)
}

// isKeyMismatch reports whether a failed join's text says that the two
// ends do not share a gossip key (memberlist: "no installed keys could
// decrypt the message", "encryption is not configured", "not
// encrypted").
func isKeyMismatch(failure string) bool {
	return strings.Contains(failure, "decrypt") || strings.Contains(failure, "encrypt")
}

// isUnreachable reports whether a failed join never reached its target:
// its name did not resolve ("lookup ...") or the connection itself failed
// (memberlist's "dial tcp ...: connect: connection refused", "no route to
// host", a dial timeout), so the target cannot have refused this node's
// key.
func isUnreachable(failure string) bool {
	return strings.Contains(failure, "dial tcp") || strings.Contains(failure, "lookup ")
}

// errText is err's text on one line, or "no answer" for nil (memberlist
// joined no member without an error).
func errText(err error) string {
	if err == nil {
		return "no answer"
	}
	return strings.Join(strings.Fields(err.Error()), " ")
}

// resolveSeeds returns the seeds as host:port addresses, resolving DNS
// names now (so a name that tracks the cluster is followed). resolvedAll is
// false if some name failed to resolve.
func (r *Membership) resolveSeeds(ctx context.Context) (addrs []string, resolvedAll bool) {
	resolvedAll = true
	for _, s := range r.cfg.Join {
		host, port, err := splitSeed(s, r.cfg.BindPort)
		if err != nil {
			r.log.Warn("gossip: bad seed", "seed", s, "err", err)
			resolvedAll = false
			continue
		}
		if ip, err := netip.ParseAddr(host); err == nil {
			addrs = append(addrs, net.JoinHostPort(ip.Unmap().String(), port))
			continue
		}
		lctx, cancel := context.WithTimeout(ctx, r.cfg.Timing.TCPTimeout)
		ips, err := net.DefaultResolver.LookupHost(lctx, host)
		cancel()
		if err != nil {
			r.log.Debug("gossip: seed lookup failed", "seed", s, "err", err)
			resolvedAll = false
			continue
		}
		for _, ip := range ips {
			if a, err := netip.ParseAddr(ip); err == nil {
				ip = a.Unmap().String()
			}
			addrs = append(addrs, net.JoinHostPort(ip, port))
		}
	}
	return addrs, resolvedAll
}

// splitSeed splits "host:port" or "host" (defaultPort).
func splitSeed(s string, defaultPort int) (host, port string, err error) {
	if h, p, err := net.SplitHostPort(s); err == nil {
		return h, p, nil
	}
	if _, err := netip.ParseAddr(s); err == nil || !strings.Contains(s, ":") {
		return s, strconv.Itoa(defaultPort), nil
	}
	_, _, err = net.SplitHostPort(s)
	return "", "", err
}
