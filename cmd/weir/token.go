package main

import (
	"bufio"
	"fmt"
	"io"
	"strings"

	"github.com/weir-rl/weir/auth"
)

// tokenCmd makes caller tokens and their tokens-file hashes:
//
//	weir token new            print a fresh random token and its sha256 line
//	weir token hash [TOKEN]   print the sha256 of TOKEN (read from stdin when absent)
//	weir token check FILE     validate a tokens file
func tokenCmd(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	const usage = "usage: weir token new | hash [TOKEN] (stdin when absent) | check FILE"
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	switch {
	case isHelp(args[0]):
		fmt.Fprintln(stdout, usage)
		return 0
	case args[0] == "new" && len(args) == 1:
		tok := auth.NewToken()
		fmt.Fprintf(stdout, "token:  %s\nsha256: %s\n", tok, auth.HashToken(tok))
		return 0
	case args[0] == "hash" && len(args) <= 2:
		tok := ""
		if len(args) == 2 {
			tok = args[1]
		} else {
			line, err := bufio.NewReader(io.LimitReader(stdin, 64<<10)).ReadString('\n')
			if err != nil && err != io.EOF {
				fmt.Fprintf(stderr, "weir token hash: %v\n", err)
				return 2
			}
			tok = strings.TrimSpace(line)
		}
		if tok == "" {
			fmt.Fprintln(stderr, "weir token hash: empty token")
			return 2
		}
		fmt.Fprintln(stdout, auth.HashToken(tok))
		return 0
	case args[0] == "check" && len(args) == 2:
		p, err := auth.Load(args[1])
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		fmt.Fprintf(stdout, "%s: ok: %d tokens\n", args[1], len(p.Tokens()))
		return 0
	}
	fmt.Fprintln(stderr, usage)
	return 2
}
