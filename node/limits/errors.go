package limits

import (
	"errors"
	"strconv"
	"strings"
)

// ErrInvalid is matched (with errors.Is) by every error Parse and Load
// return for a file that was read but is not a valid limits file.
var ErrInvalid = errors.New("limits: invalid limits file")

// Error is one problem found in a limits file, at a line.
type Error struct {
	// Line is the 1-based line of the problem; 0 when it concerns the
	// whole file (an empty file, say).
	Line int
	// Msg says what is wrong, naming the limit when there is one:
	// `limit "export": "capacity" must be >= 1, got 0`.
	Msg string
}

// Error returns "line N: Msg", or Msg alone when Line is 0.
func (e *Error) Error() string {
	if e.Line <= 0 {
		return e.Msg
	}
	return "line " + strconv.Itoa(e.Line) + ": " + e.Msg
}

// FileError is every problem found in one limits file, sorted by line. It
// is what Parse and Load return for an invalid file; errors.Is(err,
// ErrInvalid) reports true for it, and errors.As reaches each *Error.
type FileError struct {
	// Source is the path of the file, or "embedded default"; it may be empty.
	Source string
	// Errors are the problems, at least one, in line order.
	Errors []*Error
}

// Error returns one problem per line, each as "Source: line N: Msg", so that
// `weir validate` can print it as it is.
func (e *FileError) Error() string {
	var b strings.Builder
	for i, p := range e.Errors {
		if i > 0 {
			b.WriteByte('\n')
		}
		if e.Source != "" {
			b.WriteString(e.Source)
			b.WriteString(": ")
		}
		b.WriteString(p.Error())
	}
	return b.String()
}

// Is reports whether target is ErrInvalid.
func (e *FileError) Is(target error) bool { return target == ErrInvalid }

// Unwrap returns the individual problems.
func (e *FileError) Unwrap() []error {
	errs := make([]error, len(e.Errors))
	for i, p := range e.Errors {
		errs[i] = p
	}
	return errs
}
