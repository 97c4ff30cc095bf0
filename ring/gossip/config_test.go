package gossip

import (
	"testing"

	"github.com/weir-rl/weir/ring"
)

func TestConfigValidate(t *testing.T) {
	ok := DefaultConfig()
	ok.Name = "a"
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	lc := LocalConfig()
	lc.Name = "a"
	if err := lc.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(*Config){
		"no name":         func(c *Config) { c.Name = "" },
		"port":            func(c *Config) { c.BindPort = 70000 },
		"adv port":        func(c *Config) { c.AdvertisePort = -1 },
		"no bind addr":    func(c *Config) { c.BindAddr = "" },
		"key size":        func(c *Config) { c.GossipKey = make([]byte, 31) },
		"forget":          func(c *Config) { c.ForgetAfter = 0 },
		"debounce":        func(c *Config) { c.RebuildDebounce = -1 },
		"rejoin":          func(c *Config) { c.RejoinInterval = 0 },
		"empty seed":      func(c *Config) { c.Join = []string{""} },
		"probe timeout":   func(c *Config) { c.Timing.ProbeTimeout = 2 * c.Timing.ProbeInterval },
		"probe interval":  func(c *Config) { c.Timing.ProbeInterval = 0 },
		"suspicion":       func(c *Config) { c.Timing.SuspicionMult = 0 },
		"suspicion max":   func(c *Config) { c.Timing.SuspicionMaxTimeoutMult = 0 },
		"indirect":        func(c *Config) { c.Timing.IndirectChecks = -1 },
		"retransmit":      func(c *Config) { c.Timing.RetransmitMult = 0 },
		"gossip interval": func(c *Config) { c.Timing.GossipInterval = 0 },
		"gossip nodes":    func(c *Config) { c.Timing.GossipNodes = 0 },
		"gossip dead":     func(c *Config) { c.Timing.GossipToTheDeadTime = -1 },
		"push pull":       func(c *Config) { c.Timing.PushPullInterval = -1 },
		"tcp timeout":     func(c *Config) { c.Timing.TCPTimeout = 0 },
		"reclaim":         func(c *Config) { c.Timing.DeadNodeReclaimTime = -1 },
	} {
		c := ok
		mut(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: validated", name)
		}
	}
	if _, err := New(Config{}, ring.Meta{}); err == nil {
		t.Error("New accepted an empty config")
	}
}
