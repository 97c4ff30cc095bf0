package main

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/weir-rl/weir/internal/testwait"
	"github.com/weir-rl/weir/internal/weirbuild"
)

// buildWeir builds the weir binary into a temporary directory.
func buildWeir(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "weir")
	if err := weirbuild.Build(bin, ".", ""); err != nil {
		t.Fatal(err)
	}
	return bin
}

// proc is one running `weir serve` started by a test.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited and waitErr is set
	// waitErr is cmd.Wait's result; read it only after done is closed.
	waitErr error

	mu  sync.Mutex // guards log
	log []string
}

// startWeir runs bin with args in an environment without WEIR_ variables,
// records its log, and stops it (SIGTERM, then kill) when the test ends.
func startWeir(t *testing.T, bin string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "WEIR_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			p.mu.Lock()
			p.log = append(p.log, sc.Text())
			p.mu.Unlock()
		}
		p.waitErr = cmd.Wait() // after the pipe is drained, as Wait requires
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("log of %v:\n%s", args, strings.Join(p.logLines(), "\n"))
		}
	})
	return p
}

func (p *proc) logLines() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.log...)
}

// freePortPair returns a loopback port p such that TCP p and p+1 and UDP p
// are free right now: a gossip port whose peer port (p+1) is free too.
func freePortPair(t *testing.T) int {
	t.Helper()
	return pickPort(t, 2, func(p int) bool {
		return bindable("tcp", p) && bindable("tcp", p+1) && bindable("udp", p)
	})
}

// waitFor polls cond every 50 ms until it is true or d has passed
// (testwait.Until).
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	testwait.Until(t, d, 50*time.Millisecond, what, cond)
}

// aliveMembers asks the node at base for /v1/cluster and returns the names
// of its alive members, or nil when it does not answer.
func aliveMembers(c *http.Client, base string) []string {
	resp, err := c.Get(base + "/v1/cluster")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var info struct {
		Members []struct {
			Name  string `json:"name"`
			State string `json:"state"`
		} `json:"members"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&info) != nil {
		return nil
	}
	var names []string
	for _, m := range info.Members {
		if m.State == "alive" {
			names = append(names, m.Name)
		}
	}
	return names
}

// TestBinaryThreeNodesOneHost starts three `weir serve` processes on one
// host given only distinct --http-addr, --grpc-addr and --gossip-addr (and
// --join for the second and third): the peer port follows the gossip port
// and the node name the gossip port, so they form one 3-member cluster,
// and a take forwarded between them is decided by its owner. The second
// run adds a cluster secret, as the README's example does: gossip is
// encrypted and forwards travel over the TLS derived from the secret.
func TestBinaryThreeNodesOneHost(t *testing.T) {
	bin := buildWeir(t)
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("correct horse battery staple\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		extra []string
	}{{"only addresses", nil}, {"with a cluster secret", []string{"--cluster-secret-file", secret}}} {
		t.Run(tc.name, func(t *testing.T) { threeNodes(t, bin, tc.extra) })
	}
}

func threeNodes(t *testing.T, bin string, extra []string) {
	var bases []string
	var seed string
	for i := range 3 {
		httpAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
		grpcAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
		gossip := "127.0.0.1:" + strconv.Itoa(freePortPair(t))
		// A forward that misses its deadline is answered from the local
		// ceiling, which the test counts as a failed forward: the
		// default 50 ms (first forwards dial, TLS with a secret) is not
		// what two loaded cores can promise.
		args := append([]string{
			"serve", "--http-addr", httpAddr, "--grpc-addr", grpcAddr, "--gossip-addr", gossip,
			"--forward-timeout", "5s",
		}, extra...)
		if i == 0 {
			seed = gossip
		} else {
			args = append(args, "--join", seed)
		}
		startWeir(t, bin, args...)
		bases = append(bases, "http://"+httpAddr)
	}
	c := &http.Client{Timeout: 10 * time.Second} // longer than a forward may take
	defer c.CloseIdleConnections()
	for _, b := range bases {
		waitFor(t, 30*time.Second, b+" sees 3 alive members", func() bool { return len(aliveMembers(c, b)) == 3 })
	}
	// Every node answers a take on keys owned by each member: forwards use
	// the derived peer ports.
	for _, b := range bases {
		for k := range 8 {
			resp, err := c.Post(b+"/v1/take", "application/json",
				strings.NewReader(`{"checks":[{"limit":"export","key":"k`+strconv.Itoa(k)+`","cost":1}]}`))
			if err != nil {
				t.Fatal(err)
			}
			var d struct {
				Results []struct {
					Source string `json:"source"`
				} `json:"results"`
			}
			err = json.NewDecoder(resp.Body).Decode(&d)
			_ = resp.Body.Close()
			if err != nil || resp.StatusCode != http.StatusOK || len(d.Results) != 1 {
				t.Fatalf("take at %s: status %d, err %v", b, resp.StatusCode, err)
			}
			if d.Results[0].Source != "owner" {
				t.Fatalf("take at %s on k%d: source %q, want owner (a forward failed)", b, k, d.Results[0].Source)
			}
		}
	}
}
