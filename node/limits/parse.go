package limits

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
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
	// MaxQueueWait is the longest queue.max_wait.
	MaxQueueWait = time.Hour
)

// The field names of the file, by where they may appear. These tables are
// never modified.
var (
	topFields    = []string{"version", "limits", "inline_limits"}
	commonFields = []string{"name", "kind", "algorithm", "on_owner_unreachable", "shadow"}
	concFields   = []string{"permits", "lease_ttl", "max_lease_ttl", "queue", "strict"}
	queueFields  = []string{"length", "max_wait"}
	limitFields  = slices.Concat(commonFields, concFields, []string{"capacity", "rate", "burst", "limit", "window"})
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
	// The document is decoded into a yaml.Node tree and walked by hand:
	// stricter than KnownFields (which cannot see fields that belong to
	// another algorithm), and every value keeps its line.
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
	return f
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
	kindOK, algOK := true, true
	if v, ok := fs.m["kind"]; ok {
		if s, ok := p.str(v.val, label, "kind"); ok {
			switch s {
			case "rate":
				l.Kind = KindRate
			case "concurrency":
				l.Kind = KindConcurrency
			default:
				p.errorf(v.val.Line, `%sunknown kind %q (want rate or concurrency)`, label, clip(s))
				kindOK = false
			}
		} else {
			kindOK = false
		}
	}
	alg := bucket.TokenBucket
	if v, ok := fs.m["algorithm"]; ok {
		switch {
		case kindOK && l.Kind == KindConcurrency:
			p.errorf(v.key.Line, `%s"algorithm" does not apply to kind concurrency (a concurrency limit counts permits)`, label)
			algOK = false
		default:
			s, ok := p.str(v.val, label, "algorithm")
			if ok {
				a, err := bucket.ParseAlgorithm(s)
				if _, known := algFields[a]; err != nil || !known {
					p.errorf(v.val.Line, `%sunknown algorithm %q (want token_bucket, gcra, sliding_window or fixed_window)`, label, clip(s))
					ok = false
				} else {
					alg = a
				}
			}
			algOK = ok
		}
	}
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

	// Fields that belong to another kind or algorithm.
	var own []string
	if l.Kind == KindConcurrency {
		own = concFields
	} else {
		af := algFields[alg]
		own = af[:]
	}
	for _, k := range fs.order {
		if slices.Contains(commonFields, k) || slices.Contains(own, k) {
			continue
		}
		if l.Kind == KindConcurrency {
			p.errorf(fs.m[k].key.Line, "%sfield %q does not apply to kind concurrency (it takes %s)", label, k, quoteList(concFields))
		} else if slices.Contains(concFields, k) {
			p.errorf(fs.m[k].key.Line, "%sfield %q applies only to kind concurrency", label, k)
		} else {
			p.errorf(fs.m[k].key.Line, "%sfield %q does not apply to algorithm %s (it takes %s)", label, k, alg, quoteList(own))
		}
	}

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
	}
	return l
}

