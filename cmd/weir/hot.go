package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// hot prints the heaviest keys across the cluster, merged from every
// member's sketch by the node asked (GET /v1/cluster/hot).
func hot(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("hot")
	limit := fs.String("limit", "", "only this limit (default: every limit)")
	n := fs.Int("n", 10, "keys per limit (1-100)")
	asJSON := fs.Bool("json", false, "print the raw JSON answer")
	conn := addConnFlags(fs)
	if code, ok := parseCommand(fs, args, os.Getenv, "weir hot [flags]", stdout, stderr); !ok {
		return code
	}
	if fs.NArg() != 0 {
		fmt.Fprintln(stderr, "usage: weir hot [--addr URL] [--limit L] [--n N] [--json]")
		return 2
	}
	q := url.Values{"n": {strconv.Itoa(*n)}}
	if *limit != "" {
		q.Set("limit", *limit)
	}
	body, code, err := get(conn, conn.base()+"/v1/cluster/hot?"+q.Encode(), 5*time.Second)
	if err != nil {
		fmt.Fprintf(stderr, "weir hot: %v\n", err)
		return 2
	}
	if code != http.StatusOK || *asJSON {
		fmt.Fprintln(stdout, strings.TrimSpace(string(body)))
		if code != http.StatusOK {
			return 2
		}
		return 0
	}
	var ans struct {
		Nodes   []string `json:"nodes"`
		Missing []string `json:"missing"`
		Limits  []struct {
			Limit string `json:"limit"`
			Keys  []struct {
				Key    string `json:"key"`
				Cost   int64  `json:"cost"`
				Error  int64  `json:"error"`
				Denied int64  `json:"denied"`
			} `json:"keys"`
		} `json:"limits"`
	}
	if err := json.Unmarshal(body, &ans); err != nil {
		fmt.Fprintf(stderr, "weir hot: bad answer: %v\n", err)
		return 2
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "LIMIT\tKEY\tCOST\t±ERROR\tDENIED")
	for _, l := range ans.Limits {
		for _, k := range l.Keys {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\n", l.Limit, k.Key, k.Cost, k.Error, k.Denied)
		}
	}
	_ = tw.Flush()
	fmt.Fprintf(stdout, "merged from %s\n", strings.Join(ans.Nodes, ", "))
	if len(ans.Missing) > 0 {
		fmt.Fprintf(stdout, "warning: not included (unreachable): %s\n", strings.Join(ans.Missing, ", "))
	}
	return 0
}
