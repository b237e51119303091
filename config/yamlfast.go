package config

import (
	"bytes"

	"gopkg.in/yaml.v3"
)

// One-line tag entries without yaml.v3's parser.
//
// A large project is mostly entries such as
//
//	- {path: Line1/Tank/Level, device: plc1, address: HR100, type: float32, scan: 1s}
//
// yaml.v3 spends about 20 µs of a small core on each (its scanner builds
// tokens, events and marks for every character), which made the parse of
// a 10,000-tag project half of the daemon's start-up. fastFlowItem reads
// the narrowest form of such a line itself and builds the node yaml.v3
// would build for it, field for field (kind, style, tag, value, line,
// column); anything outside that form, and every chunk with a comment, is
// left to yaml.v3, so the fast path decides nothing yaml.v3 would decide
// otherwise. TestFastFlowItem_SameNodesAsYAMLv3 and FuzzFastFlowItem hold
// the two to the same trees.
//
// The form (YAML 1.2 §7.4 flow mappings, §7.3 flow scalars, restricted):
// the item's indentation, "-", spaces, then a flow mapping and optional
// trailing spaces, all ASCII, on one line. A flow mapping is "{", entries
// "key: value" separated by ",", each key and value after optional
// spaces, then "}". A key is a letter or "_" then letters, digits and
// "_", followed directly by ": ". A value is a flow mapping (one level
// inside the entry's: "deadband: {absolute: 0.5}"), a double-quoted
// string with no backslash and no double quote inside, or a plain scalar of letters, digits and "_./()+-" that starts
// with a letter, a digit, "_", ".", "/", "(" or a "-" followed by a digit
// or ".", ended by spaces, "," or "}". Plain scalars are resolved to their
// tag (!!str, !!int, !!float, !!bool, !!null) by yaml.v3 itself (Node.
// ShortTag), as its parser does.

// fastFlowItem parses one entry line (with its indentation) of a block
// sequence whose line number is line, returning the flow mapping node, or
// ok false when the line is not of the form above.
func fastFlowItem(l []byte, line int) (n *yaml.Node, ok bool) {
	i := 0
	for i < len(l) && l[i] == ' ' {
		i++
	}
	if i+1 >= len(l) || l[i] != '-' || l[i+1] != ' ' {
		return nil, false
	}
	i++
	for i < len(l) && l[i] == ' ' {
		i++
	}
	if i >= len(l) || l[i] != '{' {
		return nil, false
	}
	m, i, ok := flowMap(l, i, line, 0)
	if !ok {
		return nil, false
	}
	for ; i < len(l); i++ {
		if l[i] != ' ' {
			return nil, false
		}
	}
	return m, true
}

// maxFlowDepth is how deep flow mappings nest on the fast path
// ("deadband: {absolute: 0.5}" is depth 1).
const maxFlowDepth = 2

// flowMap parses the non-empty flow mapping whose "{" is l[i], returning
// its node and the index after its "}".
func flowMap(l []byte, i, line, depth int) (m *yaml.Node, next int, ok bool) {
	m = &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle, Tag: "!!map", Line: line, Column: i + 1}
	i++
	for {
		for i < len(l) && l[i] == ' ' {
			i++
		}
		// key
		ks := i
		if i >= len(l) || !(isLetter(l[i]) || l[i] == '_') {
			return nil, 0, false
		}
		for i < len(l) && (isLetter(l[i]) || isDigit(l[i]) || l[i] == '_') {
			i++
		}
		if i+1 >= len(l) || l[i] != ':' || l[i+1] != ' ' {
			return nil, 0, false
		}
		key := scalar(string(l[ks:i]), line, ks+1)
		i += 2
		for i < len(l) && l[i] == ' ' {
			i++
		}
		// value
		vs := i
		var val *yaml.Node
		switch {
		case i >= len(l):
			return nil, 0, false
		case l[i] == '"':
			end := bytes.IndexByte(l[i+1:], '"')
			if end < 0 {
				return nil, 0, false
			}
			s := l[i+1 : i+1+end]
			if bytes.IndexByte(s, '\\') >= 0 || !printableASCII(s) {
				return nil, 0, false
			}
			val = &yaml.Node{Kind: yaml.ScalarNode, Style: yaml.DoubleQuotedStyle, Tag: "!!str", Value: string(s), Line: line, Column: vs + 1}
			i += end + 2
		case l[i] == '{' && depth+1 < maxFlowDepth:
			if val, i, ok = flowMap(l, i, line, depth+1); !ok {
				return nil, 0, false
			}
		case plainStart(l, i):
			for i < len(l) && plainChar(l[i]) {
				i++
			}
			val = scalar(string(l[vs:i]), line, vs+1)
		default:
			return nil, 0, false
		}
		m.Content = append(m.Content, key, val)
		for i < len(l) && l[i] == ' ' {
			i++
		}
		if i >= len(l) {
			return nil, 0, false
		}
		switch l[i] {
		case ',':
			i++
		case '}':
			return m, i + 1, true
		default:
			return nil, 0, false
		}
	}
}

// scalar is a plain scalar node with the tag yaml.v3's parser resolves.
func scalar(v string, line, col int) *yaml.Node {
	n := &yaml.Node{Kind: yaml.ScalarNode, Value: v, Line: line, Column: col}
	n.Tag = n.ShortTag()
	return n
}

func isLetter(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }
func isDigit(c byte) bool  { return c >= '0' && c <= '9' }

// plainChar reports whether c may be inside a fast-path plain scalar.
func plainChar(c byte) bool {
	return isLetter(c) || isDigit(c) || c == '_' || c == '.' || c == '/' || c == '(' || c == ')' || c == '+' || c == '-'
}

// plainStart reports whether a fast-path plain scalar may start at l[i].
func plainStart(l []byte, i int) bool {
	c := l[i]
	if c == '-' {
		return i+1 < len(l) && (isDigit(l[i+1]) || l[i+1] == '.')
	}
	return isLetter(c) || isDigit(c) || c == '_' || c == '.' || c == '/' || c == '('
}

// printableASCII reports whether s is printable ASCII (space to "~").
func printableASCII(s []byte) bool {
	for _, c := range s {
		if c < 0x20 || c > 0x7E {
			return false
		}
	}
	return true
}

// fastItems returns the nodes of items (entries of b, one line each) when
// every one is of fastFlowItem's form and b[from:to], the chunk's text, has
// no comment; ok false sends the chunk to yaml.v3.
func fastItems(b []byte, items []item, from, to int) (nodes []*yaml.Node, ok bool) {
	if bytes.IndexByte(b[from:to], '#') >= 0 {
		return nil, false
	}
	nodes = make([]*yaml.Node, len(items))
	for i, it := range items {
		l := b[it.start:it.end]
		if bytes.IndexByte(l, '\n') >= 0 {
			return nil, false
		}
		n, ok := fastFlowItem(l, it.line)
		if !ok {
			return nil, false
		}
		nodes[i] = n
	}
	return nodes, true
}
