package jepsen

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// NodesConfig is what every backend of a scenario's cluster gets.
type NodesConfig struct {
	Limits string // limits file path
	LogDir string // node i's log goes to LogDir/n<i>.log
	// Standalone starts every node with --cluster=false: each decides every
	// key alone from a full bucket. This is the deliberately broken build of
	// the acceptance test.
	Standalone bool
}

// NetnsNodes returns the Nodes constructor of a scenario run as weir
// processes started from bin in nw.
func NetnsNodes(bin, fromBin string, nw *Net) func(NodesConfig) (Nodes, error) {
	return func(cfg NodesConfig) (Nodes, error) {
		return NewCluster(ClusterConfig{Bin: bin, FromBin: fromBin, Net: nw, Limits: cfg.Limits, LogDir: cfg.LogDir, Standalone: cfg.Standalone}), nil
	}
}

// ClusterConfig describes N weir processes in a Net.
type ClusterConfig struct {
	Bin string // the weir binary
	// FromBin, when set, is the older weir binary every node runs until
	// Upgrade moves it to Bin (the rolling-upgrade scenario).
	FromBin string
	Net     *Net
	Limits  string // limits file path
	LogDir  string // node i appends to LogDir/n<i>.log across restarts
	// Standalone starts every node with --cluster=false: each decides every
	// key alone from a full bucket. This is the deliberately broken build of
	// the acceptance test.
	Standalone bool
}

// Cluster runs the weir processes of one scenario in a Net; it implements
// Nodes. Its methods are safe for concurrent use.
type Cluster struct {
	cfg ClusterConfig

	mu       sync.Mutex      // guards procs, offsets and upgraded
	procs    []*proc         // index i-1 for node i; nil when not running
	offsets  []time.Duration // index i-1: decision clock offset for node i's next start
	upgraded []bool          // index i-1: node i runs Bin, not FromBin
}

type proc struct {
	cmd    *exec.Cmd
	done   chan struct{}
	log    *os.File
	paused bool
}

// NewCluster returns a Cluster with no process running.
func NewCluster(cfg ClusterConfig) *Cluster {
	return &Cluster{
		cfg:      cfg,
		procs:    make([]*proc, cfg.Net.N),
		offsets:  make([]time.Duration, cfg.Net.N),
		upgraded: make([]bool, cfg.Net.N),
	}
}

// Name is node i's name (i from 1).
func Name(i int) string { return fmt.Sprintf("n%d", i) }

// URL is node i's public HTTP base URL.
func (c *Cluster) URL(i int) string { return "http://" + c.cfg.Net.IP(i) + ":8080" }

func (c *Cluster) args(i int) []string {
	nw := c.cfg.Net
	ip := nw.IP(i)
	bin := c.cfg.Bin
	if c.cfg.FromBin != "" && !c.upgraded[i-1] {
		bin = c.cfg.FromBin
	}
	a := []string{
		"netns", "exec", nw.NS(i), bin, "serve",
		"--node-name", Name(i), "--http-addr", ip + ":8080", "--grpc-addr", ip + ":8081",
		"--limits", c.cfg.Limits,
	}
	if c.cfg.Standalone {
		return append(a, "--cluster=false")
	}
	var join []string
	for j := 1; j <= nw.N; j++ {
		if j != i {
			join = append(join, nw.IP(j)+":7946")
		}
	}
	a = append(a, "--gossip-addr", ip+":7946", "--advertise-addr", ip, "--peer-addr", ip+":7947",
		"--join", strings.Join(join, ","), "--timing", "local")
	if off := c.offsets[i-1]; off != 0 {
		a = append(a, "--test-clock-offset", off.String())
	}
	return a
}

// Upgrade makes node i's next start run Bin. Without FromBin every start
// runs Bin and Upgrade changes nothing: a rolling restart.
func (c *Cluster) Upgrade(i int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.upgraded[i-1] = true
	return nil
}

// SetClockOffset sets the decision clock offset node i gets at its next
// start (0: none).
func (c *Cluster) SetClockOffset(i int, d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offsets[i-1] = d
	return nil
}

