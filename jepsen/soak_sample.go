package jepsen

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// sample reads every running node's resources every SampleEvery (and
// once at once) until ctx ends.
func (s *soak) sample(ctx context.Context) {
	tick := time.NewTicker(s.cfg.SampleEvery)
	defer tick.Stop()
	for {
		at := time.Duration(s.rec.Now())
		for i := 1; i <= s.cfg.Net.N; i++ {
			if x, ok := s.sampleNode(ctx, i, at); ok {
				s.mu.Lock()
				s.samples = append(s.samples, x)
				s.mu.Unlock()
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// sampleNode reads node i's resources; false when it is not running or
// its /proc entry could not be read (it just died).
func (s *soak) sampleNode(ctx context.Context, i int, at time.Duration) (ResourceSample, bool) {
	pid := s.c.Pid(i)
	if pid == 0 {
		return ResourceSample{}, false
	}
	x := ResourceSample{At: at, Node: Name(i), Pid: pid, Goroutines: -1}
	var err error
	if x.RSS, err = procRSS(pid); err != nil {
		return x, false
	}
	if x.FDs, err = procFDs(pid); err != nil {
		return x, false
	}
	x.Conns = procConns(pid, 8080)
	mctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if m, err := s.pr.Metrics(mctx, i, "go_goroutines"); err == nil {
		if g, ok := m["go_goroutines"]; ok {
			x.Goroutines = int(g)
		}
	}
	return x, s.c.Pid(i) == pid
}

// procRSS is VmRSS of process pid, in bytes.
func procRSS(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return parseVmRSS(bufio.NewScanner(f))
}

// parseVmRSS finds "VmRSS:   1234 kB" in a /proc/<pid>/status.
func parseVmRSS(sc *bufio.Scanner) (int64, error) {
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("jepsen: VmRSS %q: %w", rest, err)
		}
		return kb << 10, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("jepsen: no VmRSS")
}

// procFDs is the number of open files of process pid.
func procFDs(pid int) (int, error) {
	es, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	return len(es), err
}

// procConns counts the established TCP connections on local port port in
// process pid's network namespace (/proc/<pid>/net/tcp and tcp6): a node
// alone in its namespace, so they are its callers' connections.
func procConns(pid, port int) int {
	n := 0
	for _, f := range []string{"tcp", "tcp6"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, f))
		if err == nil {
			n += countEstablished(string(b), port)
		}
	}
	return n
}

// countEstablished counts the lines of a /proc/net/tcp table whose local
// address has port port and whose state is ESTABLISHED (01).
func countEstablished(table string, port int) int {
	want := fmt.Sprintf(":%04X", port)
	n := 0
	for _, line := range strings.Split(table, "\n") {
		f := strings.Fields(line)
		if len(f) > 3 && strings.HasSuffix(f[1], want) && f[3] == "01" {
			n++
		}
	}
	return n
}
