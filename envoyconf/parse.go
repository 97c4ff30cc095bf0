package envoyconf

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/weir-rl/weir/bucket"
)

// ErrInvalid is matched (with errors.Is) by every error Parse, Build and
// LoadDir return for configuration that was read but is not valid.
var ErrInvalid = errors.New("envoyconf: invalid configuration")

// Error is one problem at a line of a file.
type Error struct {
	File string // as given to Parse; may be empty
	Line int    // 1-based; 0 for the whole file
	Msg  string
}

// Error returns "file: line N: msg".
func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteString(": ")
	}
	if e.Line > 0 {
		b.WriteString("line ")
		b.WriteString(strconv.Itoa(e.Line))
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Errors is every problem found, in file and line order; errors.Is(err,
// ErrInvalid) is true for it.
type Errors []*Error

// Error returns one problem per line.
func (es Errors) Error() string {
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = e.Error()
	}
	return strings.Join(parts, "\n")
}

// Is reports whether target is ErrInvalid.
func (es Errors) Is(target error) bool { return target == ErrInvalid }

// File is one parsed file: a domain and its descriptor tree.
type File struct {
	Name   string
	Domain string
	Line   int // of the domain field
	top    level
	rules  []*Rule
}

// parser collects the problems of one file.
type parser struct {
	file string
	errs Errors
}

func (p *parser) errorf(line int, format string, args ...any) {
	p.errs = append(p.errs, &Error{File: p.file, Line: line, Msg: fmt.Sprintf(format, args...)})
}

// Parse reads one file in envoyproxy/ratelimit's format; name is used in
// messages and in Rule.File. Every problem is reported, as Errors.
func Parse(name string, data []byte) (*File, error) {
	p := &parser{file: name}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		line, msg := yamlLine(err)
		p.errorf(line, "%s", msg)
		return nil, p.errs
	}
	if len(doc.Content) == 0 {
		p.errorf(0, "empty file: want a domain and descriptors")
		return nil, p.errs
	}
	root := doc.Content[0]
	f := &File{Name: name}
	fields := p.mapping(root, "the file", "domain", "descriptors")
	if n, ok := fields["domain"]; ok {
		f.Domain, f.Line = p.str(n, "domain"), n.Line
	}
	if f.Domain == "" {
		p.errorf(root.Line, "config file cannot have empty domain")
	}
	f.top = level{byKey: map[string]*desc{}}
	if n, ok := fields["descriptors"]; ok {
		p.descriptors(f, &f.top, f.Domain+".", n)
	}
	if len(p.errs) > 0 {
		return nil, p.errs
	}
	return f, nil
}

// mapping checks that n is a mapping with only the allowed keys, each once,
// and returns the value nodes by key.
func (p *parser) mapping(n *yaml.Node, what string, allowed ...string) map[string]*yaml.Node {
	out := map[string]*yaml.Node{}
	if n.Kind != yaml.MappingNode {
		p.errorf(n.Line, "%s must be a mapping", what)
		return out
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		switch {
		case !slices.Contains(allowed, k.Value):
			p.errorf(k.Line, "unknown key %q in %s (want one of %s)", k.Value, what, strings.Join(allowed, ", "))
		case out[k.Value] != nil:
			p.errorf(k.Line, "duplicate key %q in %s", k.Value, what)
		default:
			out[k.Value] = v
		}
	}
	return out
}

func (p *parser) str(n *yaml.Node, field string) string {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" || n.Tag == "!!map" || n.Tag == "!!seq" {
		p.errorf(n.Line, "%s must be a string", field)
		return ""
	}
	return n.Value
}

func (p *parser) boolean(n *yaml.Node, field string) bool {
	var b bool
	if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" || n.Decode(&b) != nil {
		p.errorf(n.Line, "%s must be true or false", field)
		return false
	}
	return b
}

var descriptorKeys = []string{
	"key", "value", "rate_limit", "descriptors", "shadow_mode", "quota_mode",
	"detailed_metric", "value_to_metric", "share_threshold", "metadata",
}

