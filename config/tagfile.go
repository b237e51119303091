package config

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// TagColumns are the columns of a tag CSV file, in the order FormatTagsCSV
// writes them (issue 5, "Tag import"). path, device and address are
// required in the header; the others may be left out. A header may list
// them in any order.
var TagColumns = []string{"path", "device", "address", "type", "byte_order", "scan", "scale", "units",
	"write_level", "read_only", "description"}

var requiredColumns = []string{"path", "device", "address"}

// ParseTagsCSV reads a tag CSV file: a header row naming the columns
// (TagColumns, case-insensitive), then one tag per row. Cells are trimmed.
// scale is "factor", "factor:offset" or "rawlo:rawhi:englo:enghi" (see
// ParseScale); read_only is true or false (empty: false); the other cells
// are the project file's keys as text. Empty lines and lines starting with
// '#' are skipped; a UTF-8 byte order mark is ignored.
//
// Every row is checked as the project file's tags are (path, type, byte
// order, scan, write level, scale; a path twice in the file). Every problem
// is reported, each as "line N: tag "PATH": what", N the CSV line; on any
// problem no tag is returned, so nothing of the file is half-applied. Line
// of each returned tag is its CSV line. Checks that need the project's
// devices (an unknown device, an address the driver refuses) are the
// caller's.
func ParseTagsCSV(b []byte) ([]TagConfig, error) {
	b = bytes.TrimPrefix(b, []byte("\ufeff"))
	r := csv.NewReader(bytes.NewReader(b))
	r.FieldsPerRecord = -1
	r.Comment = '#'
	header, err := r.Read()
	if errors.Is(err, io.EOF) {
		return nil, errors.New("line 1: empty file; want a header row: " + strings.Join(TagColumns, ","))
	}
	if err != nil {
		return nil, csvError(err)
	}
	hline, _ := r.FieldPos(0)
	col := map[string]int{}
	var errs []error
	for i, h := range header {
		h = strings.ToLower(strings.TrimSpace(h))
		switch {
		case !slices.Contains(TagColumns, h):
			errs = append(errs, fmt.Errorf("line %d: unknown column %q (valid columns: %s)", hline, h, strings.Join(TagColumns, ", ")))
		case col[h] != 0:
			errs = append(errs, fmt.Errorf("line %d: column %q twice", hline, h))
		default:
			col[h] = i + 1
		}
	}
	for _, h := range requiredColumns {
		if col[h] == 0 {
			errs = append(errs, fmt.Errorf("line %d: missing column %q (the header needs %s)", hline, h, strings.Join(requiredColumns, ", ")))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	var tags []TagConfig
	seen := map[string]int{}
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			errs = append(errs, csvError(err))
			break // the reader cannot be trusted past a quoting error
		}
		line, _ := r.FieldPos(0)
		cell := func(name string) string {
			if i := col[name]; i > 0 && i <= len(rec) {
				return strings.TrimSpace(rec[i-1])
			}
			return ""
		}
		tc := TagConfig{Path: cell("path"), Device: cell("device"), Address: cell("address"), Type: cell("type"),
			ByteOrder: cell("byte_order"), Scan: cell("scan"), Units: cell("units"), WriteLevel: cell("write_level"),
			Description: cell("description"), Line: line}
		var rowErrs []error
		if len(rec) != len(header) {
			rowErrs = append(rowErrs, fmt.Errorf("%d fields, the header has %d", len(rec), len(header)))
		}
		if s := cell("scale"); s != "" {
			sc, err := ParseScale(s)
			if err != nil {
				rowErrs = append(rowErrs, err)
			}
			tc.Scale = sc
		}
		if s := cell("read_only"); s != "" {
			ro, err := strconv.ParseBool(s)
			if err != nil {
				rowErrs = append(rowErrs, fmt.Errorf("read_only %q: want true or false", s))
			}
			tc.ReadOnly = ro
		}
		rowErrs = append(rowErrs, tc.check(seen)...)
		for _, e := range rowErrs {
			errs = append(errs, fmt.Errorf("line %d: tag %q: %w", line, tc.Path, e))
		}
		tags = append(tags, tc)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return tags, nil
}

// check returns every problem of tc that needs no device (those
// EngineTags reports), and records its path in seen (path → line) to find
// a path given twice.
func (tc TagConfig) check(seen map[string]int) []error {
	var errs []error
	if first, dup := seen[tc.Path]; dup && tc.Path != "" {
		errs = append(errs, fmt.Errorf("defined twice in the file (first at line %d)", first))
	} else {
		seen[tc.Path] = tc.Line
	}
	if _, err := tc.engineTag(); err != nil {
		errs = append(errs, unjoin(err)...)
	}
	return errs
}

// unjoin returns the errors joined in err (errors.Join), or err alone.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

func csvError(err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return fmt.Errorf("line %d: %v", pe.Line, pe.Err)
	}
	return err
}

