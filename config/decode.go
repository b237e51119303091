package config

import (
	"encoding"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"

	"qubiq.dev/edge/device"
	"qubiq.dev/edge/internal/yamlnode"
)

// This file is the strict YAML decoder of every file config reads (the
// daemon config, the project file, tag files). It walks yaml.v3's node tree
// itself instead of handing the document to yaml.v3's decoder, so that each
// problem is reported in words with its line and key, the way a technician
// reads it:
//
//	line 4: unknown key "lisen" in http (valid keys: listen, tls); did you mean "listen"?
//	line 9: tag key "scan": want text such as 1s, got a list
//
// never as "cannot unmarshal !!seq into string", and every problem of the
// document is found in one pass (the value is decoded as far as it goes).

// DecodeNode strictly decodes the YAML node n into v (a pointer), as the
// project file's own sections are decoded: unknown keys are errors naming
// the key, the section (what, such as "a view") and the valid keys, with a
// suggestion when a key looks like a valid one; a value of the wrong kind
// names the key, what was wanted and what was found. Lines are n's (the
// document's, never a fragment's). It returns every problem, joined; v is
// decoded as far as the problems allow. Parts of the project that live in
// other packages may use it for their own sections.
func DecodeNode(n *yaml.Node, v any, what string) error {
	d := &decoder{}
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("config: DecodeNode needs a non-nil pointer, got %T", v)
	}
	d.decode(n, rv.Elem(), where{section: what})
	return d.err()
}

// decodeStrict parses b as one YAML document and decodes it into v. A
// document that is not YAML is an error of its own (a syntax error: the
// document could not be read at all); otherwise every problem is returned,
// joined, and v is decoded as far as they allow.
func decodeStrict(b []byte, v any) error {
	var root yaml.Node
	if err := yaml.Unmarshal(b, &root); err != nil {
		return syntaxError(err)
	}
	if len(root.Content) == 0 {
		return nil
	}
	d := &decoder{}
	d.decode(root.Content[0], reflect.ValueOf(v).Elem(), where{})
	return d.err()
}

// SyntaxError is a document that is not YAML at all: nothing was decoded.
type SyntaxError struct{ Msg string }

// Error returns Msg, the parser's words with the line.
func (e *SyntaxError) Error() string { return e.Msg }

// syntaxError words a yaml.v3 parse error ("yaml: line 3: did not find
// expected key") as "line 3: not valid YAML: did not find expected key".
func syntaxError(err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if i := strings.Index(rest, ": "); i > 0 {
			if _, nerr := strconv.Atoi(rest[:i]); nerr == nil {
				return &SyntaxError{Msg: "line " + rest[:i] + ": not valid YAML: " + rest[i+2:]}
			}
		}
	}
	return &SyntaxError{Msg: "not valid YAML: " + msg}
}

// where is the position of a value in the document: the section words of
// the nearest struct ("http", "a tag", `tag "Line1/X"`) and the key path
// inside it ("gateway_timeout.min").
type where struct {
	section string
	key     string
}

func (w where) child(key string) where {
	if w.key == "" {
		return where{section: w.section, key: key}
	}
	return where{section: w.section, key: w.key + "." + key}
}

// name is how a message names the value: `python.memory_max`, `tag key
// "scan"`, or the section alone.
func (w where) name() string {
	switch {
	case w.key == "" && w.section == "":
		return "the document"
	case w.key == "":
		return w.section
	case w.section == "" || w.section == "the config" || w.section == "the project":
		return w.key
	case strings.HasPrefix(w.section, "a "):
		return strings.TrimPrefix(w.section, "a ") + " key " + strconv.Quote(w.key)
	}
	return w.section + "." + w.key
}

type decoder struct {
	errs []error
}

func (d *decoder) err() error { return errors.Join(d.errs...) }

func (d *decoder) addf(n *yaml.Node, format string, args ...any) {
	d.errs = append(d.errs, fmt.Errorf("line %d: "+format, append([]any{n.Line}, args...)...))
}

var (
	nodeType        = reflect.TypeFor[yaml.Node]()
	unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()
	textType        = reflect.TypeFor[encoding.TextUnmarshaler]()
)