// Start starts node i. `ip netns exec` execs the binary in place, so the
// process started is weir itself and signals reach it directly.
func (c *Cluster) Start(i int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.procs[i-1] != nil {
		return fmt.Errorf("jepsen: %s already running", Name(i))
	}
	f, err := os.OpenFile(filepath.Join(c.cfg.LogDir, Name(i)+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("jepsen: %w", err)
	}
	args := c.args(i)
	fmt.Fprintf(f, "=== jepsen: start %s (%s) at %s\n", Name(i), args[3], time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command("ip", args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("jepsen: start %s: %w", Name(i), err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{}), log: f}
	go func() {
		_ = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	c.procs[i-1] = p
	return nil
}

// signal sends sig to node i's process.
func (c *Cluster) signal(i int, sig syscall.Signal) (*proc, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.procs[i-1]
	if p == nil {
		return nil, fmt.Errorf("jepsen: %s is not running", Name(i))
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		return nil, fmt.Errorf("jepsen: signal %s: %w", Name(i), err)
	}
	switch sig {
	case syscall.SIGSTOP:
		p.paused = true
	case syscall.SIGCONT:
		p.paused = false
	}
	return p, nil
}

// reap waits up to d for node i's process to exit and forgets it.
func (c *Cluster) reap(i int, p *proc, d time.Duration) error {
	select {
	case <-p.done:
	case <-time.After(d):
		return fmt.Errorf("jepsen: %s did not exit within %v", Name(i), d)
	}
	c.mu.Lock()
	c.procs[i-1] = nil
	c.mu.Unlock()
	return nil
}

// Kill sends SIGKILL to node i and waits for it to exit.
func (c *Cluster) Kill(i int) error {
	p, err := c.signal(i, syscall.SIGKILL)
	if err != nil {
		return err
	}
	return c.reap(i, p, 5*time.Second)
}

// Stop sends SIGTERM to node i (a graceful leave) and waits up to timeout
// for it to exit, then kills it.
func (c *Cluster) Stop(i int, timeout time.Duration) error {
	p, err := c.signal(i, syscall.SIGTERM)
	if err != nil {
		return err
	}
	if err := c.reap(i, p, timeout); err != nil {
		_ = p.cmd.Process.Kill()
		return errors.Join(err, c.reap(i, p, 5*time.Second))
	}
	return nil
}

// Pause sends SIGSTOP to node i.
func (c *Cluster) Pause(i int) error { _, err := c.signal(i, syscall.SIGSTOP); return err }

// Resume sends SIGCONT to node i.
func (c *Cluster) Resume(i int) error { _, err := c.signal(i, syscall.SIGCONT); return err }

// Close kills every process still running (resuming paused ones first).
func (c *Cluster) Close() {
	for i := 1; i <= len(c.procs); i++ {
		c.mu.Lock()
		p := c.procs[i-1]
		c.mu.Unlock()
		if p == nil {
			continue
		}
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		_ = p.cmd.Process.Kill()
		_ = c.reap(i, p, 5*time.Second)
	}
}

// Pid is node i's process id (weir itself: `ip netns exec` execs it in
// place), 0 when node i is not running.
func (c *Cluster) Pid(i int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.procs[i-1]; p != nil {
		return p.cmd.Process.Pid
	}
	return 0
}

// N is the number of nodes.
func (c *Cluster) N() int { return c.cfg.Net.N }

// Block drops node i's traffic with peers (Net.Block).
func (c *Cluster) Block(ctx context.Context, i int, peers []int) error {
	return c.cfg.Net.Block(ctx, i, peers)
}

// Deafen drops what node i receives from each of from (Net.Deafen).
func (c *Cluster) Deafen(ctx context.Context, i int, from []int) error {
	return c.cfg.Net.Deafen(ctx, i, from)
}

// Loss drops node i's packets with peers at random (Net.Loss).
func (c *Cluster) Loss(ctx context.Context, i int, peers []int, p float64) error {
	return c.cfg.Net.Loss(ctx, i, peers, p)
}

// Heal removes node i's rules (Net.Heal).
func (c *Cluster) Heal(ctx context.Context, i int) error { return c.cfg.Net.Heal(ctx, i) }
