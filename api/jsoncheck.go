package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"unicode/utf8"
)

// maxJSONDepth is how deeply a request body may nest arrays and objects
// (encoding/json's own limit, so the check never recurses deeper than
// the decoder would).
const maxJSONDepth = 10000

// checkJSON walks one JSON text before it is decoded into a value of type
// t, and refuses (400, naming the field) what encoding/json would let
// through silently:
//   - invalid UTF-8 in a string, or an escaped lone UTF-16 surrogate
//     ("\ud800"): encoding/json turns both into U+FFFD, and a
//     json.RawMessage keeps the raw bytes (RFC 8259 §8.1: JSON text
//     exchanged between systems is UTF-8);
//   - a key that occurs twice in one object (RFC 8259 §4: names should be
//     unique; encoding/json keeps the last);
//   - a key that matches a field of t only when case is ignored
//     (encoding/json matches case-insensitively): `{"Value": 1}` for a
//     field "value" is an unknown field.
//
// Inside values of type any, json.RawMessage, or a map, keys are free but
// UTF-8 and duplicates are still checked. Syntax errors are returned as
// encoding/json reports them, for decodeError.
func checkJSON(body []byte, t reflect.Type) error {
	c := &jsonChecker{dec: json.NewDecoder(bytes.NewReader(body)), body: body}
	c.dec.UseNumber()
	return c.value(t, "", 0)
}

type jsonChecker struct {
	dec     *json.Decoder
	body    []byte
	started bool // a token was read: an end of input now is a truncation
}

var rawMessageType = reflect.TypeFor[json.RawMessage]()

// next reads one token; a string token's raw bytes must be UTF-8 without
// lone surrogate escapes. where names the token for the error.
func (c *jsonChecker) next(where func() string) (json.Token, error) {
	start := c.dec.InputOffset()
	tok, err := c.dec.Token()
	if errors.Is(err, io.EOF) && c.started {
		return nil, io.ErrUnexpectedEOF
	}
	if err != nil {
		return nil, err
	}
	c.started = true
	if where == nil {
		where = func() string { return fieldName("") }
	}
	if _, ok := tok.(string); ok {
		raw := c.body[start:c.dec.InputOffset()]
		if !utf8.Valid(raw) {
			return nil, errorf(http.StatusBadRequest, KindInvalid, "%s: invalid UTF-8 (JSON text must be UTF-8)", where())
		}
		if loneSurrogate(raw) {
			return nil, errorf(http.StatusBadRequest, KindInvalid, `%s: a lone UTF-16 surrogate escape (\ud800-\udfff not in a pair) is not a character`, where())
		}
	}
	return tok, nil
}

// fieldName names path for an error: `field "writes[0].value"`, or "the
// request body" at the top.
func fieldName(path string) string {
	if path == "" {
		return "the request body"
	}
	return fmt.Sprintf("field %q", path)
}

// value checks the next JSON value, to be decoded into t (nil: anything).
func (c *jsonChecker) value(t reflect.Type, path string, depth int) error {
	tok, err := c.next(func() string { return fieldName(path) })
	if err != nil {
		return err
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return nil
	}
	if depth >= maxJSONDepth {
		return errorf(http.StatusBadRequest, KindInvalid, "%s nests deeper than %d levels", fieldName(path), maxJSONDepth)
	}
	t = shapeOf(t)
	switch d {
	case '{':
		return c.object(t, path, depth)
	case '[':
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for i := 0; c.dec.More(); i++ {
			if err := c.value(elem, fmt.Sprintf("%s[%d]", path, i), depth+1); err != nil {
				return err
			}
		}
		_, err := c.next(nil) // ']'
		return err
	}
	return nil
}

// object checks an object's keys and values; its '{' was read.
func (c *jsonChecker) object(t reflect.Type, path string, depth int) error {
	var fields map[string]reflect.Type
	var elem reflect.Type
	switch {
	case t != nil && t.Kind() == reflect.Struct:
		fields = structFields(t)
	case t != nil && t.Kind() == reflect.Map:
		elem = t.Elem()
	}
	seen := map[string]bool{}
	for c.dec.More() {
		tok, err := c.next(func() string { return "a key in " + fieldName(path) })
		if err != nil {
			return err
		}
		key, _ := tok.(string)
		child := key
		if path != "" {
			child = path + "." + key
		}
		if seen[key] {
			return errorf(http.StatusBadRequest, KindInvalid, "duplicate key %q in %s", key, objectName(path))
		}
		seen[key] = true
		ft := elem
		if fields != nil {
			var ok bool
			if ft, ok = fields[key]; !ok {
				return unknownField(key, path, fields)
			}
		}
		if err := c.value(ft, child, depth+1); err != nil {
			return err
		}
	}
	_, err := c.next(nil) // '}'
	return err
}

