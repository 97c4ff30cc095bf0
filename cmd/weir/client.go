package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/weir-rl/weir/envoyconf"
	"github.com/weir-rl/weir/node/limits"
)

// take asks a node for one decision and prints its JSON answer. Exit code:
// 0 allowed, 1 denied, 2 error.
func take(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("take")
	timeout := fs.Duration("timeout", 5*time.Second, "request timeout")
	conn := addConnFlags(fs)
	if code, ok := parseCommand(fs, args, os.Getenv, "weir take [flags] LIMIT KEY [COST]", stdout, stderr); !ok {
		return code
	}
	rest := fs.Args()
	if len(rest) < 2 || len(rest) > 3 {
		fmt.Fprintln(stderr, "usage: weir take [--addr URL] LIMIT KEY [COST]")
		return 2
	}
	cost := int64(1)
	if len(rest) == 3 {
		c, err := strconv.ParseInt(rest[2], 10, 64)
		if err != nil {
			fmt.Fprintf(stderr, "weir take: cost %q is not an integer\n", rest[2])
			return 2
		}
		cost = c
	}
	body, _ := json.Marshal(map[string]any{"checks": []map[string]any{{"limit": rest[0], "key": rest[1], "cost": cost}}})
	client, err := conn.client(*timeout)
	if err != nil {
		fmt.Fprintf(stderr, "weir take: %v\n", err)
		return 2
	}
	resp, err := client.Post(conn.base()+"/v1/take", "application/json", bytes.NewReader(body))
	if err != nil {
		fmt.Fprintf(stderr, "weir take: %v\n", err)
		return 2
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		fmt.Fprintf(stderr, "weir take: %v\n", err)
		return 2
	}
	fmt.Fprintln(stdout, strings.TrimSpace(string(out)))
	if resp.StatusCode != http.StatusOK {
		return 2
	}
	var d struct {
		Allowed bool `json:"allowed"`
	}
	if err := json.Unmarshal(out, &d); err != nil {
		fmt.Fprintf(stderr, "weir take: bad answer: %v\n", err)
		return 2
	}
	if !d.Allowed {
		return 1
	}
	return 0
}

// validate checks a limits file, or an envoyproxy/ratelimit configuration
// directory (--envoy-config-dir's; a single such file with --envoy): exit 0
// and a summary when it is valid, exit 1 with line-numbered errors when not.
func validate(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("validate")
	envoy := fs.Bool("envoy", false, "the file is an envoyproxy/ratelimit configuration file")
	if code, ok := parseCommand(fs, args, nil, "weir validate [--envoy] FILE|DIR", stdout, stderr); !ok {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "usage: weir validate [--envoy] FILE|DIR")
		return 2
	}
	path := fs.Arg(0)
	if st, err := os.Stat(path); *envoy || (err == nil && st.IsDir()) {
		return validateEnvoy(path, err == nil && st.IsDir(), stdout, stderr)
	}
	f, err := limits.Load(path)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	fmt.Fprintf(stdout, "%s: ok: version %d, %d limits\n", path, f.Version, len(f.Limits))
	return 0
}

// validateEnvoy checks envoyproxy/ratelimit configuration: a directory as
// --envoy-config-dir loads it, or one file.
func validateEnvoy(path string, dir bool, stdout, stderr io.Writer) int {
	var c *envoyconf.Config
	var err error
	if dir {
		c, err = envoyconf.LoadDir(path)
	} else {
		var data []byte
		if data, err = os.ReadFile(path); err == nil {
			var f *envoyconf.File
			if f, err = envoyconf.Parse(path, data); err == nil {
				c, err = envoyconf.Build(f)
			}
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	fmt.Fprintf(stdout, "%s: ok: envoy config, %d domains, %d rules\n", path, len(c.Domains()), len(c.Rules()))
	return 0
}
