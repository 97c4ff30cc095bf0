package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"
)

// status prints a node's view of the cluster: members, states, limits
// versions, the ring epoch and, with --limit and --key, the key's owner.
func status(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("status")
	limit := fs.String("limit", "", "with --key: name the owner of this limit's bucket")
	key := fs.String("key", "", "with --limit: name the owner of this key's bucket")
	asJSON := fs.Bool("json", false, "print the raw JSON answer")
	conn := addConnFlags(fs)
	if code, ok := parseCommand(fs, args, os.Getenv, "weir status [flags]", stdout, stderr); !ok {
		return code
	}
	u := conn.base() + "/v1/cluster"
	if *limit != "" || *key != "" {
		u += "?" + url.Values{"limit": {*limit}, "key": {*key}}.Encode()
	}
	body, code, err := get(conn, u, 5*time.Second)
	if err != nil {
		fmt.Fprintf(stderr, "weir status: %v\n", err)
		return 2
	}
	if code != http.StatusOK || *asJSON {
		fmt.Fprintln(stdout, strings.TrimSpace(string(body)))
		if code != http.StatusOK {
			return 2
		}
		return 0
	}
	var info struct {
		Node    string `json:"node"`
		Epoch   uint64 `json:"epoch"`
		Owner   string `json:"owner"`
		Members []struct {
			Name          string `json:"name"`
			Addr          string `json:"addr"`
			State         string `json:"state"`
			LimitsVersion int64  `json:"limits_version"`
		} `json:"members"`
	}
	if err := json.Unmarshal(body, &info); err != nil {
		fmt.Fprintf(stderr, "weir status: bad answer: %v\n", err)
		return 2
	}
	fmt.Fprintf(stdout, "node %s, ring epoch %d\n", info.Node, info.Epoch)
	versions := map[int64]bool{}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tADDR\tSTATE\tLIMITS")
	for _, m := range info.Members {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\n", m.Name, m.Addr, m.State, m.LimitsVersion)
		versions[m.LimitsVersion] = true
	}
	_ = tw.Flush()
	if len(versions) > 1 {
		fmt.Fprintln(stdout, "warning: members run different limits versions")
	}
	if info.Owner != "" {
		fmt.Fprintf(stdout, "owner of %s/%s: %s\n", *limit, *key, info.Owner)
	}
	return 0
}

// healthcheck exits 0 when the node answers /readyz with 200, 1 otherwise.
// It is the container health check: a scratch image has no curl.
func healthcheck(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("healthcheck")
	path := fs.String("path", "/readyz", "path to ask: /readyz (joined, has a ring) or /healthz (process up)")
	conn := addConnFlags(fs)
	if code, ok := parseCommand(fs, args, os.Getenv, "weir healthcheck [flags]", stdout, stderr); !ok {
		return code
	}
	body, code, err := get(conn, conn.base()+*path, 2*time.Second)
	if err != nil || code != http.StatusOK {
		fmt.Fprintln(stderr, "weir healthcheck: "+notReadyMessage(code, body, err))
		return 1
	}
	fmt.Fprintln(stdout, "ok")
	return 0
}

// notReadyMessage says why a health check failed: the request's error, or
// the reason the node's answer names ({"status","reason"} from /readyz),
// or, for an answer in another shape, its status and its first line.
func notReadyMessage(code int, body []byte, err error) string {
	if err != nil {
		return "no answer: " + err.Error()
	}
	var b struct {
		Status string `json:"status"`
		Reason string `json:"reason"`
	}
	if json.Unmarshal(body, &b) == nil && b.Status != "" {
		msg := strings.ReplaceAll(b.Status, "_", " ")
		if b.Reason != "" {
			msg += ": " + b.Reason
		}
		return fmt.Sprintf("%s (status %d)", msg, code)
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(body)), "\n")
	if len(line) > 200 {
		line = line[:200] + "..."
	}
	if line == "" {
		return fmt.Sprintf("not ready (status %d, empty body)", code)
	}
	return fmt.Sprintf("not ready (status %d): %s", code, line)
}

func get(conn *connFlags, u string, timeout time.Duration) ([]byte, int, error) {
	c, err := conn.client(timeout)
	if err != nil {
		return nil, 0, err
	}
	resp, err := c.Get(u)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return body, resp.StatusCode, err
}

// forget removes a failed member from a node's known members, so it no
// longer counts in the majority rule or divides local ceilings.
func forget(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("forget")
	conn := addConnFlags(fs)
	if code, ok := parseCommand(fs, args, os.Getenv, "weir forget [flags] NAME", stdout, stderr); !ok {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "usage: weir forget [--addr URL] NAME")
		return 2
	}
	req, err := http.NewRequest(http.MethodDelete, conn.base()+"/v1/cluster/members/"+url.PathEscape(fs.Arg(0)), nil)
	if err != nil {
		fmt.Fprintf(stderr, "weir forget: %v\n", err)
		return 2
	}
	c, err := conn.client(5 * time.Second)
	if err != nil {
		fmt.Fprintf(stderr, "weir forget: %v\n", err)
		return 2
	}
	resp, err := c.Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "weir forget: %v\n", err)
		return 2
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	switch resp.StatusCode {
	case http.StatusNoContent:
		fmt.Fprintf(stdout, "forgot %s\n", fs.Arg(0))
		return 0
	default:
		fmt.Fprintln(stderr, strings.TrimSpace(string(body)))
		return 1
	}
}
