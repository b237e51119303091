package value

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
)

// The JSON form of a tag value, shared by every front door that speaks JSON
// (REST, the system.* calls of scripts, MQTT payloads) so integers and
// non-finite floats are treated the same everywhere.

// ErrJSONObject is wrapped by DecodeJSON when the JSON holds an object: tag
// values are numbers, bools, strings, null or arrays of them.
var ErrJSONObject = errors.New("a tag value cannot be a JSON object")

// DecodeJSON decodes one JSON tag value into Normalize form: numbers become
// int64 when they are integers that fit, else uint64 when they fit, else
// float64, so 9007199254740993 and 18446744073709551615 stay exact. An empty
// input is nil. An object anywhere in the value wraps ErrJSONObject;
// malformed JSON returns the decoder's error; data after the value is an
// error.
func DecodeJSON(raw []byte) (Value, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("unexpected data after the value")
	}
	if err := checkNoObject(v); err != nil {
		return nil, err
	}
	return Normalize(v), nil
}

func checkNoObject(v any) error {
	switch x := v.(type) {
	case map[string]any:
		return ErrJSONObject
	case []any:
		for _, e := range x {
			if err := checkNoObject(e); err != nil {
				return err
			}
		}
	}
	return nil
}

// EncodeJSON encodes a tag value as JSON after Normalize: int64 and uint64
// as exact integers, NaN and ±Inf floats (which JSON cannot hold) as null.
// It returns an error for a Go type that is not a tag value.
func EncodeJSON(v Value) (json.RawMessage, error) {
	v = finite(Normalize(v))
	switch v.(type) {
	case nil, bool, int64, uint64, float64, string, []any:
	default:
		return nil, fmt.Errorf("value of type %T is not a tag value", v)
	}
	return json.Marshal(v)
}

func finite(v any) any {
	switch x := v.(type) {
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil
		}
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = finite(Normalize(e))
		}
		return out
	}
	return v
}
