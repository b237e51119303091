package config

import (
	"bytes"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// A project of 100,000 tags is 10 MB of YAML; yaml.v3 turns a document into
// a node tree of some 4 KB per tag before anything is decoded, and a tag
// import used to hold three such trees at once (1.5 GiB). The functions
// here split a block-style document by its text instead, so that the tags
// section is parsed one tag at a time and the peak memory of a parse is
// the decoded tags plus one tag's nodes. A document they cannot split
// safely (JSON, flow style at the top, document markers, anchors and
// aliases) is parsed whole, as before; both ways give the same result.

// section is one top-level entry of a block-style document: its key, the
// byte range of its text (the key line to the next top-level key) and the
// line of the key (1-based).
type section struct {
	key        string
	start, end int
	line       int
}

var topKeyRe = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)[ \t]*:(?:[ \t]|$)`)

// splitTop returns the top-level sections of b, or ok false when b is not
// a plain block-style mapping that can be split by lines.
func splitTop(b []byte) (secs []section, ok bool) {
	if !plainText(b) || bytes.Contains(b, []byte("&")) || bytes.Contains(b, []byte("*")) || bytes.Contains(b, []byte("<<")) {
		// Tabs, anchors, aliases and merge keys: leave them to yaml.v3.
		// ('&' and '*' inside strings make us fall back too; that is
		// only slower.)
		return nil, false
	}
	line := 0
	for pos := 0; pos < len(b); {
		line++
		end := bytes.IndexByte(b[pos:], '\n')
		next := len(b)
		if end >= 0 {
			next = pos + end + 1
		} else {
			end = len(b) - pos
		}
		l := b[pos : pos+end]
		switch {
		case len(l) == 0 || l[0] == ' ' || l[0] == '#':
			// inside a section, blank, or a comment
		case bytes.HasPrefix(l, []byte("---")) || bytes.HasPrefix(l, []byte("...")) || l[0] == '%':
			return nil, false
		default:
			m := topKeyRe.FindSubmatch(l)
			if m == nil {
				return nil, false
			}
			if len(secs) > 0 {
				secs[len(secs)-1].end = pos
			}
			secs = append(secs, section{key: string(m[1]), start: pos, end: len(b), line: line})
		}
		if len(secs) == 0 && len(bytes.TrimSpace(l)) > 0 && l[0] != '#' {
			return nil, false // indented content before the first key
		}
		pos = next
	}
	return secs, true
}

// item is one entry of a block sequence: the byte range of its text (its
// "- " line to its last content line) inside the document, its first line,
// and the range of the blank and comment lines that follow it.
type item struct {
	start, end int
	line       int
}

// splitItems returns the entries of the block sequence that is sec's value
// (the "tags:" key line alone, then entries "- ..." at one indentation),
// with the indentation of their "- ", or ok false when sec's value is not
// such a sequence (an inline value, a flow list, or content it cannot
// place).
func splitItems(b []byte, sec section) (items []item, indent int, ok bool) {
	text := b[sec.start:sec.end]
	nl := bytes.IndexByte(text, '\n')
	if nl < 0 {
		return nil, 0, !hasInlineValue(text)
	}
	if hasInlineValue(text[:nl]) {
		return nil, 0, false
	}
	return seqItems(b, sec.start+nl+1, sec.end, sec.line+1)
}

// seqItems splits the block sequence in b[from:to], whose first line is
// line, into its entries.
func seqItems(b []byte, from, to, line int) (items []item, indent int, ok bool) {
	indent = -1
	line--
	lastContent := -1 // end of the last content line, relative to b
	for pos := from; pos < to; {
		line++
		end := bytes.IndexByte(b[pos:to], '\n')
		next := to
		if end >= 0 {
			next = pos + end + 1
		} else {
			end = to - pos
		}
		l := b[pos : pos+end]
		trim := bytes.TrimLeft(l, " ")
		switch {
		case len(trim) == 0 || trim[0] == '#':
			// blank or comment: belongs to the gap after an item
		default:
			ind := len(l) - len(trim)
			isEntry := trim[0] == '-' && (len(trim) == 1 || trim[1] == ' ')
			switch {
			case indent < 0 && isEntry:
				indent = ind
			case indent < 0:
				return nil, 0, false
			}
			if ind == indent && isEntry {
				if len(items) > 0 {
					items[len(items)-1].end = lastContent
				}
				items = append(items, item{start: pos, line: line})
			} else if ind <= indent {
				return nil, 0, false
			}
			lastContent = pos + end
		}
		pos = next
	}
	if len(items) > 0 {
		items[len(items)-1].end = lastContent
	}
	if indent < 0 {
		indent = 0
	}
	return items, indent, true
}

// hasInlineValue reports whether a "key: ..." line holds a value after the
// colon (other than a comment).
func hasInlineValue(keyLine []byte) bool {
	i := bytes.IndexByte(keyLine, ':')
	if i < 0 {
		return true
	}
	rest := bytes.TrimSpace(keyLine[i+1:])
	return len(rest) > 0 && rest[0] != '#'
}

// shiftLines adds delta to the line of n and everything under it, so that
// a fragment's nodes carry the lines of the whole document.
func shiftLines(n *yaml.Node, delta int) {
	if n == nil || delta == 0 {
		return
	}
	n.Line += delta
	for _, c := range n.Content {
		shiftLines(c, delta)
	}
}

// parseFragment parses b, a piece of a document whose first line is line,
// into its first node, with the document's line numbers (also in a syntax
// error). It returns nil for an empty fragment.
func parseFragment(b []byte, line int) (*yaml.Node, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(b, &root); err != nil {
		return nil, shiftSyntax(syntaxError(err), line-1)
	}
	if len(root.Content) == 0 {
		return nil, nil
	}
	n := root.Content[0]
	shiftLines(n, line-1)
	return n, nil
}

// shiftSyntax adds delta to the line a syntax error names.
func shiftSyntax(err error, delta int) error {
	se, ok := err.(*SyntaxError)
	if !ok || delta == 0 {
		return err
	}
	rest, ok := strings.CutPrefix(se.Msg, "line ")
	if !ok {
		return err
	}
	i := strings.Index(rest, ":")
	n, cerr := strconv.Atoi(rest[:max(i, 0)])
	if cerr != nil {
		return err
	}
	return &SyntaxError{Msg: fmt.Sprintf("line %d%s", n+delta, rest[i:])}
}

// decodeDoc strictly decodes the YAML document b into v (a pointer to a
// struct), section by section when b can be split (splitTop): each
// top-level key's text is parsed alone, and the key named seqKey (the
// project's "tags"), when it holds a block sequence, one entry at a time,
// through each(entry node, element value). Otherwise b is parsed whole.
// The result is the same either way; the split way never holds the node
// tree of the whole document. A syntax error stops the decoding and is
// returned as a *SyntaxError; every other problem is returned, joined,
// with v decoded as far as they allow.
func decodeDoc(b []byte, v any, what string, maxItems int) (keyLines map[string]int, err error) {
	rv := reflect.ValueOf(v).Elem()
	keyLines = map[string]int{}
	secs, ok := splitTop(b)
	if !ok {
		var root yaml.Node
		if err := yaml.Unmarshal(b, &root); err != nil {
			return keyLines, syntaxError(err)
		}
		if len(root.Content) == 0 {
			return keyLines, nil
		}
		top := root.Content[0]
		if top.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(top.Content); i += 2 {
				keyLines[top.Content[i].Value] = top.Content[i].Line
			}
		}
		d := &decoder{}
		d.decode(top, rv, where{section: what})
		return keyLines, d.err()
	}
	for _, sec := range secs {
		if _, dup := keyLines[sec.key]; !dup {
			keyLines[sec.key] = sec.line
		}
	}
	d := &decoder{}
	fields := yamlFields(rv.Type())
	seen := map[string]int{}
	for _, sec := range secs {
		if first, dup := seen[sec.key]; dup {
			d.errs = append(d.errs, fmt.Errorf("line %d: key %q given twice (first at line %d)", sec.line, sec.key, first))
			continue
		}
		seen[sec.key] = sec.line
		idx, known := fields[sec.key]
		if !known {
			d.errs = append(d.errs, unknownKey(&yaml.Node{Value: sec.key, Line: sec.line}, what, fieldNames(rv.Type())))
			continue
		}
		fv := rv.Field(idx)
		if fv.Kind() == reflect.Slice && fv.Type().Elem().Kind() == reflect.Struct {
			if items, _, ok := splitItems(b, sec); ok {
				if len(items) == 0 {
					continue // "tags:" alone is null, as in the whole-document parse
				}
				if maxItems > 0 && len(items) > maxItems {
					d.errs = append(d.errs, fmt.Errorf("line %d: %s: %d entries, over the limit of %d (docs/limits.md)", sec.line, sec.key, len(items), maxItems))
					continue
				}
				if err := decodeItems(b, items, fv, d, where{section: what}.child(sec.key)); err != nil {
					return keyLines, err
				}
				continue
			}
		}
		n, err := parseFragment(b[sec.start:sec.end], sec.line)
		if err != nil {
			return keyLines, err
		}
		if n == nil || n.Kind != yaml.MappingNode || len(n.Content) < 2 {
			continue
		}
		d.decode(n.Content[1], fv, where{section: what}.child(sec.key))
		if maxItems > 0 && fv.Kind() == reflect.Slice && fv.Len() > maxItems {
			d.errs = append(d.errs, fmt.Errorf("line %d: %s: %d entries, over the limit of %d (docs/limits.md)", sec.line, sec.key, fv.Len(), maxItems))
			fv.Set(reflect.Zero(fv.Type()))
		}
	}
	return keyLines, d.err()
}

// decodeList strictly decodes b, a YAML document that is a list, into the
// slice fv, one entry at a time when b is a plain block sequence.
func decodeList(b []byte, fv reflect.Value, maxItems int) error {
	d := &decoder{}
	if items, _, ok := seqItems(b, 0, len(b), 1); ok && plainText(b) && !bytes.ContainsAny(b, "&*") && !bytes.HasPrefix(b, []byte("---")) {
		if maxItems > 0 && len(items) > maxItems {
			return fmt.Errorf("line 1: %d entries, over the limit of %d (docs/limits.md)", len(items), maxItems)
		}
		if err := decodeItems(b, items, fv, d, where{}); err != nil {
			return err
		}
		return d.err()
	}
	var root yaml.Node
	if err := yaml.Unmarshal(b, &root); err != nil {
		return syntaxError(err)
	}
	if len(root.Content) > 0 {
		if n := root.Content[0]; n.Kind == yaml.SequenceNode && maxItems > 0 && len(n.Content) > maxItems {
			return fmt.Errorf("line 1: %d entries, over the limit of %d (docs/limits.md)", len(n.Content), maxItems)
		}
		d.decode(root.Content[0], fv, where{})
	}
	return d.err()
}

// itemChunk is how many sequence entries decodeItems parses at once: the
// node tree of one chunk is the most a parse holds (some 4 MB), and the
// parser's start-up cost is shared by the chunk.
const itemChunk = 1000

// decodeItems decodes the entries of a block sequence into the slice fv,
// itemChunk entries at a time (their text is contiguous in b, comments
// between them included, so the chunk parses as the same sequence), each
// chunk by fastItems when it can and by yaml.v3 otherwise; w names the
// sequence for messages.
func decodeItems(b []byte, items []item, fv reflect.Value, d *decoder, w where) error {
	s := reflect.MakeSlice(fv.Type(), len(items), len(items))
	for lo := 0; lo < len(items); lo += itemChunk {
		hi := min(lo+itemChunk, len(items))
		end := items[hi-1].end
		if end < len(b) && b[end] == '\n' {
			end++ // the entry's last line break belongs to it (a block scalar keeps it)
		}
		nodes, fast := fastItems(b, items[lo:hi], items[lo].start, end)
		if !fast {
			n, err := parseFragment(b[items[lo].start:end], items[lo].line)
			if err != nil {
				return err
			}
			if n == nil || n.Kind != yaml.SequenceNode || len(n.Content) != hi-lo {
				return &SyntaxError{Msg: fmt.Sprintf("line %d: not valid YAML: entries that do not parse as %d list items", items[lo].line, hi-lo)}
			}
			nodes = n.Content
		}
		for i, e := range nodes {
			d.decode(e, s.Index(lo+i), w)
		}
	}
	fv.Set(s)
	return nil
}

// plainText reports whether b is UTF-8 made of printable characters and
// line feeds only (no tab, no CR, no control character, no byte order
// mark): a document that is not is parsed whole, so that yaml.v3 reports
// what it refuses, comments included.
func plainText(b []byte) bool {
	for i := 0; i < len(b); {
		c := b[i]
		if c < utf8.RuneSelf {
			if (c < 0x20 && c != '\n') || c == 0x7F {
				return false
			}
			i++
			continue
		}
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError || (r >= 0x80 && r <= 0x9F) || r == 0xFEFF || r == 0xFFFE || r == 0xFFFF {
			return false
		}
		i += n
	}
	return true
}