// bucketLimit reads the fields of a rate limit with algorithm alg.
func (p *parser) bucketLimit(alg bucket.Algorithm, fs fieldSet, line int, label string) bucket.Limit {
	b := bucket.Limit{Algorithm: alg}
	need := func(name string) (field, bool) {
		v, ok := fs.m[name]
		if !ok {
			p.errorf(line, "%s%s needs %q", label, alg, name)
		}
		return v, ok
	}
	count := func(name string) int64 {
		v, ok := need(name)
		if !ok {
			return 0
		}
		n, ok := p.int(v.val, label, name)
		switch {
		case !ok:
		case n < 1:
			p.errorf(v.val.Line, "%s%q must be >= 1, got %d", label, name, n)
		case n > bucket.MaxCapacity:
			p.errorf(v.val.Line, "%s%q must be at most %d, got %d", label, name, int64(bucket.MaxCapacity), n)
		}
		return n
	}
	rate := func() bucket.Rate {
		v, ok := need("rate")
		if !ok {
			return bucket.Rate{}
		}
		s, ok := p.str(v.val, label, "rate")
		if !ok {
			return bucket.Rate{}
		}
		r, err := parseRate(s)
		if err != nil {
			p.errorf(v.val.Line, "%s%v", label, err)
		}
		return r
	}
	switch alg {
	case bucket.TokenBucket:
		b.Capacity = count("capacity")
		b.Rate = rate()
	case bucket.GCRA:
		b.Rate = rate()
		b.Capacity = count("burst")
	case bucket.SlidingWindow:
		b.Capacity = count("limit")
		if v, ok := need("window"); ok {
			if d, ok := p.duration(v.val, label, "window"); ok {
				if d < MinPeriod || d > MaxPeriod {
					p.errorf(v.val.Line, "%s\"window\" must be between %v and %s, got %s", label, MinPeriod, fmtDuration(MaxPeriod), fmtDuration(d))
				}
				b.Window = d
			}
		}
	case bucket.FixedWindow:
		b.Capacity = count("limit")
		if v, ok := need("window"); ok {
			if s, ok := p.str(v.val, label, "window"); ok {
				c, err := bucket.ParseCalendar(s)
				if err != nil {
					p.errorf(v.val.Line, "%sfixed_window \"window\" is a calendar unit: minute, hour, day or month (UTC), got %q; for a rolling window use sliding_window", label, clip(s))
				}
				b.Calendar = c
			}
		}
	}
	return b
}

// concurrency reads the fields of a concurrency limit into l.
func (p *parser) concurrency(l *Limit, fs fieldSet, line int, label string) {
	if v, ok := fs.m["permits"]; !ok {
		p.errorf(line, `%sconcurrency limit needs "permits"`, label)
	} else if n, ok := p.int(v.val, label, "permits"); ok {
		if n < 1 || n > MaxPermits {
			p.errorf(v.val.Line, `%s"permits" must be between 1 and %d, got %d`, label, MaxPermits, n)
		}
		l.Permits = n
	}
	ttlOK := false
	if v, ok := fs.m["lease_ttl"]; !ok {
		p.errorf(line, `%sconcurrency limit needs "lease_ttl"`, label)
	} else if d, ok := p.duration(v.val, label, "lease_ttl"); ok {
		if d < MinLeaseTTL || d > MaxLeaseTTLLimit {
			p.errorf(v.val.Line, `%s"lease_ttl" must be between %v and %s, got %s`, label, MinLeaseTTL, fmtDuration(MaxLeaseTTLLimit), fmtDuration(d))
		} else {
			ttlOK = true
		}
		l.LeaseTTL = d
	}
	if v, ok := fs.m["max_lease_ttl"]; ok {
		if d, ok := p.duration(v.val, label, "max_lease_ttl"); ok {
			switch {
			case d > MaxLeaseTTLLimit:
				p.errorf(v.val.Line, `%s"max_lease_ttl" must be at most %s, got %s`, label, fmtDuration(MaxLeaseTTLLimit), fmtDuration(d))
			case ttlOK && d < l.LeaseTTL:
				p.errorf(v.val.Line, `%s"max_lease_ttl" (%s) must be >= "lease_ttl" (%s)`, label, fmtDuration(d), fmtDuration(l.LeaseTTL))
			}
			l.MaxLeaseTTL = d
		}
	} else if ttlOK {
		l.MaxLeaseTTL = min(DefaultMaxLeaseTTLFactor*l.LeaseTTL, MaxLeaseTTLLimit)
	}
	if v, ok := fs.m["queue"]; ok {
		l.Queue = p.queue(v.key.Line, v.val, label)
	}
	if v, ok := fs.m["strict"]; ok {
		l.Strict, _ = p.bool(v.val, label, "strict")
	}
}

