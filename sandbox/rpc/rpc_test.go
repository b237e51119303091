package rpc

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// samples holds one filled value of every message type.
func samples() map[Type]any {
	return map[Type]any{
		TypeHello: &Hello{Type: TypeHello, Allowed: []string{"json", "math"}, Packages: "/var/lib/qubiq/python-packages",
			Installed: []string{"qpkg"}, ReadPaths: []string{"/opt/x"}},
		TypeReady: &Ready{Type: TypeReady, PID: 4242, Python: "3.11.2", Executable: "/usr/bin/python3.11"},
		TypeExec: &Exec{Type: TypeExec, Exec: "0123456789abcdef", Module: "pumps", Version: 7, Entry: "start",
			Source: "def start(args):\n    return 'é'\n", Batch: true, Args: json.RawMessage(`[{"rpm":1500,"big":18446744073709551615}]`)},
		TypeCall: &Call{Type: TypeCall, Exec: "0123456789abcdef", ID: 3, Method: "tag.read",
			Params: json.RawMessage(`{"paths":["Line1/Pump/Speed"]}`)},
		TypeResult: &Result{Type: TypeResult, Exec: "0123456789abcdef", ID: 3, OK: false,
			Error: &CallError{Kind: "permission_denied", Message: `missing scope "tag:write"`, Scope: "tag:write"}},
		TypeLog: &Log{Type: TypeLog, Exec: "0123456789abcdef", Level: "info", Msg: "hello\nworld"},
		TypeDone: &Done{Type: TypeDone, Exec: "0123456789abcdef", OK: false,
			Error: &ScriptError{Kind: "script_error", Type: "ZeroDivisionError", Message: "division by zero", Line: 3,
				Traceback: "  File \"<script pumps>\", line 3\n"}},
		TypeItem: &Item{Type: TypeItem, Exec: "0123456789abcdef", Index: 2, OK: false,
			Error: &ScriptError{Kind: "bad_result", Type: "TypeError", Message: "not JSON", Line: 0}},
	}
}

func TestReader_ReadFrame_RoundTrip(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	want := samples()
	types := []Type{TypeHello, TypeReady, TypeExec, TypeCall, TypeResult, TypeLog, TypeDone, TypeItem}
	for _, ty := range types {
		if err := w.WriteMessage(want[ty]); err != nil {
			t.Fatalf("WriteMessage(%s): %v", ty, err)
		}
	}
	r := NewReader(&buf)
	for _, ty := range types {
		b, err := r.ReadFrame()
		if err != nil {
			t.Fatalf("ReadFrame(%s): %v", ty, err)
		}
		got, err := Decode(b)
		if err != nil {
			t.Fatalf("Decode(%s): %v", ty, err)
		}
		if !reflect.DeepEqual(got, want[ty]) {
			t.Errorf("%s: got %+v, want %+v", ty, got, want[ty])
		}
	}
	if _, err := r.ReadFrame(); !errors.Is(err, io.EOF) {
		t.Errorf("after the last frame: %v, want io.EOF", err)
	}
}

func TestReader_ReadFrame_Errors(t *testing.T) {
	big := make([]byte, 4)
	binary.BigEndian.PutUint32(big, MaxFrame+1)
	short := append(binary.BigEndian.AppendUint32(nil, 10), []byte("{}")...)
	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{"too large", big, ErrFrameTooLarge},
		{"cut in the body", short, io.ErrUnexpectedEOF},
		{"cut in the header", []byte{0, 0}, io.ErrUnexpectedEOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewReader(bytes.NewReader(tt.in)).ReadFrame()
			if !errors.Is(err, tt.want) {
				t.Errorf("ReadFrame: %v, want %v", err, tt.want)
			}
		})
	}
}

func TestDecode_Malformed(t *testing.T) {
	for _, in := range []string{``, `[]`, `{"type":"nope"}`, `{"id":1}`, `{"type":"call","id":"x"}`, `{"type":"call"`} {
		if _, err := Decode([]byte(in)); !errors.Is(err, ErrMalformed) {
			t.Errorf("Decode(%q): %v, want ErrMalformed", in, err)
		}
	}
}

