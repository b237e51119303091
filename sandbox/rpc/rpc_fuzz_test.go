package rpc

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"testing"
)

func frame(body string) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
	return append(b, body...)
}

// FuzzReadFrames is the worker → daemon direction: any byte stream a
// worker writes is read as frames and decoded without a panic, a frame is
// never longer than MaxFrame, and the fast path for calls agrees with
// encoding/json on every frame it accepts. Seeds: testdata/fuzz/FuzzReadFrames.
func FuzzReadFrames(f *testing.F) {
	for _, s := range []string{
		`{"type":"ready","pid":12,"python":"3.11.2","executable":"/usr/bin/python3"}`,
		`{"type":"call","exec":"e1","id":1,"method":"tag.read","params":{"paths":["A/B"]}}`,
		`{"type":"call","exec":"e1","id":007,"method":"tag.read","params":[]}`,
		`{"type":"log","exec":"e1","level":"info","msg":"hi"}`,
		`{"type":"done","exec":"e1","ok":false,"error":{"kind":"script_error","type":"ValueError","message":"x","line":3,"traceback":""}}`,
		`{"type":"nope"}`, `[]`, `{"type":"call","exec":"a\"b","id":1,"method":"m","params":1}`,
	} {
		f.Add(frame(s))
	}
	f.Add(append(frame(`{"type":"log","exec":"e","level":"info","msg":"a"}`), 0xFF, 0xFF, 0xFF, 0xFF))
	f.Fuzz(func(t *testing.T, stream []byte) {
		r := NewReader(bytes.NewReader(stream))
		for {
			body, err := r.ReadFrame()
			if err != nil {
				if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, ErrFrameTooLarge) {
					t.Fatalf("ReadFrame: unexpected error %v", err)
				}
				return
			}
			if len(body) > MaxFrame {
				t.Fatalf("frame of %d bytes", len(body))
			}
			v, err := Decode(body)
			if err != nil {
				if !errors.Is(err, ErrMalformed) {
					t.Fatalf("Decode error %v does not wrap ErrMalformed", err)
				}
				continue
			}
			if c, ok := decodeCall(body); ok {
				var slow Call
				if err := json.Unmarshal(body, &slow); err != nil || !reflect.DeepEqual(normCall(*c), normCall(slow)) {
					t.Fatalf("fast call %+v, encoding/json %+v (%v) for %q", *c, slow, err, body)
				}
			}
			_ = v
		}
	})
}

func normCall(c Call) Call {
	var b bytes.Buffer
	if json.Compact(&b, c.Params) == nil {
		c.Params = b.Bytes()
	}
	return c
}

// FuzzWriteMessages is the daemon → worker direction: what the daemon
// writes (exec, result with a JSON value, hello) reads back as the same
// message, one frame each.
func FuzzWriteMessages(f *testing.F) {
	f.Add("e1", "pumps", "start", `{"rpm": 1200}`, int64(7), "tag:read")
	f.Add("", "", "", `null`, int64(0), "")
	f.Add("e\"x", "m\u00fc", "\x00", `[1,2.5,"x",{"a":null}]`, int64(-1), "ü")
	f.Fuzz(func(t *testing.T, exec, module, entry, args string, id int64, scope string) {
		if !json.Valid([]byte(args)) {
			return // the daemon only sends JSON values (the caller vouches for WriteResult's)
		}
		var buf bytes.Buffer
		w := NewWriter(&buf)
		msgs := []any{
			&Hello{Type: TypeHello, Allowed: []string{module}, Packages: entry, Installed: []string{scope}, ReadPaths: []string{exec}},
			&Exec{Type: TypeExec, Exec: exec, Module: module, Version: int(id % 1000), Entry: entry, Source: args, Args: json.RawMessage(args)},
			&Result{Type: TypeResult, Exec: exec, ID: id, OK: true, Value: json.RawMessage(args)},
			&Result{Type: TypeResult, Exec: exec, ID: id, Error: &CallError{Kind: "permission_denied", Message: entry, Scope: scope}},
		}
		for _, m := range msgs {
			var err error
			if r, ok := m.(*Result); ok {
				err = w.WriteResult(r)
			} else {
				err = w.WriteMessage(m)
			}
			if err != nil {
				t.Fatalf("write %T: %v", m, err)
			}
		}
		r := NewReader(&buf)
		for _, want := range msgs {
			body, err := r.ReadFrame()
			if err != nil {
				t.Fatal(err)
			}
			got, err := Decode(body)
			if err != nil {
				t.Fatalf("Decode(%q): %v", body, err)
			}
			if !reflect.DeepEqual(norm(got), norm(want)) {
				t.Fatalf("read back %+v, wrote %+v", got, want)
			}
		}
	})
}

// norm re-encodes a message so that raw JSON fields compare by value.
func norm(v any) any {
	b, _ := json.Marshal(v)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return m
}
