// Package rpc is the transport between the QUBIQ Edge daemon and its Python
// workers: the message types, defined once here and mirrored field for field
// in sandbox/python/qubiq_rpc.py (a test runs the Python side against these
// definitions), and the framing.
//
// # Framing
//
// A frame is a 4-byte big-endian unsigned length followed by that many bytes
// of UTF-8 JSON holding one object whose first key is "type" (docs/security.md, "The script sandbox").
// A successful result may instead be a binary frame (daemon → worker only;
// pickle.go), whose body begins with 0x80. Frames larger than MaxFrame are
// refused on both sides; an oversized or malformed frame from a worker is a
// protocol violation, and the daemon kills and replaces that worker.
//
// The worker writes its frames to fd 3 and reads the daemon's from fd 4.
//
// # Messages
//
//	daemon → worker: hello (once, first), exec (one per run), result (answer to a call)
//	worker → daemon: ready (answer to hello), call (a system.* request), log,
//	                 item (one message of a batch run), done
//
// Nothing in a worker's frame names or changes the grant of the execution:
// the daemon keeps the grant in Go memory, keyed by worker and execution id
// (docs/security.md, "Levels, realms, scopes, grants"; docs/security.md, "The script sandbox"). Fields a
// worker adds to a frame beyond those defined here are ignored.
//
// rpc imports the standard library only.
package rpc

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// MaxFrame is the largest frame body, in bytes, either side accepts (16 MiB).
const MaxFrame = 16 << 20

// Type names a message; it is the "type" key of every frame.
type Type string

// The message types. The direction of each is in its struct's comment.
const (
	TypeHello  Type = "hello"
	TypeReady  Type = "ready"
	TypeExec   Type = "exec"
	TypeResult Type = "result"
	TypeCall   Type = "call"
	TypeLog    Type = "log"
	TypeDone   Type = "done"
	TypeItem   Type = "item"
)

// Hello is the daemon's first frame to a new worker (daemon → worker). Allowed
// lists the import root names scripts may import besides the installed
// packages; Packages is the directory of the installed packages (one
// generation of <data_dir>/python-packages, put on the module path) and
// Installed their top-level import names, which scripts may import too
// (read by the daemon from each wheel's top_level.txt or RECORD); ReadPaths
// are the directories the worker's audit hook lets code read while a script
// runs (the standard library, Packages and the worker's own code directory
// are always readable).
type Hello struct {
	Type      Type     `json:"type"`
	Allowed   []string `json:"allowed"`
	Packages  string   `json:"packages"`
	Installed []string `json:"installed"`
	ReadPaths []string `json:"read_paths"`
}

// Ready is the worker's answer to Hello (worker → daemon): its process id, the
// interpreter version ("3.11.2") and sys.executable. A worker that does not
// answer Hello with Ready fails its handshake.
type Ready struct {
	Type       Type   `json:"type"`
	PID        int    `json:"pid"`
	Python     string `json:"python"`
	Executable string `json:"executable"`
}

// Exec starts one run (daemon → worker). Exec is the execution id, random and
// unguessable, that every Call, Log and Done of the run must carry. Source is
// the module's code; when Cached is true it is omitted and the worker uses
// the code it compiled for the same Module and Version. Args is the JSON
// value passed to the entry. With Batch, Args is a JSON array and the
// worker calls the entry once per element, in order, in one module
// namespace, answering each call with an Item before the run's Done (the
// Python nodes of flows: def transform(msg)).
type Exec struct {
	Type    Type            `json:"type"`
	Exec    string          `json:"exec"`
	Module  string          `json:"module"`
	Version int             `json:"version"`
	Entry   string          `json:"entry"`
	Source  string          `json:"source,omitempty"`
	Cached  bool            `json:"cached,omitempty"`
	Batch   bool            `json:"batch,omitempty"`
	Args    json.RawMessage `json:"args"`
}

