package gossip

import (
	"context"
	"crypto/sha256"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/weir-rl/weir/ring"
)

// TestWrongKeyJoinerSaysWhy: a member whose gossip key differs from the
// cluster's (another key, or none) never joins; within a few seconds it
// logs, at warn, that no member accepted its gossip and that its secret
// differs, naming where the secret comes from (Config.KeyHint), and it
// repeats the line at most once per joinFailLogEvery however many rounds
// fail.
func TestWrongKeyJoinerSaysWhy(t *testing.T) {
	seedKey, otherKey := sha256.Sum256([]byte("the cluster's secret")), sha256.Sum256([]byte("another secret"))
	seedCfg := LocalConfig()
	seedCfg.Name = "seed"
	seedCfg.GossipKey = seedKey[:]
	seed, err := New(seedCfg, ring.Meta{GRPCAddr: "127.0.0.1:9000"})
	if err != nil {
		t.Fatal(err)
	}
	if err := seed.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer seed.Close()
	var seedAddr string
	waitFor(t, "the seed's address", func() bool {
		m, _ := seed.View().Member("seed")
		seedAddr = m.Addr
		return seedAddr != ""
	})
	for _, tc := range []struct {
		name string
		key  []byte
	}{{"another key", otherKey[:]}, {"no key", nil}} {
		t.Run(tc.name, func(t *testing.T) {
			var logs lockedBuffer
			cfg := LocalConfig()
			cfg.Name = "stranger"
			cfg.GossipKey = tc.key
			cfg.Join = []string{seedAddr}
			cfg.KeyHint = "--cluster-secret-file (WEIR_CLUSTER_SECRET_FILE)"
			cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
			stranger, err := New(cfg, ring.Meta{GRPCAddr: "127.0.0.1:9001"})
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			if err := stranger.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			defer stranger.Close()
			const want = "no member accepted this node's gossip"
			if took := waitFor(t, "the joiner's warning", func() bool { return strings.Contains(logs.String(), want) }); took > 5*time.Second {
				t.Fatalf("the warning took %v", took)
			}
			line := lineWith(logs.String(), want)
			for _, s := range []string{"level=WARN", "the cluster secret differs", "--cluster-secret-file (WEIR_CLUSTER_SECRET_FILE)", seedAddr} {
				if !strings.Contains(line, s) {
					t.Fatalf("the warning does not say %q:\n%s", s, line)
				}
			}
			if stranger.Joined() {
				t.Fatal("a member with another key joined")
			}
			// More rounds fail (RejoinInterval/4 apart while not joined):
			// the line is not repeated within joinFailLogEvery.
			rounds := stranger.rounds.Load()
			waitFor(t, "three more failed rounds", func() bool { return stranger.rounds.Load() >= rounds+3 })
			if time.Since(start) < joinFailLogEvery {
				if n := strings.Count(logs.String(), want); n != 1 {
					t.Fatalf("%d failed rounds logged %d lines within %v, want 1:\n%s", stranger.rounds.Load(), n, joinFailLogEvery, logs.String())
				}
			}
		})
	}
}

// TestUnreachableSeedBlamesTheSeeds: when no seed takes the connection
// (nothing listens), the warning says so and does not blame the secret.
func TestUnreachableSeedBlamesTheSeeds(t *testing.T) {
	line := joinWarning(t, "127.0.0.1:1") // nothing listens on port 1
	for _, s := range []string{"no seed accepted a connection", "check the seeds (--join)", "127.0.0.1:1"} {
		if !strings.Contains(line, s) {
			t.Fatalf("the warning does not say %q:\n%s", s, line)
		}
	}
	if strings.Contains(line, "cluster secret") {
		t.Fatalf("the warning blames the secret for a seed that took no connection:\n%s", line)
	}
}

// TestSilentSeedBlamesSecretOrNetwork: a seed that takes the connection
// and closes it without an answer (what a member that cannot decrypt the
// join does) makes the warning name the secret as the likely cause, and
// the seeds and network as the other.
func TestSilentSeedBlamesSecretOrNetwork(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	line := joinWarning(t, ln.Addr().String())
	for _, s := range []string{"the likely cause is a cluster secret", "the gossip key", "check the seeds (--join)", ln.Addr().String()} {
		if !strings.Contains(line, s) {
			t.Fatalf("the warning does not say %q:\n%s", s, line)
		}
	}
}

// joinWarning starts a member joining seed alone and returns its first
// "cannot join" warning.
func joinWarning(t *testing.T, seed string) string {
	t.Helper()
	var logs lockedBuffer
	cfg := LocalConfig()
	cfg.Name = "alone"
	cfg.Join = []string{seed}
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	m, err := New(cfg, ring.Meta{GRPCAddr: "127.0.0.1:9002"})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	waitFor(t, "the warning", func() bool { return strings.Contains(logs.String(), "no member accepted") })
	return lineWith(logs.String(), "no member accepted")
}

// lineWith returns the first line of s that contains sub.
func lineWith(s, sub string) string {
	for l := range strings.Lines(s) {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}
