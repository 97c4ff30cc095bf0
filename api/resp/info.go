package resp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/redcon"
)

// redisVersion is the Redis release whose protocol and replies Weir's
// RESP endpoint follows (COMMAND's ten-element entries, HELLO, the
// CLIENT subcommands); INFO reports it as redis_version because clients
// and dashboards pick features by it.
const redisVersion = "7.2.0"

// stats is what INFO reports about the server itself. commands is counted
// by dispatch; the sample is the previous INFO's, for
// instantaneous_ops_per_sec.
type stats struct {
	started  time.Time
	runID    string
	commands atomic.Int64 // commands read, answered or refused

	mu        sync.Mutex // guards sampledAt and sampled
	sampledAt time.Time
	sampled   int64
}

// start records the server's start and picks its run id.
func (st *stats) start(now time.Time) {
	var b [20]byte
	_, _ = rand.Read(b[:])
	st.started, st.sampledAt, st.runID = now, now, hex.EncodeToString(b[:])
}

// opsPerSec is the command rate since the previous call (the first call:
// since the start), and records this one as the next call's start.
func (st *stats) opsPerSec(now time.Time, n int64) int64 {
	st.mu.Lock()
	defer st.mu.Unlock()
	d := now.Sub(st.sampledAt)
	ops := int64(0)
	if d > 0 {
		ops = int64(float64(n-st.sampled) / d.Seconds())
	}
	st.sampledAt, st.sampled = now, n
	return ops
}

// infoCommand is INFO's entry in the command table.
func (s *Server) infoCommand() *command {
	return &command{
		name: "info", arity: -1, flags: []string{"loading", "stale"}, group: "server",
		summary: "Server, clients, memory, stats, replication, CPU, cluster and keyspace sections, as Redis answers them", run: s.info,
	}
}

// infoSections are INFO's sections in Redis's order.
var infoSections = []string{"server", "clients", "memory", "persistence", "stats", "replication", "cpu", "cluster", "keyspace"}

// info serves INFO [section ...]: "key:value" lines under "# Section"
// headers, as Redis answers them (a bulk string, in RESP3 a verbatim
// string). No section, "default", "all" or "everything" is every section;
// an unknown name adds nothing.
func (s *Server) info(_ context.Context, st *session, args [][]byte, w *redcon.Writer) {
	want := map[string]bool{}
	for _, a := range args[1:] {
		switch n := strings.ToLower(string(a)); n {
		case "default", "all", "everything":
			for _, sec := range infoSections {
				want[sec] = true
			}
		default:
			want[n] = true
		}
	}
	var b strings.Builder
	now := time.Now()
	for _, sec := range infoSections {
		if len(args) > 1 && !want[sec] {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\r\n")
		}
		b.WriteString("# " + infoTitle(sec) + "\r\n")
		for _, kv := range s.infoSection(sec, now) {
			b.WriteString(kv[0] + ":" + kv[1] + "\r\n")
		}
	}
	if st.proto == 3 {
		txt := "txt:" + b.String()
		w.WriteRaw([]byte("=" + strconv.Itoa(len(txt)) + "\r\n" + txt + "\r\n"))
		return
	}
	w.WriteBulkString(b.String())
}

