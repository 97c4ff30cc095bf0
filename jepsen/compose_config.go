package jepsen

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// Timeouts of the docker and compose commands a Compose runs.
const (
	composeTimeout = 2 * time.Minute  // docker-compose run / down
	dockerTimeout  = 30 * time.Second // docker start, kill, pause, inspect, ...
)

// ComposeConfig describes the deploy/ docker compose cluster the scenarios
// of a Compose run on. DefaultComposeConfig fills every field but File;
// ComposeNodes fills the empty ones the same way.
type ComposeConfig struct {
	// File is deploy/docker-compose.yml, whose services weir1..weir3 become
	// nodes n1..n3. Required.
	File string
	// Image is the weir image the nodes run (WEIR_IMAGE), built beforehand
	// from deploy/Dockerfile. Default "weir:jepsen".
	Image string
	// Project is the compose project name: containers are Project-n<i>, the
	// network Project_weirnet. Default "weir-jepsen"; it must differ from
	// deploy/compose-test.sh's "weir-compose-test" so both can run at once.
	Project string
	// Command is the compose command line. Default: "docker-compose" when
	// it is on PATH, else "docker compose".
	Command []string
	// Subnet is the first three octets of the cluster's /24 with a
	// trailing dot; node i is Subnet+(10+i). Default "172.29.0.": the
	// override moves the network off deploy's 172.28.0.0/24, which
	// compose-test.sh may hold at the same time.
	Subnet string
}

// DefaultComposeConfig returns the defaults of every field but File.
func DefaultComposeConfig() ComposeConfig {
	return ComposeConfig{Image: "weir:jepsen", Project: "weir-jepsen", Command: defaultComposeCommand(), Subnet: "172.29.0."}
}

func defaultComposeCommand() []string {
	if _, err := exec.LookPath("docker-compose"); err == nil {
		return []string{"docker-compose"}
	}
	return []string{"docker", "compose"}
}

// withDefaults fills the empty fields from DefaultComposeConfig.
func (cfg ComposeConfig) withDefaults() ComposeConfig {
	if cfg.Image == "" {
		cfg.Image = "weir:jepsen"
	}
	if cfg.Project == "" {
		cfg.Project = "weir-jepsen"
	}
	if len(cfg.Command) == 0 {
		cfg.Command = defaultComposeCommand()
	}
	if cfg.Subnet == "" {
		cfg.Subnet = "172.29.0."
	}
	return cfg
}

// Validate reports what is wrong with cfg (after defaults); it changes
// nothing.
func (cfg ComposeConfig) Validate() error {
	var errs []error
	if cfg.File == "" {
		errs = append(errs, errors.New("jepsen: compose: File (deploy/docker-compose.yml) is required"))
	} else if _, err := os.Stat(cfg.File); err != nil {
		errs = append(errs, fmt.Errorf("jepsen: compose: %w", err))
	}
	if cfg.Image == "" {
		errs = append(errs, errors.New("jepsen: compose: Image is required"))
	}
	if cfg.Project == "" || strings.ToLower(cfg.Project) != cfg.Project || strings.ContainsAny(cfg.Project, " /:") {
		errs = append(errs, fmt.Errorf("jepsen: compose: project %q: want a lower-case compose project name", cfg.Project))
	}
	if cfg.Project == composeTestProject {
		errs = append(errs, fmt.Errorf("jepsen: compose: project %q is deploy/compose-test.sh's; pick another", cfg.Project))
	}
	if len(cfg.Command) == 0 {
		errs = append(errs, errors.New("jepsen: compose: Command is required"))
	}
	if a, err := netip.ParseAddr(cfg.Subnet + "0"); err != nil || !a.Is4() || strings.Count(cfg.Subnet, ".") != 3 {
		errs = append(errs, fmt.Errorf("jepsen: compose: subnet %q: want three octets and a trailing dot (like %q)", cfg.Subnet, "172.29.0."))
	}
	return errors.Join(errs...)
}

// ComposeNodes returns the Nodes constructor of a scenario run on the
// deploy/ compose cluster: every scenario gets a fresh Compose.
func ComposeNodes(cfg ComposeConfig) func(NodesConfig) (Nodes, error) {
	return func(nc NodesConfig) (Nodes, error) { return NewCompose(cfg, nc) }
}

// ComposeOverride returns the override file of deploy/docker-compose.yml
// for one scenario: services weir1..weir3 named n1..n3 (node name and
// hostname) at subnet+(10+i), joining each other there, reading the limits
// file limits (a host path, mounted read-only); the network weirnet on
// subnet+"0/24". With standalone every node runs with WEIR_CLUSTER=false
// and no seeds. Compose merges environment, volumes and a service's
// networks by key and replaces a top-level network whole, so every value
// here wins over deploy's.
func ComposeOverride(subnet, limits string, standalone bool) string {
	var b strings.Builder
	b.WriteString("# Written by the jepsen harness (jepsen/compose.go) for one scenario;\n" +
		"# used as docker-compose -f deploy/docker-compose.yml -f <this file>.\n")
	b.WriteString("services:\n")
	for i := 1; i <= ComposeN; i++ {
		var join []string
		for j := 1; j <= ComposeN; j++ {
			if j != i {
				join = append(join, composeIP(subnet, j)+":7946")
			}
		}
		cluster := "true"
		if standalone {
			cluster, join = "false", nil
		}
		fmt.Fprintf(&b, "  %s:\n", composeService(i))
		fmt.Fprintf(&b, "    hostname: %s\n", Name(i))
		b.WriteString("    environment:\n")
		fmt.Fprintf(&b, "      WEIR_NODE_NAME: %s\n", Name(i))
		fmt.Fprintf(&b, "      WEIR_ADVERTISE_ADDR: %s\n", composeIP(subnet, i))
		fmt.Fprintf(&b, "      WEIR_JOIN: %s\n", yamlQuote(strings.Join(join, ",")))
		fmt.Fprintf(&b, "      WEIR_CLUSTER: %s\n", yamlQuote(cluster))
		fmt.Fprintf(&b, "      WEIR_LIMITS: %s\n", composeLimits)
		b.WriteString("    volumes:\n")
		fmt.Fprintf(&b, "      - type: bind\n        source: %s\n        target: %s\n        read_only: true\n", yamlQuote(limits), composeLimits)
		b.WriteString("    networks:\n")
		fmt.Fprintf(&b, "      weirnet:\n        ipv4_address: %s\n", composeIP(subnet, i))
	}
	b.WriteString("networks:\n  weirnet:\n    driver: bridge\n    ipam:\n      config:\n")
	fmt.Fprintf(&b, "        - subnet: %s0/24\n", subnet)
	return b.String()
}

// composeLimits is where a node's container sees the scenario's limits.
const composeLimits = "/etc/weir/jepsen/limits.yaml"

// yamlQuote quotes s as a YAML double-quoted scalar, with compose's
// variable interpolation escaped ($ → $$).
func yamlQuote(s string) string { return strconv.Quote(strings.ReplaceAll(s, "$", "$$")) }

// composeService is node i's service in deploy/docker-compose.yml.
func composeService(i int) string { return "weir" + strconv.Itoa(i) }

// composeIP is node i's container address in subnet.
func composeIP(subnet string, i int) string { return subnet + strconv.Itoa(10+i) }
