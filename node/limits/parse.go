package limits

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/weir-rl/weir/bucket"
)

// Bounds on a limits file and its fields.
const (
	// MaxFileSize is the largest limits file Parse and Load accept: 4 MiB.
	MaxFileSize = 4 << 20
	// MaxNameLen is the longest limit name, in bytes.
	MaxNameLen = 64
	// MaxPermits is the most permits a concurrency limit may have.
	MaxPermits = 1_000_000_000
	// MinLeaseTTL is the shortest lease_ttl.
	MinLeaseTTL = time.Millisecond
	// MaxLeaseTTLLimit is the longest lease_ttl and max_lease_ttl: 7 days.
	MaxLeaseTTLLimit = 7 * 24 * time.Hour
	// DefaultMaxLeaseTTLFactor sets max_lease_ttl when the file omits it:
	// this many times lease_ttl, capped at MaxLeaseTTLLimit.
	DefaultMaxLeaseTTLFactor = 10
	// MaxQueueLength is the longest queue a concurrency limit may have.
	MaxQueueLength = 1_000_000
	// MaxQueueWait is the longest queue.max_wait; the front ends clamp a
	// caller's wait to it (api.MaxLeaseWait, the same hour).
	MaxQueueWait = time.Hour
)

// The field names of the file, by where they may appear. These tables are
// never modified.
var (
	topFields    = []string{"version", "limits", "inline_limits"}
	commonFields = []string{"name", "kind", "algorithm", "on_owner_unreachable", "shadow"}
	concFields   = []string{"permits", "lease_ttl", "max_lease_ttl", "queue", "strict"}
	queueFields  = []string{"length", "max_wait"}
	allotFields  = []string{"allotments", "allotment_threshold", "allotment_horizon", "allotment_ttl"}
	limitFields  = slices.Concat(commonFields, concFields, allotFields, []string{"capacity", "rate", "burst", "limit", "window"})
	// algFields lists each algorithm's own fields, both required.
	algFields = map[bucket.Algorithm][2]string{
		bucket.TokenBucket:   {"capacity", "rate"},
		bucket.GCRA:          {"rate", "burst"},
		bucket.SlidingWindow: {"limit", "window"},
		bucket.FixedWindow:   {"limit", "window"},
	}
)

// Load reads the limits file at path and parses it with the path as its
// Source. A file that cannot be read is an error that is not ErrInvalid; a
// file over MaxFileSize or not valid is a *FileError.
func Load(path string) (*File, error) {
	data, err := readLimited(path)
	if err != nil {
		return nil, errorf("read limits file: %w", err)
	}
	return Parse(data, path)
}

// Parse parses and validates a limits file. source names it in messages
// (a path, or "embedded default") and becomes File.Source.
//
// Parsing is strict: an unknown field, a field that does not belong to the
// limit's kind or algorithm, a repeated field, a value of the wrong type or
// out of range, a missing required field and a repeated limit name are all
// errors. Parse does not stop at the first problem: an invalid file yields a
// *FileError listing every problem found, each with its line. Parse never
// panics, whatever the input.
func Parse(data []byte, source string) (*File, error) {
	p := &parser{}
	f := p.file(data)
	if len(p.errs) > 0 {
		slices.SortStableFunc(p.errs, func(a, b *Error) int { return a.Line - b.Line })
		return nil, &FileError{Source: source, Errors: p.errs}
	}
	f.Source = source
	f.sum = sha256.Sum256(data)
	return f, nil
}

// parser collects the problems of one file.
type parser struct {
	errs []*Error
}

func (p *parser) errorf(line int, format string, args ...any) {
	p.errs = append(p.errs, &Error{Line: line, Msg: fmt.Sprintf(format, args...)})
}