// descriptors loads a descriptor list into lv; parent is the full key of
// the level ("domain." or "domain.key_value.").
func (p *parser) descriptors(f *File, lv *level, parent string, n *yaml.Node) {
	if n.Kind != yaml.SequenceNode {
		if n.Tag != "!!null" {
			p.errorf(n.Line, "descriptors must be a list")
		}
		return
	}
	for _, dn := range n.Content {
		fields := p.mapping(dn, "a descriptor", descriptorKeys...)
		if dn.Kind != yaml.MappingNode {
			continue
		}
		d := &desc{}
		if v, ok := fields["key"]; ok {
			d.key = p.str(v, "key")
		}
		if d.key == "" {
			p.errorf(dn.Line, "descriptor has empty key")
			continue
		}
		finalKey := d.key
		if v, ok := fields["value"]; ok {
			if val := p.str(v, "value"); val != "" {
				finalKey += "_" + val
			}
		}
		full := parent + finalKey
		if lv.byKey[finalKey] != nil {
			p.errorf(dn.Line, "duplicate descriptor composite key '%s'", full)
			continue
		}
		flag := func(name string) bool {
			if v, ok := fields[name]; ok {
				return p.boolean(v, name)
			}
			return false
		}
		shadow, detailed, toMetric := flag("shadow_mode"), flag("detailed_metric"), flag("value_to_metric")
		d.share = flag("share_threshold")
		if flag("quota_mode") {
			p.errorf(fields["quota_mode"].Line, "quota_mode is not supported by Weir")
		}
		if d.share && !strings.Contains(finalKey, "*") {
			p.errorf(fields["share_threshold"].Line,
				"share_threshold can only be used with wildcard values (containing '*'), but found key '%s'", finalKey)
		}
		if rn, ok := fields["rate_limit"]; ok && rn.Tag != "!!null" {
			rl, ok := p.rateLimit(rn)
			if ok {
				d.rule = &Rule{
					ID: full, Domain: f.Domain, Limit: rl, ShadowMode: shadow,
					DetailedMetric: detailed, ValueToMetric: toMetric, File: f.Name, Line: dn.Line,
				}
				f.rules = append(f.rules, d.rule)
			}
		}
		if strings.Contains(finalKey, "*") {
			lv.wildcards = append(lv.wildcards, wildcard{finalKey: finalKey, parts: strings.Split(finalKey, "*")})
		}
		d.children = level{byKey: map[string]*desc{}}
		if cn, ok := fields["descriptors"]; ok {
			p.descriptors(f, &d.children, full+".", cn)
		}
		lv.byKey[finalKey] = d
	}
}

var rateLimitKeys = []string{"unit", "requests_per_unit", "unlimited", "name", "replaces", "weir"}

// rateLimit reads a rate_limit block.
func (p *parser) rateLimit(n *yaml.Node) (RateLimit, bool) {
	before := len(p.errs)
	fields := p.mapping(n, "rate_limit", rateLimitKeys...)
	var rl RateLimit
	if v, ok := fields["unlimited"]; ok {
		rl.Unlimited = p.boolean(v, "unlimited")
	}
	unitName := ""
	if v, ok := fields["unit"]; ok {
		unitName = p.str(v, "unit")
	}
	unit, validUnit := units[strings.ToUpper(unitName)]
	switch {
	case rl.Unlimited && validUnit:
		p.errorf(n.Line, "should not specify rate limit unit when unlimited")
	case !rl.Unlimited && !validUnit:
		p.errorf(n.Line, "invalid rate limit unit '%s'", unitName)
	case !rl.Unlimited:
		rl.Unit = unit
	}
	if v, ok := fields["requests_per_unit"]; ok {
		rpu, err := strconv.ParseUint(v.Value, 10, 64)
		if v.Kind != yaml.ScalarNode || v.Tag != "!!int" || err != nil || rpu > math.MaxUint32 {
			p.errorf(v.Line, "requests_per_unit must be an integer from 0 to %d", uint32(math.MaxUint32))
		}
		rl.RequestsPerUnit = uint32(min(rpu, math.MaxUint32))
	}
	if v, ok := fields["name"]; ok {
		rl.Name = p.str(v, "name")
	}
	if v, ok := fields["replaces"]; ok {
		if v.Kind != yaml.SequenceNode {
			p.errorf(v.Line, "replaces must be a list of {name: ...}")
		} else {
			for _, e := range v.Content {
				ef := p.mapping(e, "a replaces entry", "name")
				name := ""
				if nn, ok := ef["name"]; ok {
					name = p.str(nn, "name")
				}
				switch name {
				case "":
					p.errorf(e.Line, "should not have an empty replaces entry")
				case rl.Name:
					p.errorf(e.Line, "replaces should not contain name of same descriptor")
				default:
					rl.Replaces = append(rl.Replaces, name)
				}
			}
		}
	}
	rl.Algorithm, rl.OnOwnerUnreachable = bucket.FixedWindow, "local"
	if v, ok := fields["weir"]; ok {
		p.weir(v, &rl)
	}
	return rl, len(p.errs) == before
}