// A worker cannot add a grant to a frame: unknown fields are dropped.
func TestDecode_Call_ExtraFieldsIgnored(t *testing.T) {
	in := `{"type":"call","exec":"e1","id":1,"method":"tag.write","params":{"paths":["A"],"values":[1]},` +
		`"grant":{"scopes":["tag:write"],"write_level":"design"},"scopes":["tag:write"],"principal":"admin"}`
	v, err := Decode([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	want := &Call{Type: TypeCall, Exec: "e1", ID: 1, Method: "tag.write",
		Params: json.RawMessage(`{"paths":["A"],"values":[1]}`)}
	if !reflect.DeepEqual(v, want) {
		t.Errorf("got %+v, want %+v", v, want)
	}
}

func TestPeekType_FastAndSlowPath(t *testing.T) {
	for in, want := range map[string]Type{
		`{"type":"call","id":1}`:    TypeCall,
		`{ "id":1, "type":"done" }`: TypeDone,
		`{"type":"lo\"g"}`:          Type(`lo"g`),
	} {
		got, err := PeekType([]byte(in))
		if err != nil || got != want {
			t.Errorf("PeekType(%s) = %q, %v; want %q", in, got, err, want)
		}
	}
}

// goSchema returns type → sorted JSON field names of the Go structs, and the
// nested error objects.
func goSchema() map[string][]string {
	out := map[string][]string{}
	for ty, v := range Messages() {
		out[string(ty)] = jsonFields(reflect.TypeOf(v).Elem())
	}
	out["result.error"] = jsonFields(reflect.TypeOf(CallError{}))
	out["done.error"] = jsonFields(reflect.TypeOf(ScriptError{}))
	out["item.error"] = jsonFields(reflect.TypeOf(ScriptError{}))
	return out
}

func jsonFields(t reflect.Type) []string {
	var names []string
	for i := range t.NumField() {
		tag := t.Field(i).Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		if name == "-" { // not on the wire (Result.Binary)
			continue
		}
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

func python(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("PYTHON_PATH"); p != "" {
		return p
	}
	return "/usr/bin/python3"
}

// The Python mirror declares exactly the Go messages' fields.
func TestPythonMirror_Schema_MatchesGo(t *testing.T) {
	out, err := exec.Command(python(t), "-I", "-S", "../python/qubiq_rpc.py", "--schema").Output()
	if err != nil {
		t.Fatalf("python --schema: %v", err)
	}
	var py struct {
		Messages map[string][][]any `json:"messages"`
		Objects  map[string][][]any `json:"objects"`
	}
	if err := json.Unmarshal(out, &py); err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for k, fields := range py.Messages {
		for _, f := range fields {
			got[k] = append(got[k], f[0].(string))
		}
		sort.Strings(got[k])
	}
	for k, fields := range py.Objects {
		for _, f := range fields {
			got[k] = append(got[k], f[0].(string))
		}
		sort.Strings(got[k])
	}
	if want := goSchema(); !reflect.DeepEqual(got, want) {
		t.Errorf("Python schema\n%v\nGo schema\n%v", got, want)
	}
}

// Every Go message passes the Python side's validation and comes back equal.
func TestPythonMirror_RoundTrip_EveryType(t *testing.T) {
	cmd := exec.Command(python(t), "-I", "-S", "../python/qubiq_rpc.py", "--echo")
	var in bytes.Buffer
	w := NewWriter(&in)
	want := samples()
	// The zero values too: the Python side must accept what Go sends when
	// optional fields are absent.
	for ty, v := range Messages() {
		want[ty+"-zero"] = v
	}
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, string(k))
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := w.WriteMessage(want[Type(k)]); err != nil {
			t.Fatal(err)
		}
	}
	cmd.Stdin = &in
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python --echo: %v: %s", err, errOut.String())
	}
	r := NewReader(bytes.NewReader(out))
	for _, k := range keys {
		b, err := r.ReadFrame()
		if err != nil {
			t.Fatalf("%s: ReadFrame: %v (stderr %s)", k, err, errOut.String())
		}
		got, err := Decode(b)
		if err != nil {
			t.Fatalf("%s: Decode(%s): %v", k, b, err)
		}
		// A nil json.RawMessage goes out as null and comes back as "null":
		// compare the encodings.
		gj, _ := json.Marshal(got)
		wj, _ := json.Marshal(want[Type(k)])
		if !bytes.Equal(gj, wj) {
			t.Errorf("%s: got %s, want %s", k, gj, wj)
		}
	}
}

func TestWriter_WriteResult_SameAsWriteMessage(t *testing.T) {
	for _, r := range []*Result{
		{Type: TypeResult, Exec: "e1", ID: 9, OK: true, Value: json.RawMessage(`[{"path":"A","value":1}]`)},
		{Type: TypeResult, Exec: "e1", ID: 10, OK: true},
		{Type: TypeResult, Exec: "e1", ID: 11, Error: &CallError{Kind: "error", Message: "x"}},
	} {
		var a, b bytes.Buffer
		if err := NewWriter(&a).WriteResult(r); err != nil {
			t.Fatal(err)
		}
		want := *r
		if want.OK && len(want.Value) == 0 {
			want.Value = json.RawMessage("null")
		}
		if err := NewWriter(&b).WriteMessage(&want); err != nil {
			t.Fatal(err)
		}
		if a.String() != b.String() {
			t.Errorf("WriteResult %q, WriteMessage %q", a.String(), b.String())
		}
	}
}