func (d *decoder) decode(n *yaml.Node, v reflect.Value, w where) {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if v.Type() == nodeType {
		v.Set(reflect.ValueOf(*n))
		return
	}
	if isNull(n) {
		v.Set(reflect.Zero(v.Type()))
		return
	}
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		d.decode(n, v.Elem(), w)
		return
	}
	if v.CanAddr() && (v.Addr().Type().Implements(unmarshalerType) || v.Addr().Type().Implements(textType)) {
		if err := n.Decode(v.Addr().Interface()); err != nil {
			d.errs = append(d.errs, d.worded(n, v.Type(), w, err))
		}
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		d.structure(n, v, w)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.addf(n, "%s: want %s, got %s", w.name(), want(v.Type()), got(n))
			return
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, e := range n.Content {
			d.decode(e, s.Index(i), w)
		}
		v.Set(s)
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			d.addf(n, "%s: want %s, got %s", w.name(), want(v.Type()), got(n))
			return
		}
		m := reflect.MakeMapWithSize(v.Type(), len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, e := n.Content[i], n.Content[i+1]
			kv := reflect.New(v.Type().Key()).Elem()
			d.decode(k, kv, w)
			ev := reflect.New(v.Type().Elem()).Elem()
			d.decode(e, ev, w.child(k.Value))
			m.SetMapIndex(kv, ev)
		}
		v.Set(m)
	case reflect.Interface:
		var x any
		if err := n.Decode(&x); err != nil {
			d.errs = append(d.errs, d.worded(n, v.Type(), w, err))
			return
		}
		v.Set(reflect.ValueOf(yamlnode.JSONable(x)))
	default:
		if n.Kind != yaml.ScalarNode {
			d.addf(n, "%s: want %s, got %s", w.name(), want(v.Type()), got(n))
			return
		}
		if v.Kind() == reflect.String && n.Tag != "!!binary" {
			v.SetString(n.Value) // what yaml.v3 does for every other scalar, without a decoder per value
			return
		}
		if err := n.Decode(v.Addr().Interface()); err != nil {
			d.addf(n, "%s: want %s, got %s", w.name(), want(v.Type()), got(n))
		}
	}
}

// structure decodes a mapping into a struct by the fields' yaml tags.
func (d *decoder) structure(n *yaml.Node, v reflect.Value, w where) {
	t := v.Type()
	sw := w
	if words, ok := sectionNames[t.Name()]; ok {
		sw = where{section: words}
		if w.section == "a tag" && words == "a tag" {
			sw = w
		}
	}
	if n.Kind != yaml.MappingNode {
		d.addf(n, "%s: want a mapping {key: value, ...}, got %s", w.name(), got(n))
		return
	}
	if f, ok := t.FieldByName("Line"); ok && f.Tag.Get("yaml") == "-" && f.Type.Kind() == reflect.Int {
		v.FieldByIndex(f.Index).SetInt(int64(n.Line)) // the entry's line, for messages
	}
	fields := yamlFields(t)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, e := n.Content[i], n.Content[i+1]
		idx, ok := fields[k.Value]
		if !ok {
			d.errs = append(d.errs, unknownKey(k, sw.section, fieldNames(t)))
			continue
		}
		d.decode(e, v.Field(idx), sw.child(k.Value))
	}
}

// unknownKey words an unknown key: where it is, the valid keys, and a
// suggestion when one is near.
func unknownKey(k *yaml.Node, section string, valid []string) error {
	if section == "" {
		section = "the document"
	}
	msg := fmt.Sprintf("line %d: unknown key %q in %s", k.Line, k.Value, section)
	if len(valid) > 0 {
		msg += " (valid keys: " + strings.Join(valid, ", ") + ")"
	}
	if s := device.SuggestKey(k.Value, valid, keyHints); s != "" {
		msg += "; " + s
	}
	return errors.New(msg)
}

