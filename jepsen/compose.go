package jepsen

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ComposeN is the size of the deploy/ compose cluster: its services weir1,
// weir2 and weir3 are nodes 1, 2 and 3.
const ComposeN = 3

// composeTestProject is deploy/compose-test.sh's project name; a Compose
// must not use it.
const composeTestProject = "weir-compose-test"

// Compose runs the three nodes of one scenario as the services of
// deploy/docker-compose.yml, with an override file written into the
// scenario's LogDir (ComposeOverride) that names them n1..n3, mounts the
// scenario's limits file, moves the network to its own subnet and, for the
// broken build, turns clustering off. It implements Nodes.
//
// Nodes are started with `compose run -d --no-deps --name Project-n<i>
// weir<i>`: a one-off container of the service has its image, environment,
// volumes, healthcheck, network and fixed address, but not its published
// ports (compose cannot drop a port in an override), so a Compose never
// clashes with deploy/compose-test.sh's 127.0.0.1:18181-18183. The runner
// reaches node i at its container address. Kill, Stop, Pause and Resume are
// `docker kill -s KILL`, `docker stop -t`, `docker pause` and `docker
// unpause`; a restart is `docker start`, which keeps the container's name
// and address. Cuts are the iptables rules of Net, run inside a container's
// network namespace (`nsenter -t <pid> -n iptables -w`), which the host's
// firewall never sees. A clock offset is the environment variable
// WEIR_TEST_CLOCK_OFFSET, so a start with a new offset recreates the
// container (same name and address; the old one's logs are saved first).
//
// Close saves every container's `docker logs` to LogDir/n<i>.log and runs
// `compose down -v --remove-orphans`. Every docker and compose command, its
// duration and its output go to LogDir/compose.log. From NewCompose to
// Close it holds a lock on the project (lockProject), so a second run with
// the same project fails instead of tearing this one down.
//
// Methods are safe for concurrent use; operations on one node run one at a
// time.
type Compose struct {
	cfg      ComposeConfig
	file     string   // cfg.File, absolute
	logDir   string   // absolute
	override string   // the override file
	env      []string // environment of every command: ours plus WEIR_IMAGE
	lock     *os.File // flock held on the project from NewCompose to Close

	composeMu sync.Mutex // serializes compose commands (a one-off run may create the network)
	traceMu   sync.Mutex // guards writes to compose.log
	nodes     [ComposeN]composeNode
	closeOnce sync.Once
}

// composeNode is one node's container as a Compose knows it.
type composeNode struct {
	mu      sync.Mutex    // guards the fields below and serializes the node's operations
	created bool          // the container exists (running or not)
	paused  bool          // docker paused it
	made    time.Duration // the clock offset it was created with
	offset  time.Duration // the clock offset of the next start
	starts  []string      // wall-clock times of its starts, for the log header
}

// NewCompose writes the override file of nc into nc.LogDir and removes what
// a crashed earlier run of the project left; no node runs yet.
func NewCompose(cfg ComposeConfig, nc NodesConfig) (*Compose, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	file, err := filepath.Abs(cfg.File)
	if err != nil {
		return nil, fmt.Errorf("jepsen: %w", err)
	}
	limits, err := filepath.Abs(nc.Limits)
	if err != nil {
		return nil, fmt.Errorf("jepsen: %w", err)
	}
	logDir, err := filepath.Abs(nc.LogDir)
	if err != nil {
		return nil, fmt.Errorf("jepsen: %w", err)
	}
	c := &Compose{
		cfg: cfg, file: file, logDir: logDir,
		override: filepath.Join(logDir, "compose.override.yml"),
		env:      append(os.Environ(), "WEIR_IMAGE="+cfg.Image),
	}
	if c.lock, err = lockProject(cfg.Project); err != nil {
		return nil, err
	}
	if err := os.WriteFile(c.override, []byte(ComposeOverride(cfg.Subnet, limits, nc.Standalone)), 0o644); err != nil {
		c.lock.Close()
		return nil, fmt.Errorf("jepsen: %w", err)
	}
	if _, err := c.docker(dockerTimeout, "image", "inspect", "-f", "{{.Id}}", cfg.Image); err != nil {
		c.lock.Close()
		return nil, fmt.Errorf("jepsen: compose: image %s is not built (make jepsen-compose builds it): %w", cfg.Image, err)
	}
	c.teardown()
	return c, nil
}

