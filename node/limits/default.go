package limits

import (
	"bytes"
	_ "embed"
)

// defaultYAML is the embedded example limits file. It is never modified:
// DefaultYAML hands out copies.
//
//go:embed default.yaml
var defaultYAML []byte

// DefaultSource is the Source of the File that Default returns.
const DefaultSource = "embedded default"

// DefaultYAML returns the text of the embedded example limits file (the
// example of docs/architecture.md §4), as a new slice the caller may keep or
// modify. `weir serve` with no --limits serves it.
func DefaultYAML() []byte { return bytes.Clone(defaultYAML) }

// Default parses the embedded example limits file: version 3 with the rate
// limits export (token_bucket), login (gcra), search (sliding_window) and
// monthly (fixed_window) and the concurrency limit export-db. Each call
// returns a new *File with Source DefaultSource. It panics only if the
// embedded file is invalid, which the package's tests rule out.
func Default() *File {
	f, err := Parse(defaultYAML, DefaultSource)
	if err != nil {
		panic("limits: embedded default is invalid: " + err.Error())
	}
	return f
}