// keyHints are the keys people write from other products' habits, with
// what to write instead.
var keyHints = map[string]string{
	"host":       `use url: tcp://HOST:PORT (Modbus) or opc.tcp://HOST:PORT (OPC UA) on the device`,
	"port":       `use url: tcp://HOST:PORT (Modbus) or opc.tcp://HOST:PORT (OPC UA) on the device`,
	"ip":         `use url: tcp://HOST:PORT (Modbus) or opc.tcp://HOST:PORT (OPC UA) on the device`,
	"unit":       `did you mean "units" (engineering units) or "unit_id" (the Modbus unit)?`,
	"slave":      `did you mean "unit_id" (the Modbus unit id)?`,
	"slave_id":   `did you mean "unit_id" (the Modbus unit id)?`,
	"datatype":   `did you mean "type"?`,
	"data_type":  `did you mean "type"?`,
	"endian":     `did you mean "byte_order" (ABCD, CDAB, BADC, DCBA)?`,
	"word_order": `did you mean "byte_order" (ABCD, CDAB, BADC, DCBA)?`,
	"interval":   `did you mean "scan" (the tag's scan class, such as 1s)?`,
	"poll":       `did you mean "scan" (the tag's scan class, such as 1s)?`,
	"name":       `did you mean "path" (a tag is named by its path)?`,
}

// worded rewrites an error of a custom unmarshaler or of yaml.v3 into the
// decoder's words; messages that already start with "line N:" are kept.
func (d *decoder) worded(n *yaml.Node, t reflect.Type, w where, err error) error {
	msg := err.Error()
	var te *yaml.TypeError
	if errors.As(err, &te) || strings.Contains(msg, "cannot unmarshal") {
		return fmt.Errorf("line %d: %s: want %s, got %s", n.Line, w.name(), want(t), got(n))
	}
	if strings.HasPrefix(msg, "line ") {
		if i := strings.Index(msg, ": "); i > 0 {
			return fmt.Errorf("%s: %s: %s", msg[:i], w.name(), msg[i+2:])
		}
	}
	return fmt.Errorf("line %d: %s: %s", n.Line, w.name(), msg)
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null" && n.Style == 0 && (n.Value == "" || n.Value == "null" || n.Value == "~" || n.Value == "Null" || n.Value == "NULL")
}

// want says in words what a Go type takes.
func want(t reflect.Type) string {
	switch t {
	case reflect.TypeFor[Duration](), reflect.TypeFor[*Duration]():
		return "a duration such as 500ms, 1s or 35d"
	case reflect.TypeFor[Size](), reflect.TypeFor[*Size]():
		return "a size such as 256MiB"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "text"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "a list [...]"
	case reflect.Map, reflect.Struct:
		return "a mapping {key: value, ...}"
	}
	return "a value"
}

// got says in words what a node holds.
func got(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	case yaml.ScalarNode:
		v := n.Value
		if len(v) > 40 {
			v = v[:40] + "…"
		}
		switch n.Tag {
		case "!!null":
			return "nothing (null)"
		case "!!bool":
			return "the boolean " + v
		case "!!int", "!!float":
			return "the number " + v
		}
		return "the text " + strconv.Quote(v)
	}
	return "something else"
}

// yamlFields maps the yaml keys of t's fields to their indexes (computed
// once per type: a project decodes one struct per tag).
func yamlFields(t reflect.Type) map[string]int {
	if m, ok := fieldCache.Load(t); ok {
		return m.(map[string]int)
	}
	out := map[string]int{}
	for i := 0; i < t.NumField(); i++ {
		tag := strings.Split(t.Field(i).Tag.Get("yaml"), ",")[0]
		if tag != "" && tag != "-" {
			out[tag] = i
		}
	}
	fieldCache.Store(t, out)
	return out
}

var fieldCache sync.Map // reflect.Type → map[string]int

// fieldNames lists the yaml keys of t, in field order.
func fieldNames(t reflect.Type) []string {
	var keys []string
	for i := 0; i < t.NumField(); i++ {
		tag := strings.Split(t.Field(i).Tag.Get("yaml"), ",")[0]
		if tag != "" && tag != "-" {
			keys = append(keys, tag)
		}
	}
	return keys
}