func objectName(path string) string {
	if path == "" {
		return "the request body"
	}
	return fmt.Sprintf("%q", path)
}

// unknownField is the 400 of a key t has no field for; a key that differs
// from a field only in case says which one was meant.
func unknownField(key, path string, fields map[string]reflect.Type) error {
	in := ""
	if path != "" {
		in = fmt.Sprintf(" in %q", path)
	}
	for name := range fields {
		if strings.EqualFold(name, key) {
			return errorf(http.StatusBadRequest, KindInvalid, "unknown field %q%s (field names are case-sensitive: did you mean %q?)", key, in, name)
		}
	}
	return errorf(http.StatusBadRequest, KindInvalid, "unknown field %q%s", key, in)
}

// shapeOf is the type whose keys a JSON value must match: pointers are
// followed; any, json.RawMessage and non-struct types with their own
// decoder take anything (nil).
func shapeOf(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == nil, t == rawMessageType, t.Kind() == reflect.Interface:
		return nil
	case t.Kind() != reflect.Struct && reflect.PointerTo(t).Implements(reflect.TypeFor[json.Unmarshaler]()):
		return nil
	}
	return t
}

var fieldCache sync.Map // reflect.Type → map[string]reflect.Type

// structFields maps the JSON names of t's fields to their types, as
// encoding/json names them: the tag's name, else the Go name; "-" is
// skipped; embedded structs without a tag name promote their fields (the
// outer one wins).
func structFields(t reflect.Type) map[string]reflect.Type {
	if m, ok := fieldCache.Load(t); ok {
		return m.(map[string]reflect.Type)
	}
	m := map[string]reflect.Type{}
	var embedded []reflect.Type
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				embedded = append(embedded, ft)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		m[name] = f.Type
	}
	for _, et := range embedded {
		for name, ft := range structFields(et) {
			if _, ok := m[name]; !ok {
				m[name] = ft
			}
		}
	}
	fieldCache.Store(t, m)
	return m
}

// loneSurrogate reports whether the raw JSON string token raw holds a
// \uXXXX escape of a UTF-16 surrogate that is not part of a high-low pair.
func loneSurrogate(raw []byte) bool {
	hex4 := func(i int) (rune, bool) {
		if i+6 > len(raw) || raw[i] != '\\' || raw[i+1] != 'u' {
			return 0, false
		}
		var r rune
		for _, b := range raw[i+2 : i+6] {
			switch {
			case '0' <= b && b <= '9':
				r = r<<4 | rune(b-'0')
			case 'a' <= b && b <= 'f':
				r = r<<4 | rune(b-'a'+10)
			case 'A' <= b && b <= 'F':
				r = r<<4 | rune(b-'A'+10)
			default:
				return 0, false
			}
		}
		return r, true
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		r, ok := hex4(i)
		if !ok {
			i++ // an escape of one character: skip it
			continue
		}
		switch {
		case 0xD800 <= r && r < 0xDC00:
			lo, ok := hex4(i + 6)
			if !ok || lo < 0xDC00 || lo > 0xDFFF {
				return true
			}
			i += 11
		case 0xDC00 <= r && r <= 0xDFFF:
			return true
		default:
			i += 5
		}
	}
	return false
}

// decodeJSON decodes the JSON text body into dst strictly (checkJSON,
// then encoding/json with unknown keys refused and numbers kept as
// json.Number where dst holds any): exactly one JSON value. It is the
// one decoder of request bodies (decodeBody) and WebSocket messages.
// Every failure is a 400 naming the field or the position.
func decodeJSON(body []byte, dst any) error {
	if err := checkJSON(body, reflect.TypeOf(dst)); err != nil {
		return decodeError(err)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(dst); err != nil {
		return decodeError(err)
	}
	// Exactly one value: anything but white space after it is refused.
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		if err != nil {
			return decodeError(err)
		}
		return errorf(http.StatusBadRequest, KindInvalid, "request body has data after the JSON value")
	}
	return nil
}