// weir reads the rate_limit.weir extension.
func (p *parser) weir(n *yaml.Node, rl *RateLimit) {
	fields := p.mapping(n, "rate_limit.weir", "algorithm", "burst", "on_owner_unreachable")
	if v, ok := fields["algorithm"]; ok {
		a, err := bucket.ParseAlgorithm(p.str(v, "algorithm"))
		if err != nil {
			p.errorf(v.Line, "algorithm must be fixed_window, token_bucket, gcra or sliding_window")
		}
		rl.Algorithm = a
	}
	if v, ok := fields["burst"]; ok {
		b, err := strconv.ParseInt(v.Value, 10, 64)
		switch {
		case v.Tag != "!!int" || err != nil || b < 1 || b > bucket.MaxCapacity:
			p.errorf(v.Line, "burst must be an integer from 1 to %d", int64(bucket.MaxCapacity))
		case rl.Algorithm != bucket.TokenBucket && rl.Algorithm != bucket.GCRA:
			p.errorf(v.Line, "burst belongs to token_bucket and gcra only")
		default:
			rl.Burst = b
		}
	}
	if v, ok := fields["on_owner_unreachable"]; ok {
		switch s := p.str(v, "on_owner_unreachable"); s {
		case "local", "open", "closed":
			rl.OnOwnerUnreachable = s
		default:
			p.errorf(v.Line, "on_owner_unreachable must be local, open or closed")
		}
	}
}

// Build combines files into a Config; two files with one domain are an
// error (envoyproxy/ratelimit's default, without MERGE_DOMAIN_CONFIG).
func Build(files ...*File) (*Config, error) {
	c := &Config{domains: map[string]*level{}}
	var errs Errors
	seen := map[string]string{}
	for _, f := range files {
		if prev, ok := seen[f.Domain]; ok {
			errs = append(errs, &Error{
				File: f.Name, Line: f.Line,
				Msg: "duplicate domain '" + f.Domain + "' in config file (also in " + prev + ")",
			})
			continue
		}
		seen[f.Domain] = f.Name
		c.domains[f.Domain] = &f.top
		c.rules = append(c.rules, f.rules...)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	for _, r := range c.rules {
		if r.Limit.Unlimited {
			continue
		}
		if r.Limit.RequestsPerUnit > 0 {
			if err := r.Bucket().Validate(); err != nil {
				errs = append(errs, &Error{
					File: r.File, Line: r.Line,
					Msg: "rate_limit of '" + r.ID + "': " + strings.TrimPrefix(err.Error(), bucket.ErrInvalid.Error()+": "),
				})
			}
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return c, nil
}

// LoadDir parses every *.yaml and *.yml file directly in dir, in name
// order, and builds them into one Config; every problem of every file is
// reported. A directory with no such file is an empty Config.
func LoadDir(dir string) (*Config, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var files []*File
	var errs Errors
	for _, e := range entries {
		name := e.Name()
		ext := filepath.Ext(name)
		if e.IsDir() || strings.HasPrefix(name, ".") || (ext != ".yaml" && ext != ".yml") {
			continue
		}
		path := filepath.Join(dir, name)
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		f, err := Parse(path, data)
		if es, ok := errors.AsType[Errors](err); ok {
			errs = append(errs, es...)
			continue
		}
		files = append(files, f)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return Build(files...)
}

// yamlLine splits a yaml error into its line (0 when absent) and message.
func yamlLine(err error) (int, string) {
	s := strings.TrimPrefix(err.Error(), "yaml: ")
	rest, ok := strings.CutPrefix(s, "line ")
	if !ok {
		return 0, s
	}
	num, msg, ok := strings.Cut(rest, ": ")
	n, perr := strconv.Atoi(num)
	if !ok || perr != nil {
		return 0, s
	}
	return n, msg
}
