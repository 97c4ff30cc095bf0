package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// leaseCmd acquires, renews or releases a concurrency permit over HTTP and
// prints the node's JSON answer. Exit: 0 done, 1 refused or not found, 2 error.
func leaseCmd(args []string, stdout, stderr io.Writer) int {
	const usage = "usage: weir lease acquire [--ttl D] [--wait D] LIMIT KEY | renew [--ttl D] ID | release ID (weir lease acquire --help for the flags)"
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	if isHelp(args[0]) {
		fmt.Fprintln(stdout, usage)
		return 0
	}
	fs := newFlagSet("lease " + args[0])
	ttl := fs.Duration("ttl", 0, "lease lifetime (0: the limit's lease_ttl)")
	wait := fs.Duration("wait", 0, "acquire: how long to queue for a permit")
	holder := fs.String("holder", "", "acquire: who holds the lease, for logs")
	conn := addConnFlags(fs)
	if code, ok := parseCommand(fs, args[1:], os.Getenv, "weir lease acquire [flags] LIMIT KEY | renew [flags] ID | release [flags] ID", stdout, stderr); !ok {
		return code
	}
	base := conn.base()
	rest := fs.Args()
	var method, u string
	var body any
	switch {
	case args[0] == "acquire" && len(rest) == 2:
		method, u = http.MethodPost, base+"/v1/leases"
		body = map[string]any{"limit": rest[0], "key": rest[1], "holder": *holder, "ttl_ms": ttl.Milliseconds(), "wait_ms": wait.Milliseconds()}
	case args[0] == "renew" && len(rest) == 1:
		method, u = http.MethodPost, base+"/v1/leases/"+url.PathEscape(rest[0])+"/renew"
		body = map[string]any{"ttl_ms": ttl.Milliseconds()}
	case args[0] == "release" && len(rest) == 1:
		method, u = http.MethodDelete, base+"/v1/leases/"+url.PathEscape(rest[0])
	default:
		fmt.Fprintln(stderr, "usage: weir lease acquire [--ttl D] [--wait D] LIMIT KEY | renew [--ttl D] ID | release ID")
		return 2
	}
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, u, rd)
	if err != nil {
		fmt.Fprintf(stderr, "weir lease: %v\n", err)
		return 2
	}
	c, err := conn.client(*wait + 5*time.Second)
	if err != nil {
		fmt.Fprintf(stderr, "weir lease: %v\n", err)
		return 2
	}
	resp, err := c.Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "weir lease: %v\n", err)
		return 2
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if s := strings.TrimSpace(string(out)); s != "" {
		fmt.Fprintln(stdout, s)
	}
	switch resp.StatusCode {
	case http.StatusOK, http.StatusCreated, http.StatusNoContent:
		return 0
	case http.StatusTooManyRequests, http.StatusNotFound:
		return 1
	default:
		return 2
	}
}