// queue reads a concurrency limit's queue mapping, whose key is on line.
// A null queue is no queue.
func (p *parser) queue(line int, n *yaml.Node, label string) Queue {
	var q Queue
	if isNull(n) {
		return q
	}
	if n.Kind != yaml.MappingNode {
		p.errorf(n.Line, `%s"queue" must be a mapping like { length: 16, max_wait: 5s }, got %s`, label, describe(n))
		return q
	}
	fs := p.fields(n, label+"queue: ", queueFields)
	lenOK := false
	if v, ok := fs.m["length"]; ok {
		if x, ok := p.int(v.val, label, "queue.length"); ok {
			if x < 0 || x > MaxQueueLength {
				p.errorf(v.val.Line, `%s"queue.length" must be between 0 and %d, got %d`, label, MaxQueueLength, x)
			} else {
				q.Length = int(x)
				lenOK = true
			}
		}
	} else {
		p.errorf(line, `%s"queue" needs "length"`, label)
	}
	waitLine := line
	waitOK := false
	if v, ok := fs.m["max_wait"]; ok {
		waitLine = v.val.Line
		if d, ok := p.duration(v.val, label, "queue.max_wait"); ok {
			if d < 0 || d > MaxQueueWait {
				p.errorf(v.val.Line, `%s"queue.max_wait" must be between 0s and %v, got %s`, label, MaxQueueWait, fmtDuration(d))
			} else {
				q.MaxWait = d
				waitOK = true
			}
		}
	}
	if _, hasWait := fs.m["max_wait"]; lenOK && (waitOK || !hasWait) {
		switch {
		case q.Length > 0 && q.MaxWait == 0:
			p.errorf(waitLine, `%s"queue.max_wait" must be > 0 when "queue.length" is %d`, label, q.Length)
		case q.Length == 0 && q.MaxWait > 0:
			p.errorf(waitLine, `%s"queue.max_wait" is set but "queue.length" is 0, so no acquire can wait`, label)
		}
	}
	return q
}

// field is one key and its value in a mapping.
type field struct{ key, val *yaml.Node }

// fieldSet is the fields of one mapping by name, and their order.
type fieldSet struct {
	m     map[string]field
	order []string
}

// fields reads the keys of mapping n, reporting keys that are not plain
// strings, keys given twice, and keys not in known (with a suggestion).
// Values are dereferenced aliases. The first of repeated keys wins.
func (p *parser) fields(n *yaml.Node, label string, known []string) fieldSet {
	fs := fieldSet{m: make(map[string]field, len(n.Content)/2)}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := deref(n.Content[i]), deref(n.Content[i+1])
		if k.Kind != yaml.ScalarNode || isNull(k) {
			p.errorf(k.Line, "%sfield names must be plain words, got %s", label, describe(k))
			continue
		}
		if prev, dup := fs.m[k.Value]; dup {
			p.errorf(k.Line, "%sfield %q appears twice (first on line %d)", label, clip(k.Value), prev.key.Line)
			continue
		}
		if !slices.Contains(known, k.Value) {
			msg := fmt.Sprintf("%sunknown field %q", label, clip(k.Value))
			if k.Value == "<<" {
				msg += " (YAML merge keys are not supported)"
			} else if s := suggest(k.Value, known); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
			p.errorf(k.Line, "%s", msg)
			continue
		}
		fs.m[k.Value] = field{key: k, val: v}
		fs.order = append(fs.order, k.Value)
	}
	return fs
}

// name reads and checks a limit name.
func (p *parser) name(n *yaml.Node, label string) (string, bool) {
	n = deref(n)
	if n.Kind != yaml.ScalarNode || isNull(n) {
		p.errorf(n.Line, `%s"name" must be a word like export-db, got %s`, label, describe(n))
		return "", false
	}
	s := n.Value
	switch {
	case s == "":
		p.errorf(n.Line, `%s"name" is empty`, label)
		return "", false
	case len(s) > MaxNameLen:
		p.errorf(n.Line, `%s"name" is longer than %d characters`, label, MaxNameLen)
		return "", false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !nameByte(c) {
			p.errorf(n.Line, `%s"name" %q may contain only letters, digits, '.', '_' and '-'`, label, clip(s))
			return "", false
		}
	}
	return s, true
}

