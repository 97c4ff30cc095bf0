package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// proc is one server process the suite started; the suite stops exactly
// the processes it started, by their pid.
type proc struct {
	name   string
	cmd    *exec.Cmd
	log    *os.File
	exited chan struct{} // closed when the process has ended
	err    error         // its exit status, once exited is closed
}

// startProc starts path with args, its output in a log file under dir and
// env (NAME=value; nil for none) added to the load generator's own
// environment. The child gets SIGKILL if the load generator dies first,
// so a crashed run leaves no server behind.
func startProc(dir, name, path string, env []string, args ...string) (*proc, error) {
	log, err := os.CreateTemp(dir, name+"-*.log")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = log, log
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		return nil, fmt.Errorf("loadgen: start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: log, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// pid is the process id.
func (p *proc) pid() int { return p.cmd.Process.Pid }

// alive reports whether the process is still running.
func (p *proc) alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// stop asks the process to end (SIGTERM: a Weir node hands off and
// leaves), and kills it after grace.
func (p *proc) stop(grace time.Duration) {
	if !p.alive() {
		_ = p.log.Close()
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.exited:
	case <-t.C:
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
	_ = p.log.Close()
}

// logTail returns the last lines of the process's output, for errors.
func (p *proc) logTail() string {
	b, err := os.ReadFile(p.log.Name())
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-8):], "\n")
}

// freeAddr returns a loopback address with a port that was free a moment
// ago (the kernel picks it; the server binds it right after).
func freeAddr() (string, error) { return freeAddrOn("127.0.0.1") }

// freeAddrOn is freeAddr on the loopback address ip (any of 127.0.0.0/8).
func freeAddrOn(ip string) (string, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return "", err
	}
	addr := ln.Addr().String()
	return addr, ln.Close()
}

