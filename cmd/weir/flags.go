package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/weir-rl/weir/internal/textdist"
)

// newFlagSet returns a flag set that reports errors instead of exiting and
// prints nothing itself: parseCommand says what went wrong in a line or
// two, and prints the flags only when asked with --help.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parseCommand parses the flags of `weir <fs.Name()>`, each flag not on the
// command line taking its WEIR_ variable from getenv (nil: none). With -h
// or --help it prints synopsis and the flags to stdout and answers exit
// code 0; a mistyped flag or a bad value is one line on stderr, with the
// closest flag's name when there is one, and exit code 2. ok is true when
// the command should go on.
func parseCommand(fs *flag.FlagSet, args []string, getenv func(string) string, synopsis string, stdout, stderr io.Writer) (code int, ok bool) {
	var err error
	if getenv != nil {
		err = parseWithEnv(fs, args, getenv)
	} else {
		err = fs.Parse(args)
	}
	switch {
	case err == nil:
		return 0, true
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprintf(stdout, "usage: %s\n\nflags:\n", synopsis)
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
		if getenv != nil {
			fmt.Fprintln(stdout, "\nEvery flag has a WEIR_ environment variable: --http-addr is WEIR_HTTP_ADDR; the command line wins.")
		}
		return 0, false
	}
	msg := err.Error()
	if name, found := strings.CutPrefix(msg, "flag provided but not defined: -"); found {
		msg = "unknown flag --" + name
		if s := closestFlag(fs, name); s != "" {
			msg += " (did you mean --" + s + "?)"
		}
	}
	fmt.Fprintf(stderr, "weir %s: %s\nrun 'weir %s --help' for its flags\n", fs.Name(), msg, fs.Name())
	return 2, false
}

// closestFlag is the flag of fs nearest to name: within two edits, or
// having it as a prefix; "" when none is.
func closestFlag(fs *flag.FlagSet, name string) string {
	best, bestDist := "", 3
	fs.VisitAll(func(f *flag.Flag) {
		d := textdist.Levenshtein(name, f.Name)
		if strings.HasPrefix(f.Name, name) && len(name) >= 3 {
			d = min(d, 1)
		}
		if d < bestDist {
			best, bestDist = f.Name, d
		}
	})
	return best
}

// isHelp reports whether arg asks for help, as a subcommand's first
// argument.
func isHelp(arg string) bool {
	return arg == "help" || arg == "-h" || arg == "-help" || arg == "--help"
}