// int reads an integer scalar.
func (p *parser) int(n *yaml.Node, label, name string) (int64, bool) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" {
		p.errorf(n.Line, "%s%q must be a whole number, got %s", label, name, describe(n))
		return 0, false
	}
	var v int64
	if err := n.Decode(&v); err != nil {
		p.errorf(n.Line, "%s%q: %q is out of range", label, name, clip(n.Value))
		return 0, false
	}
	return v, true
}

// bool reads a true/false scalar.
func (p *parser) bool(n *yaml.Node, label, name string) (bool, bool) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" {
		p.errorf(n.Line, "%s%q must be true or false, got %s", label, name, describe(n))
		return false, false
	}
	var v bool
	if err := n.Decode(&v); err != nil {
		p.errorf(n.Line, "%s%q must be true or false, got %q", label, name, clip(n.Value))
		return false, false
	}
	return v, true
}

// str reads a string scalar.
func (p *parser) str(n *yaml.Node, label, name string) (string, bool) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
		p.errorf(n.Line, "%s%q must be a string, got %s", label, name, describe(n))
		return "", false
	}
	return n.Value, true
}

// duration reads a duration scalar: a Go duration or whole days.
func (p *parser) duration(n *yaml.Node, label, name string) (time.Duration, bool) {
	if n.Kind == yaml.ScalarNode && (n.ShortTag() == "!!int" || n.ShortTag() == "!!float") {
		p.errorf(n.Line, "%s%q needs a unit, like %ss, got %s", label, name, clip(n.Value), describe(n))
		return 0, false
	}
	s, ok := p.str(n, label, name)
	if !ok {
		return 0, false
	}
	d, err := parseDuration(s)
	if err != nil {
		p.errorf(n.Line, "%s%q: %v (like 30s, 1m30s, 500ms or 7d)", label, name, err)
		return 0, false
	}
	if d > MaxDuration {
		p.errorf(n.Line, "%s%q: %s is too long", label, name, clip(s))
		return 0, false
	}
	return d, true
}

// yamlError turns a YAML syntax error into a line-numbered problem.
func (p *parser) yamlError(err error) {
	var te *yaml.TypeError
	msgs := []string{err.Error()}
	if errors.As(err, &te) {
		msgs = te.Errors
	}
	for _, m := range msgs {
		m = strings.TrimPrefix(m, "yaml: ")
		line := 0
		if rest, ok := strings.CutPrefix(m, "line "); ok {
			if num, tail, ok := strings.Cut(rest, ": "); ok {
				if n, err := strconv.Atoi(num); err == nil {
					line, m = n, tail
				}
			}
		}
		p.errorf(line, "YAML syntax: %s", m)
	}
}

// lookupKey returns the value of key in mapping n, or nil.
func lookupKey(n *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := deref(n.Content[i])
		if k.Kind == yaml.ScalarNode && k.Value == key {
			return deref(n.Content[i+1])
		}
	}
	return nil
}

// deref follows aliases (at most a few hops; the parser forbids cycles of
// aliases alone).
func deref(n *yaml.Node) *yaml.Node {
	for range 8 {
		if n.Kind != yaml.AliasNode || n.Alias == nil {
			break
		}
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n.Kind == 0 || n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// describe names what a node is, for "got ..." in messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	case yaml.DocumentNode:
		return "a document"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return "nothing"
		case "!!int":
			return "the number " + clip(n.Value)
		case "!!float":
			return "the number " + clip(n.Value)
		case "!!bool":
			return clip(n.Value)
		case "!!str":
			return strconv.Quote(clip(n.Value))
		}
		return n.ShortTag() + " " + strconv.Quote(clip(n.Value))
	}
	return "nothing"
}

// clip shortens a value quoted in a message.
func clip(s string) string {
	const n = 48
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, s := range names {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, ", ")
}

// suggest returns the known name closest to s when it is a likely typo.
func suggest(s string, known []string) string {
	if len(s) > 64 {
		return ""
	}
	best, bestD := "", 3
	for _, k := range known {
		if d := editDistance(strings.ToLower(s), k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between two short strings.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// nameByte reports whether c may appear in a limit name.
func nameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
}