// container is node i's container name.
func (c *Compose) container(i int) string { return c.cfg.Project + "-" + Name(i) }

// IP is node i's container address.
func (c *Compose) IP(i int) string { return composeIP(c.cfg.Subnet, i) }

// N is the number of nodes (ComposeN).
func (c *Compose) N() int { return ComposeN }

// URL is node i's public HTTP base URL: its container address, which the
// host reaches through the network's bridge.
func (c *Compose) URL(i int) string { return "http://" + c.IP(i) + ":8080" }

// node returns node i's state, locked; the caller unlocks it.
func (c *Compose) node(i int) (*composeNode, error) {
	if i < 1 || i > ComposeN {
		return nil, fmt.Errorf("jepsen: compose: no node %d (1..%d)", i, ComposeN)
	}
	n := &c.nodes[i-1]
	n.mu.Lock()
	return n, nil
}

// Upgrade is refused: the compose cluster runs one image.
func (c *Compose) Upgrade(int) error {
	return errors.New("jepsen: the compose backend runs one image; the upgrade scenario needs network namespaces")
}

// SetClockOffset sets the decision clock offset node i gets at its next
// start (0: none); a start with a new offset recreates the container.
func (c *Compose) SetClockOffset(i int, d time.Duration) error {
	n, err := c.node(i)
	if err != nil {
		return err
	}
	defer n.mu.Unlock()
	n.offset = d
	return nil
}

// Start starts node i: a new one-off container of its service the first
// time (or when its clock offset changed), else `docker start` of the
// stopped one.
func (c *Compose) Start(i int) error {
	n, err := c.node(i)
	if err != nil {
		return err
	}
	defer n.mu.Unlock()
	if n.created && n.made != n.offset {
		c.saveLogs(i, n, fmt.Sprintf("removed to restart it with clock offset %v", n.offset))
		if _, err := c.docker(dockerTimeout, "rm", "-f", c.container(i)); err != nil {
			return err
		}
		n.created, n.starts = false, nil
	}
	if n.created {
		if _, err := c.docker(dockerTimeout, "start", c.container(i)); err != nil {
			return err
		}
	} else {
		args := []string{"run", "-d", "--no-deps", "--name", c.container(i)}
		if n.offset != 0 {
			args = append(args, "-e", "WEIR_TEST_CLOCK_OFFSET="+n.offset.String())
		}
		if _, err := c.compose(append(args, composeService(i))...); err != nil {
			_, _ = c.docker(dockerTimeout, "rm", "-f", c.container(i))
			return err
		}
		n.created, n.made = true, n.offset
	}
	n.starts = append(n.starts, time.Now().UTC().Format(time.RFC3339Nano))
	return nil
}

// Kill sends SIGKILL to node i's container and waits until it stopped.
func (c *Compose) Kill(i int) error {
	n, err := c.node(i)
	if err != nil {
		return err
	}
	defer n.mu.Unlock()
	if _, err := c.docker(dockerTimeout, "kill", "-s", "KILL", c.container(i)); err != nil {
		return err
	}
	_, err = c.docker(dockerTimeout, "wait", c.container(i))
	return err
}

