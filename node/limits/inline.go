package limits

import (
	"errors"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Bounds on the text fields of an inline limit, checked before parsing.
const (
	// MaxInlineFieldLen is the longest algorithm, rate or window string an
	// inline limit may carry, in bytes.
	MaxInlineFieldLen = 32
)

// Inline is a rate limit's parameters as a caller sends them with a check
// when the file sets inline_limits: true. The fields are those of a rate
// limit in the file, with the same names and syntax; a zero number or an
// empty string is a field not given:
//
//	Algorithm  token_bucket (when empty) | gcra | sliding_window | fixed_window
//	Capacity   token_bucket's capacity
//	Burst      gcra's burst
//	Limit      sliding_window's and fixed_window's limit
//	Rate       "N/period" (token_bucket, gcra)
//	Window     a duration (sliding_window) or a calendar unit (fixed_window)
//
// Inline is comparable, so a caller may cache ParseInline's answers by it.
type Inline struct {
	Algorithm string
	Capacity  int64
	Burst     int64
	Limit     int64
	Rate      string
	Window    string
}

// ParseInline validates an inline limit named name exactly as Parse
// validates a rate limit of the file: it builds the entry the caller would
// have written and runs the file's own checks on it (name, algorithm, the
// fields that belong to it, their ranges, bucket.Limit.Validate). The
// result has Inline set and the default policy (on_owner_unreachable:
// local). An invalid limit is an error wrapping ErrInvalid whose message
// names the problem like the file's do, without a line:
//
//	limit "x": "capacity" must be >= 1, got 0
//
// ParseInline does not consult a File: whether inline limits are allowed,
// and whether name is taken by the file, is the caller's to check.
func ParseInline(name string, in Inline) (Limit, error) {
	for _, f := range [...]struct{ field, v string }{{"algorithm", in.Algorithm}, {"rate", in.Rate}, {"window", in.Window}} {
		if len(f.v) > MaxInlineFieldLen {
			return Limit{}, inlineError([]*Error{{Msg: "inline " + f.field + " is " + strconv.Itoa(len(f.v)) +
				" bytes, over the " + strconv.Itoa(MaxInlineFieldLen) + "-byte maximum"}})
		}
	}
	// Lines as the entry would have in a file (the item on line 1, one
	// field a line), so that problems come out in the file's order.
	str := func(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s} }
	m := &yaml.Node{Kind: yaml.MappingNode, Line: 1}
	add := func(k string, v *yaml.Node) {
		line := 2 + len(m.Content)/2
		kn := str(k)
		kn.Line, v.Line = line, line
		m.Content = append(m.Content, kn, v)
	}
	add("name", str(name))
	if in.Algorithm != "" {
		add("algorithm", str(in.Algorithm))
	}
	for _, f := range [...]struct {
		field string
		v     int64
	}{{"capacity", in.Capacity}, {"burst", in.Burst}, {"limit", in.Limit}} {
		if f.v != 0 {
			add(f.field, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.FormatInt(f.v, 10)})
		}
	}
	if in.Rate != "" {
		add("rate", str(in.Rate))
	}
	if in.Window != "" {
		add("window", str(in.Window))
	}
	p := &parser{}
	l := p.limit(m, 0)
	if len(p.errs) > 0 {
		slices.SortStableFunc(p.errs, func(a, b *Error) int { return a.Line - b.Line })
		return Limit{}, inlineError(p.errs)
	}
	if l.Kind != KindRate { // cannot happen: no kind field is built
		return Limit{}, inlineError([]*Error{{Msg: "an inline limit must be a rate limit"}})
	}
	l.Inline = true
	l.Line = 0
	return l, nil
}

// InlineError is why ParseInline rejected an inline limit: the same
// messages Parse gives for the same entry in a file, without lines.
type InlineError struct {
	Errors []*Error
}

// Error returns the problems joined by "; ".
func (e *InlineError) Error() string {
	msgs := make([]string, len(e.Errors))
	for i, p := range e.Errors {
		// The file labels a limit without a valid name by its position,
		// which means nothing for an inline limit.
		msgs[i] = strings.TrimPrefix(p.Msg, "limits[0]: ")
	}
	return strings.Join(msgs, "; ")
}

// Is reports whether target is ErrInvalid.
func (e *InlineError) Is(target error) bool { return target == ErrInvalid }

func inlineError(errs []*Error) error {
	if len(errs) == 0 {
		return errors.New("limits: invalid inline limit")
	}
	return &InlineError{Errors: errs}
}
