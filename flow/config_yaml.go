package flow

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Walking a flow definition's YAML nodes: every key checked against the
// keys its place takes, every problem with its line.

// problems collects a flow's problems, each prefixed with where.
type problems struct {
	file string
	flow string
	errs []error
}

func (p *problems) add(line int, node, format string, args ...any) {
	at := fmt.Sprintf("%s:%d: flow %q", p.file, line, p.flow)
	if p.file == "" {
		at = fmt.Sprintf("line %d: flow %q", line, p.flow)
	}
	if node != "" {
		at += fmt.Sprintf(": node %q", node)
	}
	p.errs = append(p.errs, fmt.Errorf("%s: %s", at, fmt.Sprintf(format, args...)))
}

// fields walks a mapping node: its keys and values by name, each key's
// line, and the keys it does not know reported.
type fields struct {
	n     *yaml.Node
	vals  map[string]*yaml.Node
	lines map[string]int
}

func mapping(n *yaml.Node, known []string, report func(line int, format string, args ...any)) (*fields, bool) {
	if n.Kind != yaml.MappingNode {
		report(n.Line, "want a mapping, have %s", kindWord(n))
		return nil, false
	}
	f := &fields{n: n, vals: map[string]*yaml.Node{}, lines: map[string]int{}}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if !slices.Contains(known, k.Value) {
			report(k.Line, "unknown key %q (valid keys: %s)", k.Value, strings.Join(known, ", "))
			continue
		}
		if _, dup := f.vals[k.Value]; dup {
			report(k.Line, "key %q given twice", k.Value)
			continue
		}
		f.vals[k.Value] = v
		f.lines[k.Value] = k.Line
	}
	return f, true
}

func kindWord(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	case yaml.ScalarNode:
		return fmt.Sprintf("%q", n.Value)
	}
	return "nothing"
}

func (f *fields) has(k string) bool { _, ok := f.vals[k]; return ok }

func (f *fields) line(k string) int {
	if l, ok := f.lines[k]; ok {
		return l
	}
	return f.n.Line
}

// str returns a scalar string key ("" when absent); a non-scalar is
// reported.
func (f *fields) str(k string, report func(int, string, ...any)) string {
	v := f.vals[k]
	if v == nil {
		return ""
	}
	if v.Kind != yaml.ScalarNode {
		report(v.Line, "%s: want a text, have %s", k, kindWord(v))
		return ""
	}
	return v.Value
}

func (f *fields) boolean(k string, report func(int, string, ...any)) bool {
	v := f.vals[k]
	if v == nil {
		return false
	}
	var b bool
	if v.Kind != yaml.ScalarNode || v.Decode(&b) != nil {
		report(v.Line, "%s: want true or false, have %s", k, kindWord(v))
	}
	return b
}

func (f *fields) strs(k string, report func(int, string, ...any)) []string {
	v := f.vals[k]
	if v == nil {
		return nil
	}
	if v.Kind == yaml.ScalarNode {
		return []string{v.Value}
	}
	if v.Kind != yaml.SequenceNode {
		report(v.Line, "%s: want a list of texts, have %s", k, kindWord(v))
		return nil
	}
	out := []string{}
	for _, e := range v.Content {
		if e.Kind != yaml.ScalarNode {
			report(e.Line, "%s: want a text, have %s", k, kindWord(e))
			continue
		}
		out = append(out, e.Value)
	}
	return out
}

func (f *fields) duration(k string, report func(int, string, ...any)) time.Duration {
	s := f.str(k, report)
	if s == "" {
		return 0
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		if n, nerr := strconv.ParseFloat(s, 64); nerr == nil {
			d, err = time.Duration(n*float64(time.Second)), nil
		}
	}
	if err != nil || d <= 0 {
		report(f.line(k), "%s %q: want a positive duration such as 500ms or 2s", k, s)
		return 0
	}
	return d
}

func (f *fields) number(k string, report func(int, string, ...any)) (*float64, bool) {
	v := f.vals[k]
	if v == nil {
		return nil, false
	}
	var x float64
	if v.Kind != yaml.ScalarNode || v.Decode(&x) != nil || math.IsNaN(x) || math.IsInf(x, 0) {
		report(v.Line, "%s: want a number, have %s", k, kindWord(v))
		return nil, true
	}
	return &x, true
}
