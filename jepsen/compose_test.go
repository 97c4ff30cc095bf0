package jepsen

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestComposeOverride(t *testing.T) {
	got := ComposeOverride("172.29.0.", "/runs/a b/3-kill/limits.yaml", false)
	for _, want := range []string{
		"  weir1:\n    hostname: n1\n",
		"      WEIR_NODE_NAME: n2\n      WEIR_ADVERTISE_ADDR: 172.29.0.12\n      WEIR_JOIN: \"172.29.0.11:7946,172.29.0.13:7946\"\n      WEIR_CLUSTER: \"true\"\n",
		"      WEIR_LIMITS: " + composeLimits + "\n",
		"        source: \"/runs/a b/3-kill/limits.yaml\"\n        target: " + composeLimits + "\n        read_only: true\n",
		"      weirnet:\n        ipv4_address: 172.29.0.13\n",
		"networks:\n  weirnet:\n    driver: bridge\n    ipam:\n      config:\n        - subnet: 172.29.0.0/24\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("override lacks %q:\n%s", want, got)
		}
	}
	for i := 1; i <= ComposeN; i++ {
		if !strings.Contains(got, "  "+composeService(i)+":\n") {
			t.Errorf("override lacks service %s", composeService(i))
		}
	}
	if strings.Contains(got, "172.28.") {
		t.Errorf("override keeps deploy's subnet:\n%s", got)
	}

	broken := ComposeOverride("10.9.8.", "/l$x.yaml", true)
	if strings.Count(broken, "WEIR_CLUSTER: \"false\"") != ComposeN || strings.Count(broken, "WEIR_JOIN: \"\"") != ComposeN {
		t.Errorf("standalone override does not turn clustering off on every node:\n%s", broken)
	}
	if !strings.Contains(broken, `source: "/l$$x.yaml"`) {
		t.Errorf("a $ in a path is not escaped from compose interpolation:\n%s", broken)
	}
}

func TestCutRules(t *testing.T) {
	ip := func(i int) string { return composeIP("172.29.0.", i) }
	tests := []struct {
		name   string
		peers  []int
		match  []string
		oneWay bool
		want   [][]string
	}{
		{"block", []int{2, 3}, nil, false, [][]string{
			{"-A", "INPUT", "-s", "172.29.0.12", "-j", "DROP"},
			{"-A", "OUTPUT", "-d", "172.29.0.12", "-j", "DROP"},
			{"-A", "INPUT", "-s", "172.29.0.13", "-j", "DROP"},
			{"-A", "OUTPUT", "-d", "172.29.0.13", "-j", "DROP"},
		}},
		{"deafen", []int{1}, nil, true, [][]string{
			{"-A", "INPUT", "-s", "172.29.0.11", "-j", "DROP"},
		}},
		{"loss", []int{3}, lossMatch(0.3), false, [][]string{
			{"-A", "INPUT", "-s", "172.29.0.13", "-m", "statistic", "--mode", "random", "--probability", "0.300", "-j", "DROP"},
			{"-A", "OUTPUT", "-d", "172.29.0.13", "-m", "statistic", "--mode", "random", "--probability", "0.300", "-j", "DROP"},
		}},
		{"none", nil, nil, false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := cutRules(ip, tt.peers, tt.match, tt.oneWay)
			if !slices.EqualFunc(got, tt.want, slices.Equal) {
				t.Errorf("cutRules = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestComposeConfigValidate(t *testing.T) {
	file := filepath.Join(t.TempDir(), "docker-compose.yml")
	if err := os.WriteFile(file, []byte("services: {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ok := DefaultComposeConfig()
	ok.File = file
	if err := ok.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	if got := (ComposeConfig{File: file}).withDefaults(); got.Image != ok.Image || got.Project != ok.Project || got.Subnet != ok.Subnet || len(got.Command) == 0 {
		t.Errorf("withDefaults = %+v, want the defaults %+v", got, ok)
	}
	bad := map[string]func(*ComposeConfig){
		"no file":           func(c *ComposeConfig) { c.File = "" },
		"missing file":      func(c *ComposeConfig) { c.File = filepath.Join(t.TempDir(), "nope.yml") },
		"no image":          func(c *ComposeConfig) { c.Image = "" },
		"compose-test's":    func(c *ComposeConfig) { c.Project = composeTestProject },
		"upper-case":        func(c *ComposeConfig) { c.Project = "Weir" },
		"no command":        func(c *ComposeConfig) { c.Command = nil },
		"subnet no dot":     func(c *ComposeConfig) { c.Subnet = "172.29.0" },
		"subnet too short":  func(c *ComposeConfig) { c.Subnet = "172.29." },
		"subnet not an ip4": func(c *ComposeConfig) { c.Subnet = "fd00::" },
	}
	for name, mutate := range bad {
		c := ok
		mutate(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: Validate accepted %+v", name, c)
		}
	}
}
