// Command weir is the Weir rate limiter: one binary that serves decisions,
// asks a node for them and checks limits files.
//
//	weir serve [flags]          run a node
//	weir take LIMIT KEY [COST]  ask a node for a decision (exit 0 allowed, 1 denied)
//	weir validate FILE|DIR      check a limits file or an envoy config dir (exit 1 with line-numbered errors)
//	weir status                 a node's view of the cluster
//	weir hot                    the heaviest keys across the cluster
//	weir lease acquire|renew|release ...  concurrency permits
//	weir healthcheck            exit 0 when the node is ready
//	weir token new|hash|check   caller tokens and the tokens file
//	weir version                print the version, commit and build time
//
// Every flag has a WEIR_ environment variable: --http-addr is WEIR_HTTP_ADDR.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run dispatches a subcommand and returns the process exit code.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "serve":
		return serve(rest, stdout, stderr)
	case "lease":
		return leaseCmd(rest, stdout, stderr)
	case "take":
		return take(rest, stdout, stderr)
	case "validate":
		return validate(rest, stdout, stderr)
	case "status":
		return status(rest, stdout, stderr)
	case "forget":
		return forget(rest, stdout, stderr)
	case "hot":
		return hot(rest, stdout, stderr)
	case "healthcheck":
		return healthcheck(rest, stdout, stderr)
	case "token":
		return tokenCmd(rest, os.Stdin, stdout, stderr)
	case "version", "--version", "-v":
		fmt.Fprintln(stdout, currentBuild())
		return 0
	case "help", "--help", "-help", "-h":
		usage(stdout)
		return 0
	default:
		fmt.Fprintf(stderr, "weir: unknown command %q\n", cmd)
		usage(stderr)
		return 2
	}
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage: weir <command> [flags]

commands:
  serve      run a node (weir serve --help for flags)
  take       ask a node for a decision: weir take [--addr URL] LIMIT KEY [COST]
  status     a node's view of the cluster: weir status [--addr URL] [--limit L --key K]
  lease      acquire, renew or release a concurrency permit (weir lease --help)
  hot        the heaviest keys across the cluster: weir hot [--addr URL] [--limit L] [--n N]
  forget     drop a failed member from the known members: weir forget [--addr URL] NAME
  healthcheck  exit 0 when the node is ready (container health checks)
  validate   check a limits file or an envoyproxy/ratelimit config dir: weir validate [--envoy] FILE|DIR
  token      caller tokens: weir token new | hash [TOKEN] | check FILE
  version    print the version, commit and build time
`)
}

// envName is the environment variable of a flag: http-addr → WEIR_HTTP_ADDR.
func envName(flagName string) string {
	return "WEIR_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// parseWithEnv parses args; a flag not given on the command line takes its
// WEIR_ environment variable when that is set. The command line wins.
func parseWithEnv(fs *flag.FlagSet, args []string, getenv func(string) string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] || err != nil {
			return
		}
		if v := getenv(envName(f.Name)); v != "" {
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("%s: %w", envName(f.Name), e)
			}
		}
	})
	return err
}
