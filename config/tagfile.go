package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"qubiq.dev/edge/tagpath"
)

// tagsFile is a YAML tag file: the project file's tags section alone.
type tagsFile struct {
	Tags []TagConfig `yaml:"tags"`
}

// ParseTagsYAML is ReadTagsYAML of b without device checks.
func ParseTagsYAML(b []byte) ([]TagConfig, error) { return ReadTagsYAML(b, TagImport{}) }

// ReadTagsYAML reads a YAML (or JSON) tag file: {tags: [...]} as in the
// project file, or the list alone. Tags are decoded strictly (an unknown
// key names itself and its line, with a suggestion) and checked as
// ReadTagsCSV checks rows, against opt.Devices when set; every problem of
// the file is reported in one pass as "line N: ..."; on any problem no tag
// is returned. Line of each returned tag is its line in b. A file of block
// YAML is read one tag at a time; more tags than opt's cap is an error
// naming the cap.
func ReadTagsYAML(b []byte, opt TagImport) ([]TagConfig, error) {
	if len(b) > MaxProjectBytes {
		return nil, fmt.Errorf("tag file of %d bytes is over the limit of %d (docs/limits.md)", len(b), MaxProjectBytes)
	}
	var f tagsFile
	var derr error
	switch firstContent(b) {
	case 0:
		return nil, errors.New("line 1: empty file; want tags: [{path, device, address, ...}]")
	case '-', '[':
		derr = decodeList(b, reflect.ValueOf(&f.Tags).Elem(), opt.maxTags())
	default:
		_, derr = decodeDoc(b, &f, "a tag file", opt.maxTags())
	}
	var se *SyntaxError
	if errors.As(derr, &se) {
		return nil, derr
	}
	var errs []error
	if derr != nil {
		errs = append(errs, unjoin(derr)...)
	}
	if f.Tags == nil && derr == nil {
		errs = append(errs, errors.New("line 1: no tags list; want tags: [{path, device, address, ...}]"))
	}
	seen := map[string]int{}
	for i := range f.Tags {
		tc := &f.Tags[i]
		tc.Path = tagpath.Normalize(tc.Path)
		for _, e := range append(tc.check(seen), opt.Devices.check(*tc)...) {
			errs = append(errs, fmt.Errorf("line %d: tag %s: %w", tc.Line, quotePath(tc.Path), e))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return f.Tags, nil
}

// firstContent returns the first character of b that is not white space
// or inside a comment, 0 when there is none.
func firstContent(b []byte) byte {
	for len(b) > 0 {
		b = bytes.TrimLeft(b, " \t\r\n")
		if len(b) == 0 {
			return 0
		}
		if b[0] != '#' {
			return b[0]
		}
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			return 0
		}
		b = b[i+1:]
	}
	return 0
}

// TagNode returns tc as the YAML node the project file holds: a flow
// mapping ({path: ..., device: ...}) of the keys that are set.
func TagNode(tc TagConfig) (*yaml.Node, error) {
	var n yaml.Node
	if err := n.Encode(tc); err != nil {
		return nil, fmt.Errorf("tag %q: %w", tc.Path, err)
	}
	var flow func(*yaml.Node)
	flow = func(x *yaml.Node) {
		if x.Kind == yaml.MappingNode || x.Kind == yaml.SequenceNode {
			x.Style = yaml.FlowStyle
		}
		for _, c := range x.Content {
			flow(c)
		}
	}
	flow(&n)
	return &n, nil
}

// FormatTagsYAML writes tags as a YAML tag file, tags: [...] with one flow
// mapping per tag, as the project file writes them; ParseTagsYAML reads it
// back to the same tags.
func FormatTagsYAML(tags []TagConfig) ([]byte, error) {
	if len(tags) == 0 {
		return []byte("tags: []\n"), nil
	}
	var buf bytes.Buffer
	buf.WriteString("tags:\n")
	for _, tc := range tags {
		b, err := renderItem(tc, 2)
		if err != nil {
			return nil, err
		}
		buf.Write(b)
	}
	return buf.Bytes(), nil
}

// renderItem renders one tag as a block sequence entry at indentation
// indent: "  - {path: ..., ...}\n", the keys in the order and with the
// omissions of TagNode. It writes the YAML itself (flowTag) rather than
// through yaml.v3's encoder, which costs some 40 KB of allocations a tag:
// an import of 100,000 tags renders them all.
func renderItem(tc TagConfig, indent int) ([]byte, error) {
	b := make([]byte, 0, 160)
	for range indent {
		b = append(b, ' ')
	}
	b = append(b, "- "...)
	b = flowTag(b, tc)
	return append(b, '\n'), nil
}

// flowTag appends tc as a YAML flow mapping.
func flowTag(b []byte, tc TagConfig) []byte {
	b = append(b, '{')
	first := true
	key := func(k string) {
		if !first {
			b = append(b, ", "...)
		}
		first = false
		b = append(b, k...)
		b = append(b, ": "...)
	}
	str := func(k, v string, always bool) {
		if v != "" || always {
			key(k)
			b = appendScalar(b, v)
		}
	}
	num := func(k string, f *float64) {
		if f != nil {
			key(k)
			b = appendFloat(b, *f)
		}
	}
	str("path", tc.Path, true)
	str("device", tc.Device, true)
	str("address", tc.Address, true)
	str("type", tc.Type, false)
	str("byte_order", tc.ByteOrder, false)
	str("scan", tc.Scan, false)
	if d := tc.Deadband; d != nil {
		key("deadband")
		b, first = append(b, '{'), true
		num("absolute", d.Absolute)
		num("percent", d.Percent)
		b, first = append(b, '}'), false
	}
	if sc := tc.Scale; sc != nil {
		key("scale")
		b, first = append(b, '{'), true
		num("factor", sc.Factor)
		num("offset", sc.Offset)
		for _, l := range []struct {
			k  string
			xs []float64
		}{{"raw", sc.Raw}, {"eng", sc.Eng}} {
			if len(l.xs) > 0 {
				key(l.k)
				b = append(b, '[')
				for i, x := range l.xs {
					if i > 0 {
						b = append(b, ", "...)
					}
					b = appendFloat(b, x)
				}
				b = append(b, ']')
			}
		}
		b, first = append(b, '}'), false
	}
	str("units", tc.Units, false)
	str("write_level", tc.WriteLevel, false)
	if tc.ReadOnly {
		key("read_only")
		b = append(b, "true"...)
	}
	if tc.UnitID != nil {
		key("unit_id")
		b = strconv.AppendInt(b, int64(*tc.UnitID), 10)
	}
	str("description", tc.Description, false)
	if h := tc.History; h != nil {
		key("history")
		b, first = append(b, '{'), true
		key("enabled")
		b = strconv.AppendBool(b, h.Enabled)
		num("deadband", h.Deadband)
		str("max_interval", h.MaxInterval, false)
		b, first = append(b, '}'), false
	}
	str("non_finite", tc.NonFinite, false)
	str("string_byte_order", tc.StringByteOrder, false)
	str("encoding", tc.Encoding, false)
	num("min", tc.Min)
	num("max", tc.Max)
	return append(b, '}')
}

var (
	plainRe    = regexp.MustCompile(`^[\p{L}_][\p{L}\p{M}\p{N}_./ -]*$`)
	durationRe = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h|d)$`)
	yamlWords  = map[string]bool{"true": true, "false": true, "yes": true, "no": true, "on": true, "off": true,
		"y": true, "n": true, "null": true}
)

// appendScalar appends s as a YAML scalar for a flow mapping: plain when
// it cannot be read as anything but that text (words, paths, durations),
// else double-quoted with JSON's escapes, which YAML's double-quoted style
// reads the same (YAML 1.2 §7.3.1).
func appendScalar(b []byte, s string) []byte {
	plain := s != "" && s[len(s)-1] != ' ' && !strings.Contains(s, " -") &&
		((plainRe.MatchString(s) && !yamlWords[strings.ToLower(s)]) || durationRe.MatchString(s))
	if plain {
		return append(b, s...)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(strings.ToValidUTF8(s, "\uFFFD")) // a string always encodes
	q := bytes.TrimRight(buf.Bytes(), "\n")
	for _, r := range string(q) {
		// JSON leaves these as they are; a YAML stream may not hold them
		// (YAML 1.2 §5.1, c-printable): escape them.
		if r == 0x7F || (r >= 0x80 && r <= 0x9F) || r == 0xFEFF || r == 0xFFFE || r == 0xFFFF {
			b = fmt.Appendf(b, "\\u%04X", r)
			continue
		}
		b = utf8.AppendRune(b, r)
	}
	return b
}

// appendFloat appends f as a YAML float (or integer) that reads back as f.
func appendFloat(b []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(b, ".nan"...)
	case math.IsInf(f, 1):
		return append(b, ".inf"...)
	case math.IsInf(f, -1):
		return append(b, "-.inf"...)
	}
	return strconv.AppendFloat(b, f, 'g', -1, 64)
}

func encodeYAML(n *yaml.Node) ([]byte, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(n); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// UpsertTags returns the project document doc (YAML or JSON; empty for no
// project) with tags upserted into its tags section by path (compared in
// NFC): a tag whose path the project has replaces that entry in place
// (keeping the comments before it and on its line), the others are
// appended in order. Everything else in doc is kept. A block-style YAML
// document is edited as text, one entry at a time: the rest of it stays as
// it was, byte for byte, and no node tree of the whole document is built.
// Other documents (JSON, flow style) are rewritten through yaml.v3 as
// block YAML (comments kept, formatting normalised).
func UpsertTags(doc []byte, tags []TagConfig) ([]byte, error) {
	if out, ok, err := upsertText(doc, tags); ok || err != nil {
		return out, err
	}
	return upsertTree(doc, tags)
}

// upsertText is UpsertTags on a document that splitTop can split; ok is
// false for one it cannot edit as text.
func upsertText(doc []byte, tags []TagConfig) ([]byte, bool, error) {
	secs, ok := splitTop(doc)
	if !ok {
		return nil, false, nil
	}
	var tagsSec *section
	for i := range secs {
		if secs[i].key == "tags" {
			tagsSec = &secs[i]
		}
	}
	var items []item
	indent := 2
	if tagsSec != nil {
		if items, indent, ok = splitItems(doc, *tagsSec); !ok {
			return nil, false, nil
		}
		if len(items) == 0 {
			indent = 2
		}
	}
	// Where each existing path is, and the comment on its entry's line.
	type entry struct {
		it      item
		comment string
	}
	byPath := map[string]int{}
	entries := make([]entry, len(items))
	for i, it := range items {
		n, err := parseFragment(doc[it.start:it.end], it.line)
		if err != nil {
			return nil, true, fmt.Errorf("project: %w", err)
		}
		entries[i].it = it
		if n == nil || n.Kind != yaml.SequenceNode || len(n.Content) != 1 {
			continue
		}
		e := n.Content[0]
		entries[i].comment = e.LineComment
		if e.Kind == yaml.MappingNode {
			for k := 0; k+1 < len(e.Content); k += 2 {
				if e.Content[k].Value == "path" {
					byPath[tagpath.Normalize(e.Content[k+1].Value)] = i
				}
			}
		}
	}
	replace := map[int][]byte{}
	var added [][]byte
	addedAt := map[string]int{}
	for _, tc := range tags {
		b, err := renderItem(tc, indent)
		if err != nil {
			return nil, true, err
		}
		p := tagpath.Normalize(tc.Path)
		if i, ok := byPath[p]; ok {
			if c := entries[i].comment; c != "" {
				b = append(bytes.TrimRight(b, "\n"), []byte(" "+c+"\n")...)
			}
			replace[i] = bytes.TrimRight(b, "\n")
			continue
		}
		if i, ok := addedAt[p]; ok { // a path given twice in tags: the last one wins
			added[i] = b
			continue
		}
		addedAt[p] = len(added)
		added = append(added, b)
	}
	appended := bytes.Join(added, nil)
	var out bytes.Buffer
	out.Grow(len(doc) + len(appended))
	if tagsSec == nil {
		out.Write(doc)
		if len(doc) > 0 && doc[len(doc)-1] != '\n' {
			out.WriteByte('\n')
		}
		out.WriteString("tags:\n")
		out.Write(appended)
		return out.Bytes(), true, nil
	}
	pos := 0
	for i, e := range entries {
		if b, ok := replace[i]; ok {
			out.Write(doc[pos:e.it.start])
			out.Write(b)
			pos = e.it.end
		}
	}
	// New entries go after the last entry of the section (or right after
	// "tags:" when it has none), before the comments and blank lines that
	// lead to the next section.
	insert := tagsSec.start + bytes.IndexByte(doc[tagsSec.start:tagsSec.end], '\n') + 1
	if bytes.IndexByte(doc[tagsSec.start:tagsSec.end], '\n') < 0 {
		insert = tagsSec.end
	}
	if len(entries) > 0 {
		last := entries[len(entries)-1].it.end
		insert = last + 1
		if last >= len(doc) || doc[last] != '\n' {
			insert = last
		}
	}
	insert = max(insert, pos)
	out.Write(doc[pos:insert])
	if len(appended) > 0 {
		if out.Len() > 0 && out.Bytes()[out.Len()-1] != '\n' {
			out.WriteByte('\n')
		}
		out.Write(appended)
	}
	out.Write(doc[insert:])
	return out.Bytes(), true, nil
}

// upsertTree is UpsertTags through yaml.v3's node tree, for documents
// upsertText cannot edit as text.
func upsertTree(doc []byte, tags []TagConfig) ([]byte, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(doc, &root); err != nil {
		return nil, fmt.Errorf("project: %w", syntaxError(err))
	}
	if len(root.Content) == 0 {
		root = yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{{Kind: yaml.MappingNode}}}
	}
	top := root.Content[0]
	if top.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("project: line %d: want a mapping (devices:, tags:, ...)", top.Line)
	}
	top.Style &^= yaml.FlowStyle // a JSON document becomes block YAML at the top
	var seq *yaml.Node
	for i := 0; i+1 < len(top.Content); i += 2 {
		if top.Content[i].Value == "tags" {
			v := top.Content[i+1]
			if v.Kind != yaml.SequenceNode {
				if v.Kind != yaml.ScalarNode || (v.Tag != "!!null" && v.Value != "") {
					return nil, fmt.Errorf("project: line %d: tags: want a list", v.Line)
				}
				*v = yaml.Node{Kind: yaml.SequenceNode, LineComment: v.LineComment}
			}
			seq = v
		}
	}
	if seq == nil {
		seq = &yaml.Node{Kind: yaml.SequenceNode}
		top.Content = append(top.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: "tags"}, seq)
	}
	seq.Style = 0 // block: one tag per line
	idx := map[string]int{}
	for i, n := range seq.Content {
		if n.Kind != yaml.MappingNode {
			continue
		}
		for k := 0; k+1 < len(n.Content); k += 2 {
			if n.Content[k].Value == "path" {
				idx[tagpath.Normalize(n.Content[k+1].Value)] = i
			}
		}
	}
	for _, tc := range tags {
		n, err := TagNode(tc)
		if err != nil {
			return nil, err
		}
		p := tagpath.Normalize(tc.Path)
		if i, ok := idx[p]; ok {
			old := seq.Content[i]
			n.HeadComment, n.LineComment, n.FootComment = old.HeadComment, old.LineComment, old.FootComment
			seq.Content[i] = n
			continue
		}
		idx[p] = len(seq.Content)
		seq.Content = append(seq.Content, n)
	}
	return encodeYAML(&root)
}