// file parses a whole file. The result is meaningful only when p.errs is empty.
func (p *parser) file(data []byte) *File {
	if len(data) > MaxFileSize {
		p.errorf(0, "file is larger than %d bytes", MaxFileSize)
		return nil
	}
	root := p.document(data)
	if root == nil {
		return nil
	}
	f := &File{}
	fs := p.fields(root, "", topFields)
	if v, ok := fs.m["version"]; !ok {
		p.errorf(root.Line, `missing "version": add a version number, and bump it on every change`)
	} else if n, ok := p.int(v.val, "", "version"); ok {
		if n < 0 {
			p.errorf(v.val.Line, `"version" must be >= 0, got %d`, n)
		}
		f.Version = n
	}
	if v, ok := fs.m["inline_limits"]; ok {
		f.InlineLimits, _ = p.bool(v.val, "", "inline_limits")
	}
	limitsLine := root.Line
	if v, ok := fs.m["limits"]; ok {
		limitsLine = v.key.Line
		f.Limits = p.limits(deref(v.val))
	}
	if len(f.Limits) == 0 && !f.InlineLimits && len(p.errs) == 0 {
		p.errorf(limitsLine, "no limits defined and inline_limits is false: every request would be refused")
	}
	p.index(f)
	return f
}

// document decodes data, which must be one YAML document holding a
// mapping, and returns that mapping; nil when it reported why not. The
// document is decoded into a yaml.Node tree and walked by hand: stricter
// than KnownFields (which cannot see fields that belong to another
// algorithm), and every value keeps its line.
func (p *parser) document(data []byte) *yaml.Node {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			p.errorf(0, "file is empty: want version and limits")
		} else {
			p.yamlError(err)
		}
		return nil
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
	case err != nil:
		p.yamlError(err)
		return nil
	default:
		p.errorf(extra.Line, "a second YAML document: a limits file is one document (remove the ---)")
		return nil
	}
	root := &doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			p.errorf(0, "file is empty: want version and limits")
			return nil
		}
		root = root.Content[0]
	}
	root = deref(root)
	if isNull(root) {
		p.errorf(root.Line, "file is empty: want version and limits")
		return nil
	}
	if root.Kind != yaml.MappingNode {
		p.errorf(root.Line, "the file must be a mapping with version and limits, got %s", describe(root))
		return nil
	}

	return root
}

// index builds f's name index and reports duplicate names.
func (p *parser) index(f *File) {
	f.index = make(map[string]int, len(f.Limits))
	first := make(map[string]int, len(f.Limits))
	for i := range f.Limits {
		l := &f.Limits[i]
		if l.Name == "" {
			continue // already reported
		}
		if line, dup := first[l.Name]; dup {
			p.errorf(l.Line, "duplicate limit name %q (first defined on line %d)", l.Name, line)
			continue
		}
		first[l.Name] = l.Line
		f.index[l.Name] = i
	}
}

// limits parses the limits list.
func (p *parser) limits(n *yaml.Node) []Limit {
	if isNull(n) {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		p.errorf(n.Line, `"limits" must be a list of limits, got %s`, describe(n))
		return nil
	}
	out := make([]Limit, 0, len(n.Content))
	for i, item := range n.Content {
		out = append(out, p.limit(deref(item), i))
	}
	return out
}