// Call is a system.* request from a running script (worker → daemon): the
// execution id, a call id unique within the run, the method ("tag.read") and
// its parameters. The daemon answers with a Result carrying the same ID.
type Call struct {
	Type   Type            `json:"type"`
	Exec   string          `json:"exec"`
	ID     int64           `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// Result answers a Call (daemon → worker). When OK is false, Error says why;
// the worker raises system.PermissionDenied for kind "permission_denied" and
// system.CallError otherwise. When OK is true and Binary is set, WriteResult
// sends the answer as a binary frame (pickle.go) whose value is Binary, one
// value in the pickle subset written with Pickle, and Value is not sent.
type Result struct {
	Type   Type            `json:"type"`
	Exec   string          `json:"exec"`
	ID     int64           `json:"id"`
	OK     bool            `json:"ok"`
	Value  json.RawMessage `json:"value,omitempty"`
	Error  *CallError      `json:"error,omitempty"`
	Binary []byte          `json:"-"`
}

// CallError is why a Call failed. Kind is "permission_denied" (Scope names
// the missing scope when one was missing), "invalid" (bad parameters) or
// "error" (the service failed; Message says how).
type CallError struct {
	Kind    string `json:"kind"`
	Message string `json:"message"`
	Scope   string `json:"scope,omitempty"`
}

// Log is one line a script logged, with print() (worker → daemon). Level is
// "debug", "info", "warning" or "error".
type Log struct {
	Type  Type   `json:"type"`
	Exec  string `json:"exec"`
	Level string `json:"level"`
	Msg   string `json:"msg"`
}

// Done ends a run (worker → daemon). When OK is true, Value is the entry's
// return value as JSON; otherwise Error says what the script did.
type Done struct {
	Type  Type            `json:"type"`
	Exec  string          `json:"exec"`
	OK    bool            `json:"ok"`
	Value json.RawMessage `json:"value,omitempty"`
	Error *ScriptError    `json:"error,omitempty"`
}

// Item is the outcome of one element of a batch run (worker → daemon),
// sent as soon as the entry returned or raised for it: Index is the
// element's position (0, 1, ... in order), Value the return value when OK,
// else Error (kind "bad_result" when the value is not JSON).
type Item struct {
	Type  Type            `json:"type"`
	Exec  string          `json:"exec"`
	Index int             `json:"index"`
	OK    bool            `json:"ok"`
	Value json.RawMessage `json:"value,omitempty"`
	Error *ScriptError    `json:"error,omitempty"`
}

// ScriptError is why a run failed inside the worker. Kind is one of
// "script_error" (the script raised; Type is the exception class, Line the
// script line, Traceback the script's frames), "permission_denied" (it let a
// system.PermissionDenied escape), "memory" (MemoryError), "invalid" (no
// such entry, the code was refused when compiled, or the args did not fit),
// or, for an Item, "bad_result" (the entry returned a value that is not
// JSON).
type ScriptError struct {
	Kind      string `json:"kind"`
	Type      string `json:"type"`
	Message   string `json:"message"`
	Line      int    `json:"line"`
	Traceback string `json:"traceback"`
}

// Messages returns one zero value of every message type, keyed by type; the
// round-trip test and the Python mirror check walk it.
func Messages() map[Type]any {
	return map[Type]any{
		TypeHello:  &Hello{Type: TypeHello},
		TypeReady:  &Ready{Type: TypeReady},
		TypeExec:   &Exec{Type: TypeExec},
		TypeCall:   &Call{Type: TypeCall},
		TypeResult: &Result{Type: TypeResult},
		TypeLog:    &Log{Type: TypeLog},
		TypeDone:   &Done{Type: TypeDone},
		TypeItem:   &Item{Type: TypeItem},
	}
}

// ErrFrameTooLarge is returned by ReadFrame and WriteFrame for a frame whose
// body exceeds MaxFrame.
var ErrFrameTooLarge = errors.New("rpc: frame exceeds the maximum size")

// ErrMalformed is wrapped by Decode for a frame that is not a JSON object
// with a known "type".
var ErrMalformed = errors.New("rpc: malformed frame")

// Reader reads frames from one stream. It is not safe for concurrent use.
type Reader struct {
	r   *bufio.Reader
	hdr [4]byte
	buf []byte
}

// NewReader returns a Reader over r, buffered.
func NewReader(r io.Reader) *Reader {
	return &Reader{r: bufio.NewReaderSize(r, 64<<10)}
}

// ReadFrame returns the body of the next frame. The slice is valid until the
// next call. It returns io.EOF at a clean end of stream, io.ErrUnexpectedEOF
// inside a frame and ErrFrameTooLarge for a length over MaxFrame.
func (r *Reader) ReadFrame() ([]byte, error) {
	if _, err := io.ReadFull(r.r, r.hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(r.hdr[:])
	if n > MaxFrame {
		return nil, fmt.Errorf("%w: %d bytes", ErrFrameTooLarge, n)
	}
	if cap(r.buf) < int(n) {
		r.buf = make([]byte, n, max(int(n), 4096))
	}
	r.buf = r.buf[:n]
	if _, err := io.ReadFull(r.r, r.buf); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return r.buf, nil
}

// Writer writes frames to one stream with one write call per frame. It is not
// safe for concurrent use.
type Writer struct {
	w   io.Writer
	buf bytes.Buffer
	bin []byte // binary frames
}

// NewWriter returns a Writer over w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// WriteMessage encodes v as JSON and writes it as one frame.
func (w *Writer) WriteMessage(v any) error {
	w.buf.Reset()
	w.buf.Write([]byte{0, 0, 0, 0})
	enc := json.NewEncoder(&w.buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("rpc: encode %T: %w", v, err)
	}
	b := w.buf.Bytes()
	b = b[:len(b)-1] // Encode's trailing newline
	n := len(b) - 4
	if n > MaxFrame {
		return fmt.Errorf("%w: %d bytes", ErrFrameTooLarge, n)
	}
	binary.BigEndian.PutUint32(b, uint32(n))
	_, err := w.w.Write(b)
	return err
}

// WriteResult writes r as one frame. A successful result's Value is copied
// as it is, neither validated nor re-encoded (for a 100-tag read that saves
// most of the daemon's share of a system.tag.read round trip): the caller
// vouches that it is JSON. Frames are length-delimited, so a malformed value
// cannot desynchronise the stream; the worker answers the call with
// system.CallError.
func (w *Writer) WriteResult(r *Result) error {
	if !r.OK || r.Error != nil {
		return w.WriteMessage(r)
	}
	if r.Binary != nil {
		return w.writeBinary(r)
	}
	v := r.Value
	if len(v) == 0 {
		v = json.RawMessage("null")
	}
	w.buf.Reset()
	w.buf.Write([]byte{0, 0, 0, 0})
	w.buf.WriteString(`{"type":"result","exec":`)
	if plainASCII([]byte(r.Exec)) && strings.IndexByte(r.Exec, '"') < 0 {
		w.buf.WriteByte('"')
		w.buf.WriteString(r.Exec)
		w.buf.WriteByte('"')
	} else {
		exec, err := json.Marshal(r.Exec)
		if err != nil {
			return fmt.Errorf("rpc: encode result: %w", err)
		}
		w.buf.Write(exec)
	}
	w.buf.WriteString(`,"id":`)
	w.buf.WriteString(strconv.FormatInt(r.ID, 10))
	w.buf.WriteString(`,"ok":true,"value":`)
	w.buf.Write(v)
	w.buf.WriteByte('}')
	b := w.buf.Bytes()
	n := len(b) - 4
	if n > MaxFrame {
		return fmt.Errorf("%w: %d bytes", ErrFrameTooLarge, n)
	}
	binary.BigEndian.PutUint32(b, uint32(n))
	_, err := w.w.Write(b)
	return err
}

// writeBinary writes a successful result as a binary frame (pickle.go).
func (w *Writer) writeBinary(r *Result) error {
	b := appendBinaryResult(append(w.bin[:0], 0, 0, 0, 0), r.Exec, r.ID, r.Binary)
	w.bin = b
	n := len(b) - 4
	if n > MaxFrame {
		return fmt.Errorf("%w: %d bytes", ErrFrameTooLarge, n)
	}
	binary.BigEndian.PutUint32(b, uint32(n))
	_, err := w.w.Write(b)
	return err
}

// WriteFrame writes body as one frame (used by tests that forge frames).
func (w *Writer) WriteFrame(body []byte) error {
	if len(body) > MaxFrame {
		return fmt.Errorf("%w: %d bytes", ErrFrameTooLarge, len(body))
	}
	w.buf.Reset()
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(len(body)))
	w.buf.Write(hdr[:])
	w.buf.Write(body)
	_, err := w.w.Write(w.buf.Bytes())
	return err
}

// PeekType returns the "type" of a frame body. Frames the Python side writes
// begin with {"type":"…", which is read without decoding the rest; anything
// else is decoded in full. The error wraps ErrMalformed.
func PeekType(b []byte) (Type, error) {
	const prefix = `{"type":"`
	if bytes.HasPrefix(b, []byte(prefix)) {
		rest := b[len(prefix):]
		if i := bytes.IndexByte(rest, '"'); i > 0 && bytes.IndexByte(rest[:i], '\\') < 0 {
			return Type(rest[:i]), nil
		}
	}
	var env struct {
		Type Type `json:"type"`
	}
	if err := json.Unmarshal(b, &env); err != nil {
		return "", fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if env.Type == "" {
		return "", fmt.Errorf("%w: no type", ErrMalformed)
	}
	return env.Type, nil
}

// Decode decodes a frame body into a new value of its type: *Hello, *Ready,
// *Exec, *Call, *Result, *Log, *Item or *Done. Unknown fields are ignored; an unknown
// type or invalid JSON is an error wrapping ErrMalformed.
func Decode(b []byte) (any, error) {
	if c, ok := decodeCall(b); ok {
		return c, nil
	}
	t, err := PeekType(b)
	if err != nil {
		return nil, err
	}
	var v any
	switch t {
	case TypeHello:
		v = new(Hello)
	case TypeReady:
		v = new(Ready)
	case TypeExec:
		v = new(Exec)
	case TypeCall:
		v = new(Call)
	case TypeResult:
		v = new(Result)
	case TypeLog:
		v = new(Log)
	case TypeDone:
		v = new(Done)
	case TypeItem:
		v = new(Item)
	default:
		return nil, fmt.Errorf("%w: unknown type %q", ErrMalformed, t)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrMalformed, t, err)
	}
	return v, nil
}

// decodeCall decodes a call frame in the exact form the Python side writes
// ({"type":"call","exec":"…","id":N,"method":"…","params":…}, compact, no
// escapes in exec and method) without reflection: the hot path of every
// system.* call. Params must be valid JSON and is copied as it is. Any
// other form returns false and goes through encoding/json.
func decodeCall(b []byte) (*Call, bool) {
	const (
		p1 = `{"type":"call","exec":"`
		p2 = `,"id":`
		p3 = `,"method":"`
		p4 = `,"params":`
	)
	if !bytes.HasPrefix(b, []byte(p1)) || len(b) < len(p1)+len(p2)+len(p3)+len(p4)+4 || b[len(b)-1] != '}' {
		return nil, false
	}
	rest := b[len(p1):]
	i := bytes.IndexByte(rest, '"')
	if i < 0 || !plainASCII(rest[:i]) {
		return nil, false
	}
	c := &Call{Type: TypeCall, Exec: string(rest[:i])}
	rest = rest[i+1:]
	if !bytes.HasPrefix(rest, []byte(p2)) {
		return nil, false
	}
	rest = rest[len(p2):]
	j := 0
	for j < len(rest) && j < 19 && rest[j] >= '0' && rest[j] <= '9' {
		j++
	}
	if j == 0 || (j > 1 && rest[0] == '0') {
		return nil, false
	}
	id, err := strconv.ParseInt(string(rest[:j]), 10, 64)
	if err != nil {
		return nil, false
	}
	c.ID = id
	rest = rest[j:]
	if !bytes.HasPrefix(rest, []byte(p3)) {
		return nil, false
	}
	rest = rest[len(p3):]
	k := bytes.IndexByte(rest, '"')
	if k < 0 || !plainASCII(rest[:k]) {
		return nil, false
	}
	c.Method = string(rest[:k])
	rest = rest[k+1:]
	if !bytes.HasPrefix(rest, []byte(p4)) {
		return nil, false
	}
	params := rest[len(p4) : len(rest)-1]
	if len(params) == 0 || (!plainPaths(params) && !json.Valid(params)) {
		return nil, false
	}
	c.Params = append(json.RawMessage(nil), params...)
	return c, true
}

// plainPaths reports whether params is {"paths":[…]} of plain ASCII
// strings (plainASCII, no '"' inside), as the worker writes tag.read's
// params: valid JSON without running encoding/json's scanner over it.
// false says nothing: the caller checks with json.Valid.
func plainPaths(b []byte) bool {
	const head, tail = `{"paths":[`, `]}`
	if len(b) < len(head)+len(tail) || string(b[:len(head)]) != head || string(b[len(b)-len(tail):]) != tail {
		return false
	}
	body := b[len(head) : len(b)-len(tail)]
	for len(body) > 0 {
		if body[0] != '"' {
			return false
		}
		i := 1
		for i < len(body) && body[i] != '"' {
			if c := body[i]; c < 0x20 || c >= 0x7F || c == '\\' {
				return false
			}
			i++
		}
		if i == len(body) {
			return false
		}
		body = body[i+1:]
		if len(body) > 0 {
			if body[0] != ',' || len(body) == 1 {
				return false
			}
			body = body[1:]
		}
	}
	return true
}

// plainASCII reports whether a JSON string's bytes need no decoding:
// printable ASCII without a backslash. Anything else (escapes, control
// characters JSON refuses, non-ASCII text) goes through encoding/json, so
// the fast path never accepts what encoding/json would not.
func plainASCII(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c >= 0x7F || c == '\\' {
			return false
		}
	}
	return true
}
