package limits

import (
	"fmt"
	"slices"
)

// WithLimits returns a copy of f that also holds extra, the limits of
// another source (the node adds envoyproxy/ratelimit rules this way), with
// f's Version, InlineLimits and Source. Lookup finds both. A name in extra
// that f already has, or that repeats, is an error and f is unchanged. The
// extra limits must be valid; WithLimits does not check their fields. A nil
// f is an empty file.
func (f *File) WithLimits(extra []Limit) (*File, error) {
	out := &File{}
	if f != nil {
		out.Version, out.InlineLimits, out.Source, out.sum = f.Version, f.InlineLimits, f.Source, f.sum
		out.Limits = slices.Clip(f.Limits)
	}
	out.Limits = append(out.Limits, extra...)
	out.index = make(map[string]int, len(out.Limits))
	for i := range out.Limits {
		name := out.Limits[i].Name
		if _, dup := out.index[name]; dup {
			return nil, fmt.Errorf("limits: limit %q is defined twice", name)
		}
		out.index[name] = i
	}
	return out, nil
}