// ParseScale parses the CSV form of a tag's scale (DESIGN.md, Project file:
// eng = raw × factor + offset): "factor" ("0.1"), "factor:offset"
// ("0.1:-40") or "rawlo:rawhi:englo:enghi" ("0:27648:0:100", the
// {raw: [lo, hi], eng: [lo, hi]} form). The error names the text.
func ParseScale(s string) (*ScaleConf, error) {
	parts := strings.Split(s, ":")
	nums := make([]float64, len(parts))
	for i, p := range parts {
		f, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil {
			return nil, fmt.Errorf("scale %q: want factor, factor:offset or rawlo:rawhi:englo:enghi (numbers)", s)
		}
		nums[i] = f
	}
	switch len(nums) {
	case 1:
		return &ScaleConf{Factor: &nums[0]}, nil
	case 2:
		return &ScaleConf{Factor: &nums[0], Offset: nums[1]}, nil
	case 4:
		return &ScaleConf{Raw: nums[0:2:2], Eng: nums[2:4:4]}, nil
	}
	return nil, fmt.Errorf("scale %q: want factor, factor:offset or rawlo:rawhi:englo:enghi (%d numbers given)", s, len(nums))
}

// FormatScale is the inverse of ParseScale: "" for no scale.
func FormatScale(sc *ScaleConf) string {
	if sc == nil {
		return ""
	}
	f := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
	if len(sc.Raw) == 2 && len(sc.Eng) == 2 {
		return f(sc.Raw[0]) + ":" + f(sc.Raw[1]) + ":" + f(sc.Eng[0]) + ":" + f(sc.Eng[1])
	}
	factor := 1.0
	if sc.Factor != nil {
		factor = *sc.Factor
	}
	if sc.Offset != 0 {
		return f(factor) + ":" + f(sc.Offset)
	}
	return f(factor)
}

