package limits

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

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

// nameByte reports whether c may appear in a limit name.
func nameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
}