// waitTCP waits until addr accepts a connection, p ends, or timeout.
func waitTCP(ctx context.Context, addr string, p *proc, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			return c.Close()
		}
		if !p.alive() {
			return fmt.Errorf("loadgen: %s ended before listening on %s (%w):\n%s", p.name, addr, p.err, p.logTail())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("loadgen: %s not listening on %s after %v:\n%s", p.name, addr, timeout, p.logTail())
		}
		t := time.NewTimer(50 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// weirNode is one `weir serve` the suite started, every port on loopback.
type weirNode struct {
	*proc
	httpAddr, grpcAddr, gossipAddr, respAddr string
}

// weirNodeConfig is how startWeir starts a node.
type weirNodeConfig struct {
	bin, limits, dir, name string
	join                   string   // gossip address of a seed, or ""
	resp                   bool     // also serve the Redis protocol (--resp-addr)
	noReplication          bool     // --replication=false: no replica on the successor
	args                   []string // more `weir serve` flags
	// pick returns an address for one of the node's ports; nil is
	// freeAddr. Tests set it to hand out a taken port.
	pick func() (string, error)
}

// startAttempts is how many times the suite starts a node or a ceiling
// whose ports were taken before it could bind them.
const startAttempts = 3

// errPortTaken marks a process (a node, a ceiling) that exited because a
// port picked for it was no longer free when it bound it.
var errPortTaken = errors.New("loadgen: a port picked free was taken before the process bound it")

// startWeir starts one node and waits for its HTTP, gRPC and RESP ports.
// A port freeAddr found free can be taken before the node binds it: the
// kernel hands the same ephemeral ports to outgoing connections, and the
// suite's clusters open thousands. A node that exits on such a bind error
// is started again on fresh ports (retryPortTaken); any other failure is
// returned at once. (A port taken by another listener would answer
// waitTCP in the node's place; the ports the suite loses are the local
// ends of outgoing connections, on which nothing accepts.)
func startWeir(ctx context.Context, c weirNodeConfig) (*weirNode, error) {
	return retryPortTaken(func() (*weirNode, error) { return startWeirOnce(ctx, c) })
}

// retryPortTaken calls start until it returns anything but errPortTaken,
// at most startAttempts times, for a process started on ports picked
// free: each call picks them again.
func retryPortTaken[T any](start func() (T, error)) (v T, err error) {
	for range startAttempts {
		if v, err = start(); !errors.Is(err, errPortTaken) {
			break
		}
	}
	return v, err
}

// waitListening waits until p accepts on each of addrs ("" skipped). On
// failure it stops p, and the error wraps errPortTaken when p had ended by
// itself with a bind error in its log.
func waitListening(ctx context.Context, p *proc, timeout time.Duration, addrs ...string) error {
	for _, a := range addrs {
		if a == "" {
			continue
		}
		if err := waitTCP(ctx, a, p, timeout); err != nil {
			ended := !p.alive() // by itself, before stop
			p.stop(time.Second)
			if ended && strings.Contains(p.logTail(), "address already in use") {
				return fmt.Errorf("%w: %w", errPortTaken, err)
			}
			return err
		}
	}
	return nil
}

// startWeirOnce starts one node on ports picked now and waits for them.
// It is a cluster member as deployed (gossip and peer service on) with the
// LAN timing, whose probes cost the least background CPU.
func startWeirOnce(ctx context.Context, c weirNodeConfig) (*weirNode, error) {
	pick := c.pick
	if pick == nil {
		pick = freeAddr
	}
	var addrs [5]string
	for i := range addrs {
		a, err := pick()
		if err != nil {
			return nil, err
		}
		addrs[i] = a
	}
	n := &weirNode{httpAddr: addrs[0], grpcAddr: addrs[1], gossipAddr: addrs[2]}
	args := []string{
		"serve", "--node-name", c.name, "--limits", c.limits,
		"--http-addr", n.httpAddr, "--grpc-addr", n.grpcAddr,
		"--gossip-addr", n.gossipAddr, "--peer-addr", addrs[3],
		"--advertise-addr", "127.0.0.1",
	}
	if c.join != "" {
		args = append(args, "--join", c.join)
	}
	if c.noReplication {
		args = append(args, "--replication=false")
	}
	args = append(args, c.args...)
	if c.resp {
		n.respAddr = addrs[4]
		args = append(args, "--resp-addr", n.respAddr)
	}
	p, err := startProc(c.dir, "weir-"+c.name, c.bin, nil, args...)
	if err != nil {
		return nil, err
	}
	n.proc = p
	if err := waitListening(ctx, p, 20*time.Second, n.httpAddr, n.grpcAddr, n.respAddr); err != nil {
		return nil, err
	}
	return n, nil
}

// weirHasFlag reports whether `weir serve` knows a flag, from its help.
func weirHasFlag(bin, flag string) bool {
	out, _ := exec.Command(bin, "serve", "-h").CombinedOutput()
	return bytes.Contains(out, []byte("-"+flag))
}

// startRedisServer starts Debian's redis-server on a free loopback port, with
// no persistence (as the Weir nodes keep nothing on disk either).
func startRedisServer(ctx context.Context, bin, dir string) (*proc, string, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, "", err
	}
	_, port, _ := net.SplitHostPort(addr)
	p, err := startProc(dir, "redis", bin, nil, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if err != nil {
		return nil, "", err
	}
	if err := waitTCP(ctx, addr, p, 10*time.Second); err != nil {
		p.stop(time.Second)
		return nil, "", err
	}
	return p, addr, nil
}

// versionOf runs `bin args...` and returns its first output line.
func versionOf(bin string, args ...string) string {
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil && len(out) == 0 {
		return "unknown (" + err.Error() + ")"
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return line
}

// loadAvg returns the 1, 5 and 15 minute load averages.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// cpuModel returns the first "model name" of /proc/cpuinfo.
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// errStopped says a server the suite needs has ended.
var errStopped = errors.New("loadgen: a server ended during the run")

// pidsOf returns the pids of nodes.
func pidsOf(nodes ...*weirNode) []int {
	out := make([]int, len(nodes))
	for i, n := range nodes {
		out[i] = n.pid()
	}
	return out
}

// metricsOf returns the /metrics URLs of nodes.
func metricsOf(nodes ...*weirNode) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = metricsURL(n.httpAddr)
	}
	return out
}

// itoa is strconv.Itoa, short for the progress lines.
func itoa(n int) string { return strconv.Itoa(n) }