// Stop asks node i to leave gracefully (`docker stop -t`: SIGTERM, then
// SIGKILL after timeout, rounded up to whole seconds) and waits for it. It
// reports an error when the node had to be killed.
func (c *Compose) Stop(i int, timeout time.Duration) error {
	n, err := c.node(i)
	if err != nil {
		return err
	}
	defer n.mu.Unlock()
	secs := max(1, int(math.Ceil(timeout.Seconds())))
	if _, err := c.docker(timeout+dockerTimeout, "stop", "-t", strconv.Itoa(secs), c.container(i)); err != nil {
		return err
	}
	code, err := c.docker(dockerTimeout, "inspect", "-f", "{{.State.ExitCode}}", c.container(i))
	if err != nil {
		return err
	}
	if code == "137" {
		return fmt.Errorf("jepsen: %s did not exit within %v (docker killed it)", Name(i), timeout)
	}
	return nil
}

// Pause freezes node i's container (`docker pause`, the cgroup freezer).
func (c *Compose) Pause(i int) error { return c.pause(i, true) }

// Resume thaws node i's container (`docker unpause`).
func (c *Compose) Resume(i int) error { return c.pause(i, false) }

func (c *Compose) pause(i int, pause bool) error {
	n, err := c.node(i)
	if err != nil {
		return err
	}
	defer n.mu.Unlock()
	verb := "unpause"
	if pause {
		verb = "pause"
	}
	if _, err := c.docker(dockerTimeout, verb, c.container(i)); err != nil {
		return err
	}
	n.paused = pause
	return nil
}

// pid is the host pid of node i's container's init process (the weir
// process), 0 when it is not running.
func (c *Compose) pid(i int) (int, error) {
	out, err := c.docker(dockerTimeout, "inspect", "-f", "{{.State.Pid}}", c.container(i))
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(out)
	if err != nil {
		return 0, fmt.Errorf("jepsen: %s: pid %q: %w", c.container(i), out, err)
	}
	return pid, nil
}

// iptables runs each rule with iptables inside node i's network namespace.
// When the container is not running, that is an error unless stoppedOK.
func (c *Compose) iptables(ctx context.Context, i int, rules [][]string, stoppedOK bool) error {
	n, err := c.node(i)
	if err != nil {
		return err
	}
	defer n.mu.Unlock()
	pid, err := c.pid(i)
	if err != nil {
		return err
	}
	if pid == 0 {
		if stoppedOK {
			return nil
		}
		return fmt.Errorf("jepsen: %s is not running", Name(i))
	}
	for _, r := range rules {
		args := append([]string{"-t", strconv.Itoa(pid), "-n", "iptables", "-w"}, r...)
		if _, err := c.command(ctx, dockerTimeout, "nsenter", args...); err != nil {
			return err
		}
	}
	return nil
}

// Block silently drops all traffic between node i and each of peers, in
// i's network namespace; the runner (the bridge's gateway address) still
// reaches it.
func (c *Compose) Block(ctx context.Context, i int, peers []int) error {
	return c.iptables(ctx, i, cutRules(c.IP, peers, nil, false), false)
}

// Deafen drops what node i receives from each of from, in i's network
// namespace; what it sends still goes out.
func (c *Compose) Deafen(ctx context.Context, i int, from []int) error {
	return c.iptables(ctx, i, cutRules(c.IP, from, nil, true), false)
}

// Loss drops each packet between node i and each of peers with
// probability p, both ways.
func (c *Compose) Loss(ctx context.Context, i int, peers []int, p float64) error {
	return c.iptables(ctx, i, cutRules(c.IP, peers, lossMatch(p), false), false)
}

// Heal flushes INPUT and OUTPUT in node i's network namespace. A container
// that is not running has no rules (its namespace went with it): nil.
func (c *Compose) Heal(ctx context.Context, i int) error {
	return c.iptables(ctx, i, healRules, true)
}

// Close saves every container's logs to LogDir/n<i>.log and removes the
// project's containers and network (`compose down -v --remove-orphans`).
// Only the first call does anything.
func (c *Compose) Close() {
	c.closeOnce.Do(func() {
		for i := 1; i <= ComposeN; i++ {
			n, _ := c.node(i)
			if n.created {
				if n.paused { // docker stops a paused container only after a thaw
					_, _ = c.docker(dockerTimeout, "unpause", c.container(i))
					n.paused = false
				}
				c.saveLogs(i, n, "at the end of the scenario")
				n.created = false
			}
			n.mu.Unlock()
		}
		c.teardown()
		c.lock.Close()
	})
}

