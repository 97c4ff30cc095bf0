package resp_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// parseInfo reads INFO's text as redis-py and dashboards do: "# Section"
// headers and key:value lines.
func parseInfo(t *testing.T, text string) (sections []string, fields map[string]string) {
	t.Helper()
	fields = map[string]string{}
	for line := range strings.SplitSeq(strings.TrimSpace(text), "\r\n") {
		switch {
		case line == "":
		case strings.HasPrefix(line, "# "):
			sections = append(sections, strings.TrimPrefix(line, "# "))
		default:
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				t.Fatalf("INFO line %q is neither a header nor key:value", line)
			}
			fields[k] = v
		}
	}
	return sections, fields
}

// TestInfo: INFO answers every section a client or a Redis dashboard
// reads, over RESP2 (a bulk string) and RESP3 (a verbatim string), and
// INFO section answers that section only.
func TestInfo(t *testing.T) {
	rn := startNode(t, testLimits, nil)
	ctx := context.Background()
	for _, proto := range []int{2, 3} {
		t.Run(fmt.Sprintf("RESP%d", proto), func(t *testing.T) {
			c := rn.client(t, func(o *redis.Options) { o.Protocol = proto })
			text, err := c.Info(ctx).Result()
			if err != nil {
				t.Fatalf("INFO: %v", err)
			}
			sections, f := parseInfo(t, text)
			if got := strings.Join(sections, ","); got != "Server,Clients,Memory,Persistence,Stats,Replication,CPU,Cluster,Keyspace" {
				t.Errorf("sections = %s", got)
			}
			for k, want := range map[string]string{
				"redis_version": "7.2.0", "weir_version": "0", "redis_mode": "standalone", "role": "master",
				"cluster_enabled": "0", "loading": "0", "maxmemory_policy": "noeviction",
			} {
				if f[k] != want {
					t.Errorf("%s = %q, want %q", k, f[k], want)
				}
			}
			for _, k := range []string{"connected_clients", "total_commands_processed", "used_memory", "uptime_in_seconds", "process_id", "tcp_port", "used_cpu_user"} {
				if n, err := strconv.ParseFloat(f[k], 64); err != nil || n < 0 {
					t.Errorf("%s = %q, want a number", k, f[k])
				}
			}
			if n, _ := strconv.Atoi(f["connected_clients"]); n < 1 {
				t.Errorf("connected_clients = %q with this client connected", f["connected_clients"])
			}
			if f["tcp_port"] != rn.addr[strings.LastIndex(rn.addr, ":")+1:] {
				t.Errorf("tcp_port = %q, serving on %s", f["tcp_port"], rn.addr)
			}
			before, _ := strconv.Atoi(f["total_commands_processed"])
			for range 5 {
				ints(t, c, "WEIR.TAKE", "export", "info")
			}
			text, err = c.Info(ctx, "stats").Result()
			if err != nil {
				t.Fatal(err)
			}
			sections, f = parseInfo(t, text)
			if len(sections) != 1 || sections[0] != "Stats" {
				t.Fatalf("INFO stats sections = %v", sections)
			}
			if after, _ := strconv.Atoi(f["total_commands_processed"]); after < before+6 {
				t.Errorf("total_commands_processed %d, then %d after 5 takes and an INFO", before, after)
			}
		})
	}
}