// limit parses one item of the limits list. Its Name is left empty when the
// name is missing or invalid.
func (p *parser) limit(n *yaml.Node, idx int) Limit {
	l := Limit{Line: n.Line}
	label := fmt.Sprintf("limits[%d]: ", idx)
	if n.Kind != yaml.MappingNode {
		p.errorf(n.Line, "%seach limit must be a mapping with a name, got %s", label, describe(n))
		return l
	}
	// The name first, so that every later message can name the limit.
	nameNode := lookupKey(n, "name")
	if nameNode != nil {
		if name, ok := p.name(nameNode, label); ok {
			l.Name = name
			label = fmt.Sprintf("limit %q: ", name)
		}
	}
	fs := p.fields(n, label, limitFields)
	if nameNode == nil {
		p.errorf(n.Line, `%smissing "name"`, label)
	}

	// Kind and algorithm decide which other fields belong.
	kindOK := p.kind(fs, label, &l)
	alg, algOK := p.algorithm(fs, label, l.Kind, kindOK)
	if v, ok := fs.m["on_owner_unreachable"]; ok {
		if s, ok := p.str(v.val, label, "on_owner_unreachable"); ok {
			pol, err := parsePolicy(s)
			if err != nil {
				p.errorf(v.val.Line, "%s%v", label, err)
			}
			l.OnOwnerUnreachable = pol
		}
	}
	if v, ok := fs.m["shadow"]; ok {
		l.Shadow, _ = p.bool(v.val, label, "shadow")
	}
	if !kindOK || !algOK {
		return l // which fields belong is unknown; the rest would only add noise
	}

	p.foreignFields(fs, label, l.Kind, alg)
	before := len(p.errs)
	if l.Kind == KindConcurrency {
		p.concurrency(&l, fs, n.Line, label)
	} else {
		l.Bucket = p.bucketLimit(alg, fs, n.Line, label)
		if len(p.errs) == before {
			if err := l.Bucket.Validate(); err != nil {
				p.errorf(n.Line, "%s%s", label, strings.TrimPrefix(err.Error(), bucket.ErrInvalid.Error()+": "))
			}
		}
		if alg == bucket.TokenBucket {
			l.Allotments = p.allotments(fs, label, l.Shadow)
		}
	}
	return l
}

// kind reads the limit's kind into l.Kind (rate when absent); false when
// it is not one.
func (p *parser) kind(fs fieldSet, label string, l *Limit) bool {
	v, ok := fs.m["kind"]
	if !ok {
		return true
	}
	s, ok := p.str(v.val, label, "kind")
	if !ok {
		return false
	}
	switch s {
	case "rate":
		l.Kind = KindRate
	case "concurrency":
		l.Kind = KindConcurrency
	default:
		p.errorf(v.val.Line, `%sunknown kind %q (want rate or concurrency)`, label, clip(s))
		return false
	}
	return true
}

// algorithm reads a rate limit's algorithm (token_bucket when absent);
// false when it is not one, or is given for a concurrency limit.
func (p *parser) algorithm(fs fieldSet, label string, kind Kind, kindOK bool) (bucket.Algorithm, bool) {
	alg := bucket.TokenBucket
	v, ok := fs.m["algorithm"]
	if !ok {
		return alg, true
	}
	if kindOK && kind == KindConcurrency {
		p.errorf(v.key.Line, `%s"algorithm" does not apply to kind concurrency (a concurrency limit counts permits)`, label)
		return alg, false
	}
	s, ok := p.str(v.val, label, "algorithm")
	if !ok {
		return alg, false
	}
	a, err := bucket.ParseAlgorithm(s)
	if _, known := algFields[a]; err != nil || !known {
		p.errorf(v.val.Line, `%sunknown algorithm %q (want token_bucket, gcra, sliding_window or fixed_window)`, label, clip(s))
		return alg, false
	}
	return a, true
}

// foreignFields reports the fields that belong to another kind or
// algorithm than the limit's.
func (p *parser) foreignFields(fs fieldSet, label string, kind Kind, alg bucket.Algorithm) {
	var own, optional []string
	if kind == KindConcurrency {
		own = concFields
	} else {
		af := algFields[alg]
		own = af[:]
		if alg == bucket.TokenBucket {
			optional = allotFields
		}
	}
	for _, k := range fs.order {
		if slices.Contains(commonFields, k) || slices.Contains(own, k) || slices.Contains(optional, k) {
			continue
		}
		if kind == KindConcurrency {
			p.errorf(fs.m[k].key.Line, "%sfield %q does not apply to kind concurrency (it takes %s)", label, k, quoteList(concFields))
		} else if slices.Contains(concFields, k) {
			p.errorf(fs.m[k].key.Line, "%sfield %q applies only to kind concurrency", label, k)
		} else {
			p.errorf(fs.m[k].key.Line, "%sfield %q does not apply to algorithm %s (it takes %s)", label, k, alg, quoteList(own))
		}
	}
}