// lockProject takes an exclusive flock on a file named after the project in
// the temporary directory, so that two runs on one machine never tear down
// each other's containers; closing the file releases it.
func lockProject(project string) (*os.File, error) {
	path := filepath.Join(os.TempDir(), "jepsen-compose-"+project+".lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("jepsen: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("jepsen: compose project %s is in use by another run (%s): %w", project, path, err)
	}
	return f, nil
}

// teardown removes the project's containers, volumes and network, whoever
// created them; then, should compose have failed, the containers by name
// and the network by name. Errors are in compose.log.
func (c *Compose) teardown() {
	if _, err := c.compose("down", "-v", "--remove-orphans", "-t", "2"); err == nil {
		return
	}
	for i := 1; i <= ComposeN; i++ {
		_, _ = c.docker(dockerTimeout, "rm", "-f", "-v", c.container(i))
	}
	_, _ = c.docker(dockerTimeout, "network", "rm", c.cfg.Project+"_weirnet")
}

// saveLogs appends node i's container logs to LogDir/n<i>.log under a
// header; failures are in compose.log. The caller holds n.mu.
func (c *Compose) saveLogs(i int, n *composeNode, why string) {
	f, err := os.OpenFile(filepath.Join(c.logDir, Name(i)+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		c.trace(fmt.Sprintf("save logs of %s: %v", Name(i), err))
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "=== jepsen: docker logs of %s (%s); the harness started it at %s\n", c.container(i), why, strings.Join(n.starts, ", "))
	ctx, cancel := context.WithTimeout(context.Background(), dockerTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "docker", "logs", c.container(i))
	cmd.Stdout, cmd.Stderr, cmd.WaitDelay = f, f, time.Second
	if err := cmd.Run(); err != nil {
		c.trace(fmt.Sprintf("docker logs %s: %v", c.container(i), err))
	}
}

// compose runs the compose command on deploy's file and the override,
// one at a time.
func (c *Compose) compose(args ...string) (string, error) {
	c.composeMu.Lock()
	defer c.composeMu.Unlock()
	full := slices.Concat(c.cfg.Command[1:], []string{"-p", c.cfg.Project, "-f", c.file, "-f", c.override}, args)
	return c.command(context.Background(), composeTimeout, c.cfg.Command[0], full...)
}

// docker runs the docker CLI.
func (c *Compose) docker(timeout time.Duration, args ...string) (string, error) {
	return c.command(context.Background(), timeout, "docker", args...)
}

// command runs name with args within timeout, logs it to compose.log and
// returns its trimmed standard output.
func (c *Compose) command(ctx context.Context, timeout time.Duration, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr, cmd.Env, cmd.WaitDelay = &stdout, &stderr, c.env, time.Second
	start := time.Now()
	err := cmd.Run()
	line := name + " " + strings.Join(args, " ")
	out := strings.TrimSpace(stdout.String())
	msg := strings.TrimSpace(stdout.String() + "\n" + stderr.String())
	status := "ok"
	if err != nil {
		status = err.Error()
	}
	c.trace(fmt.Sprintf("%s (%v, %s)\n%s", line, time.Since(start).Round(time.Millisecond), status, indent(msg)))
	if err != nil {
		return out, fmt.Errorf("jepsen: %s: %w: %s", line, err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

func indent(s string) string {
	if s == "" {
		return ""
	}
	return "    " + strings.ReplaceAll(s, "\n", "\n    ") + "\n"
}

// trace appends one entry to LogDir/compose.log.
func (c *Compose) trace(s string) {
	c.traceMu.Lock()
	defer c.traceMu.Unlock()
	f, err := os.OpenFile(filepath.Join(c.logDir, "compose.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "%s %s\n", time.Now().UTC().Format("15:04:05.000"), strings.TrimRight(s, "\n"))
}

var _ Nodes = (*Compose)(nil)