// infoSection is one section's fields, in order.
func (s *Server) infoSection(sec string, now time.Time) [][2]string {
	i64 := func(n int64) string { return strconv.FormatInt(n, 10) }
	switch sec {
	case "server":
		up := now.Sub(s.stats.started)
		return [][2]string{
			{"redis_version", redisVersion},
			{"weir_version", s.cfg.Version},
			{"redis_mode", "standalone"},
			{"os", runtime.GOOS + " " + runtime.GOARCH},
			{"arch_bits", strconv.Itoa(strconv.IntSize)},
			{"go_version", runtime.Version()},
			{"process_id", strconv.Itoa(os.Getpid())},
			{"run_id", s.stats.runID},
			{"tcp_port", s.port()},
			{"server_time_usec", i64(now.UnixMicro())},
			{"uptime_in_seconds", i64(int64(up / time.Second))},
			{"uptime_in_days", i64(int64(up / (24 * time.Hour)))},
		}
	case "clients":
		s.mu.Lock()
		n := len(s.conns)
		s.mu.Unlock()
		return [][2]string{{"connected_clients", strconv.Itoa(n)}, {"blocked_clients", "0"}}
	case "memory":
		return memorySection()
	case "persistence":
		// Buckets live in memory only; there is nothing to load or save.
		return [][2]string{{"loading", "0"}, {"rdb_changes_since_last_save", "0"}, {"aof_enabled", "0"}}
	case "stats":
		n := s.stats.commands.Load()
		return [][2]string{
			{"total_connections_received", i64(s.ids.Load())},
			{"total_commands_processed", i64(n)},
			{"instantaneous_ops_per_sec", i64(s.stats.opsPerSec(now, n))},
			{"rejected_connections", "0"},
			{"expired_keys", "0"},
			{"evicted_keys", "0"},
			{"keyspace_hits", "0"},
			{"keyspace_misses", "0"},
		}
	case "replication":
		return [][2]string{{"role", "master"}, {"connected_slaves", "0"}}
	case "cpu":
		user, sys, ok := cpuSeconds()
		if !ok {
			return nil
		}
		return [][2]string{{"used_cpu_sys", fmt.Sprintf("%.6f", sys)}, {"used_cpu_user", fmt.Sprintf("%.6f", user)}}
	case "cluster":
		// A Weir cluster is not a Redis Cluster: every node answers every
		// key (it forwards to the owner), so clients must not redirect.
		return [][2]string{{"cluster_enabled", "0"}}
	}
	return nil // keyspace: Weir's buckets are not keys a client can read
}

// port is the port of the listener Serve accepts on, "0" before Serve.
func (s *Server) port() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ports := make([]string, 0, len(s.lns))
	for ln := range s.lns {
		if _, p, err := net.SplitHostPort(ln.Addr().String()); err == nil {
			ports = append(ports, p)
		}
	}
	if len(ports) == 0 {
		return "0"
	}
	slices.Sort(ports)
	return ports[0]
}

// memorySection reads the Go runtime's memory figures (without stopping
// the world, as runtime.ReadMemStats would): used_memory is the heap in
// use, used_memory_rss what the runtime holds from the OS and has not
// released, an upper estimate of the resident set.
func memorySection() [][2]string {
	samples := []metrics.Sample{
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/total:bytes"},
		{Name: "/memory/classes/heap/released:bytes"},
	}
	metrics.Read(samples)
	val := func(i int) uint64 {
		if samples[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return samples[i].Value.Uint64()
	}
	used, rss := val(0), val(1)-min(val(1), val(2))
	ratio := "0.00"
	if used > 0 {
		ratio = fmt.Sprintf("%.2f", float64(rss)/float64(used))
	}
	u := func(n uint64) string { return strconv.FormatUint(n, 10) }
	return [][2]string{
		{"used_memory", u(used)},
		{"used_memory_human", humanBytes(used)},
		{"used_memory_rss", u(rss)},
		{"used_memory_rss_human", humanBytes(rss)},
		{"maxmemory", "0"},
		{"maxmemory_human", "0B"},
		{"maxmemory_policy", "noeviction"},
		{"mem_fragmentation_ratio", ratio},
	}
}

// humanBytes writes n as Redis's INFO does: 512B, 1.50K, 12.34M, 1.00G.
func humanBytes(n uint64) string {
	const k = 1024
	switch {
	case n < k:
		return strconv.FormatUint(n, 10) + "B"
	case n < k*k:
		return fmt.Sprintf("%.2fK", float64(n)/k)
	case n < k*k*k:
		return fmt.Sprintf("%.2fM", float64(n)/(k*k))
	default:
		return fmt.Sprintf("%.2fG", float64(n)/(k*k*k))
	}
}

// infoTitle is a section's header as Redis writes it: "Server", "CPU".
func infoTitle(sec string) string {
	if sec == "cpu" {
		return "CPU"
	}
	return strings.ToUpper(sec[:1]) + sec[1:]
}