// FormatTagsCSV writes tags as a tag CSV file: the header (TagColumns)
// and one row per tag; ParseTagsCSV reads it back to the same tags. A tag's
// deadband, history and unit_id have no column and are not written.
func FormatTagsCSV(w io.Writer, tags []TagConfig) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(TagColumns); err != nil {
		return err
	}
	for _, t := range tags {
		if err := cw.Write([]string{t.Path, t.Device, t.Address, t.Type, t.ByteOrder, t.Scan, FormatScale(t.Scale),
			t.Units, t.WriteLevel, strconv.FormatBool(t.ReadOnly), t.Description}); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// tagsFile is a YAML tag file: the project file's tags section alone.
type tagsFile struct {
	Tags []TagConfig `yaml:"tags"`
}

// ParseTagsYAML reads a YAML (or JSON) tag file: {tags: [...]} as in the
// project file, or the list alone. Tags are decoded strictly (an unknown
// key names itself and its line) and checked as ParseTagsCSV checks rows;
// every problem is reported as "line N: ..."; on any problem no tag is
// returned. Line of each returned tag is its line in b.
func ParseTagsYAML(b []byte) ([]TagConfig, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(b, &root); err != nil {
		return nil, err
	}
	if len(root.Content) == 0 {
		return nil, errors.New("line 1: empty file; want tags: [{path, device, address, ...}]")
	}
	top := root.Content[0]
	var seq *yaml.Node
	var errs []error
	var f tagsFile
	var derr error
	switch top.Kind {
	case yaml.SequenceNode:
		seq = top
		derr = decodeStrict(b, &f.Tags)
	case yaml.MappingNode:
		for i := 0; i+1 < len(top.Content); i += 2 {
			if k := top.Content[i]; k.Value == "tags" {
				seq = top.Content[i+1]
			}
		}
		derr = decodeStrict(b, &f)
	default:
		return nil, fmt.Errorf("line %d: want tags: [...] or a list of tags", top.Line)
	}
	if derr != nil {
		var te *yaml.TypeError
		if !errors.As(derr, &te) {
			return nil, derr
		}
		for _, e := range te.Errors {
			errs = append(errs, errors.New(strings.Replace(e, " in tagsFile", " in a tag file (valid keys: tags)", 1)))
		}
	}
	if seq == nil || seq.Kind != yaml.SequenceNode {
		errs = append(errs, fmt.Errorf("line %d: no tags list", top.Line))
		return nil, errors.Join(errs...)
	}
	seen := map[string]int{}
	for j, n := range seq.Content {
		if j >= len(f.Tags) {
			break
		}
		tc := &f.Tags[j]
		tc.Line = n.Line
		for _, e := range tc.check(seen) {
			errs = append(errs, fmt.Errorf("line %d: tag %q: %w", tc.Line, tc.Path, e))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return f.Tags, nil
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
	seq := &yaml.Node{Kind: yaml.SequenceNode}
	for _, tc := range tags {
		n, err := TagNode(tc)
		if err != nil {
			return nil, err
		}
		seq.Content = append(seq.Content, n)
	}
	if len(tags) == 0 {
		seq.Style = yaml.FlowStyle
	}
	doc := &yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{{Kind: yaml.MappingNode, Content: []*yaml.Node{
		{Kind: yaml.ScalarNode, Value: "tags"}, seq}}}}
	return encodeYAML(doc)
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
// project) with tags upserted into its tags section by path: a tag whose
// path the project has replaces that entry in place (keeping its comments),
// the others are appended in order. Everything else in doc is kept; the
// result is YAML (comments kept, formatting normalised by yaml.v3).
func UpsertTags(doc []byte, tags []TagConfig) ([]byte, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(doc, &root); err != nil {
		return nil, fmt.Errorf("project: %w", err)
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
				idx[n.Content[k+1].Value] = i
			}
		}
	}
	for _, tc := range tags {
		n, err := TagNode(tc)
		if err != nil {
			return nil, err
		}
		if i, ok := idx[tc.Path]; ok {
			old := seq.Content[i]
			n.HeadComment, n.LineComment, n.FootComment = old.HeadComment, old.LineComment, old.FootComment
			seq.Content[i] = n
			continue
		}
		idx[tc.Path] = len(seq.Content)
		seq.Content = append(seq.Content, n)
	}
	return encodeYAML(&root)
}

// ProjectDiff says what a new project changes against the running one:
// device and tag names added, changed (any key) and removed, each sorted,
// and the other sections whose content differs (scripts, connections,
// named_queries, message_handlers, flows, views, users).
type ProjectDiff struct {
	DevicesAdded, DevicesChanged, DevicesRemoved []string
	TagsAdded, TagsChanged, TagsRemoved          []string
	Sections                                     []string
}

// DiffProjects compares two projects (old may be empty). Lines and file
// names do not count; device configs compare by driver and keys.
func DiffProjects(old, new *Project) ProjectDiff {
	var d ProjectDiff
	od := map[string]DeviceConfig{}
	for _, x := range old.Devices {
		od[x.Name] = x
	}
	nd := map[string]bool{}
	for _, x := range new.Devices {
		nd[x.Name] = true
		o, ok := od[x.Name]
		switch {
		case !ok:
			d.DevicesAdded = append(d.DevicesAdded, x.Name)
		case o.Driver != x.Driver || !bytes.Equal(o.Raw, x.Raw):
			d.DevicesChanged = append(d.DevicesChanged, x.Name)
		}
	}
	for _, x := range old.Devices {
		if !nd[x.Name] {
			d.DevicesRemoved = append(d.DevicesRemoved, x.Name)
		}
	}
	ot := map[string]TagConfig{}
	for _, x := range old.Tags {
		x.Line = 0
		ot[x.Path] = x
	}
	nt := map[string]bool{}
	for _, x := range new.Tags {
		nt[x.Path] = true
		x.Line = 0
		o, ok := ot[x.Path]
		switch {
		case !ok:
			d.TagsAdded = append(d.TagsAdded, x.Path)
		case !reflect.DeepEqual(o, x):
			d.TagsChanged = append(d.TagsChanged, x.Path)
		}
	}
	for _, x := range old.Tags {
		if !nt[x.Path] {
			d.TagsRemoved = append(d.TagsRemoved, x.Path)
		}
	}
	if !reflect.DeepEqual(old.Scripts, new.Scripts) && (len(old.Scripts) > 0 || len(new.Scripts) > 0) {
		d.Sections = append(d.Sections, "scripts")
	}
	for _, s := range []struct {
		name     string
		old, new []yaml.Node
	}{
		{"connections", old.Connections, new.Connections},
		{"named_queries", old.NamedQueries, new.NamedQueries},
		{"message_handlers", old.MessageHandlers, new.MessageHandlers},
		{"flows", old.Flows, new.Flows},
		{"views", old.Views, new.Views},
		{"users", old.Users, new.Users},
	} {
		if !sameNodes(s.old, s.new) {
			d.Sections = append(d.Sections, s.name)
		}
	}
	for _, l := range []*[]string{&d.DevicesAdded, &d.DevicesChanged, &d.DevicesRemoved, &d.TagsAdded, &d.TagsChanged, &d.TagsRemoved} {
		slices.Sort(*l)
	}
	return d
}

// sameNodes compares YAML sections by content (not position or style).
func sameNodes(a, b []yaml.Node) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		var x, y any
		if a[i].Decode(&x) != nil || b[i].Decode(&y) != nil || !reflect.DeepEqual(x, y) {
			return false
		}
	}
	return true
}
