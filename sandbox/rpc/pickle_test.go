package rpc

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// unpickle decodes the subset Pickle writes, and nothing else: any other
// opcode is an error. Ints come back as *big.Int, lists as []any, tuples as
// tuple, dicts as map[string]any (keys must be str).
type tuple []any

func unpickle(b []byte) (any, error) {
	if !bytes.HasPrefix(b, []byte(PickleProto)) {
		return nil, errors.New("no PROTO 4")
	}
	b = b[len(PickleProto):]
	var stack []any
	var marks []int
	popMark := func() ([]any, error) {
		if len(marks) == 0 {
			return nil, errors.New("no mark")
		}
		m := marks[len(marks)-1]
		marks = marks[:len(marks)-1]
		items := append([]any(nil), stack[m:]...)
		stack = stack[:m]
		return items, nil
	}
	need := func(n int) error {
		if len(b) < n {
			return errors.New("truncated")
		}
		return nil
	}
	for len(b) > 0 {
		op := b[0]
		b = b[1:]
		switch op {
		case opStop:
			if len(stack) != 1 || len(marks) != 0 || len(b) != 0 {
				return nil, fmt.Errorf("STOP with %d values, %d marks, %d bytes after", len(stack), len(marks), len(b))
			}
			return stack[0], nil
		case opNone:
			stack = append(stack, nil)
		case opTrue:
			stack = append(stack, true)
		case opFalse:
			stack = append(stack, false)
		case opBinInt:
			if err := need(4); err != nil {
				return nil, err
			}
			stack = append(stack, big.NewInt(int64(int32(binary.LittleEndian.Uint32(b)))))
			b = b[4:]
		case opLong1:
			if err := need(1); err != nil {
				return nil, err
			}
			n := int(b[0])
			b = b[1:]
			if err := need(n); err != nil {
				return nil, err
			}
			be := make([]byte, n)
			for i := range n {
				be[i] = b[n-1-i]
			}
			v := new(big.Int).SetBytes(be)
			if n > 0 && be[0]&0x80 != 0 {
				v.Sub(v, new(big.Int).Lsh(big.NewInt(1), uint(8*n)))
			}
			stack = append(stack, v)
			b = b[n:]
		case opBinFloat:
			if err := need(8); err != nil {
				return nil, err
			}
			stack = append(stack, math.Float64frombits(binary.BigEndian.Uint64(b)))
			b = b[8:]
		case opShortUni, opBinUnicode:
			n := 0
			if op == opShortUni {
				if err := need(1); err != nil {
					return nil, err
				}
				n, b = int(b[0]), b[1:]
			} else {
				if err := need(4); err != nil {
					return nil, err
				}
				n, b = int(binary.LittleEndian.Uint32(b)), b[4:]
			}
			if err := need(n); err != nil {
				return nil, err
			}
			if !utf8.Valid(b[:n]) {
				return nil, errors.New("invalid UTF-8")
			}
			stack = append(stack, string(b[:n]))
			b = b[n:]
		case opMark:
			marks = append(marks, len(stack))
		case opEmptyList:
			stack = append(stack, []any{})
		case opEmptyDict:
			stack = append(stack, map[string]any{})
		case opAppends, opSetItems, opTuple:
			items, err := popMark()
			if err != nil {
				return nil, err
			}
			if op == opTuple {
				stack = append(stack, tuple(items))
				continue
			}
			if len(stack) == 0 {
				return nil, errors.New("nothing to append to")
			}
			switch c := stack[len(stack)-1].(type) {
			case []any:
				if op != opAppends {
					return nil, errors.New("SETITEMS on a list")
				}
				stack[len(stack)-1] = append(c, items...)
			case map[string]any:
				if op != opSetItems || len(items)%2 != 0 {
					return nil, errors.New("bad SETITEMS")
				}
				for i := 0; i < len(items); i += 2 {
					k, ok := items[i].(string)
					if !ok {
						return nil, errors.New("dict key not str")
					}
					c[k] = items[i+1]
				}
			default:
				return nil, fmt.Errorf("append to %T", c)
			}
		case opTuple3:
			if len(stack) < 3 {
				return nil, errors.New("TUPLE3 short")
			}
			t := tuple(append([]any(nil), stack[len(stack)-3:]...))
			stack = append(stack[:len(stack)-3], t)
		default:
			return nil, fmt.Errorf("opcode %#x outside the subset", op)
		}
	}
	return nil, errors.New("no STOP")
}

// pyNorm is what a value reads as in Python: ints exact (*big.Int),
// invalid UTF-8 replaced.
func pyNorm(v any) any {
	switch x := v.(type) {
	case int:
		return big.NewInt(int64(x))
	case int64:
		return big.NewInt(x)
	case uint64:
		return new(big.Int).SetUint64(x)
	case string:
		return fixUTF8(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = pyNorm(e)
		}
		return out
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			out[fixUTF8(k)] = pyNorm(e)
		}
		return out
	}
	return v
}

func equalValues(a, b any) bool {
	switch x := a.(type) {
	case *big.Int:
		y, ok := b.(*big.Int)
		return ok && x.Cmp(y) == 0
	case float64:
		y, ok := b.(float64)
		return ok && math.Float64bits(x) == math.Float64bits(y)
	case string:
		y, ok := b.(string)
		return ok && x == y
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equalValues(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, e := range x {
			if !equalValues(e, y[k]) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a, b)
}

// build makes a value from fuzz bytes: each byte picks a kind, the next
// bytes its content.
func build(data []byte, depth int) (any, []byte) {
	if len(data) == 0 {
		return nil, nil
	}
	k, data := data[0], data[1:]
	take := func(n int) []byte {
		n = min(n, len(data))
		out := data[:n]
		data = data[n:]
		return out
	}
	u64 := func() uint64 {
		var b [8]byte
		copy(b[:], take(8))
		return binary.LittleEndian.Uint64(b[:])
	}
	switch k % 10 {
	case 0:
		return nil, data
	case 1:
		return k&0x10 != 0, data
	case 2:
		return int64(u64()), data
	case 3:
		return int64(int32(u64())), data
	case 4:
		return u64(), data
	case 5:
		return math.Float64frombits(u64()), data
	case 6:
		n := 0
		if len(data) > 0 {
			n = int(data[0])
			data = data[1:]
		}
		if k&0x80 != 0 {
			n *= 5 // past the 1-byte length
		}
		return string(take(n)), data
	case 7, 8:
		if depth > 5 {
			return nil, data
		}
		n := 0
		if len(data) > 0 {
			n = int(data[0] % 8)
			data = data[1:]
		}
		if k%10 == 7 {
			l := []any{}
			for range n {
				var e any
				e, data = build(data, depth+1)
				l = append(l, e)
			}
			return l, data
		}
		m := map[string]any{}
		for i := range n {
			var e any
			e, data = build(data, depth+1)
			m[fmt.Sprint(i, string(take(2)))] = e
		}
		return m, data
	default:
		return int(int16(u64())), data
	}
}

// FuzzPickleValue: whatever value is encoded, the frame decodes (by a
// decoder of the subset alone) to the same value, so a tag value from a
// device can never end a string early or smuggle an opcode.
func FuzzPickleValue(f *testing.F) {
	f.Add([]byte{7, 3, 2, 1, 2, 3, 4, 5, 6, 7, 8, 6, 3, 'a', 'b', 'c', 5, 0, 0, 0, 0, 0, 0, 0xf8, 0x7f})
	f.Add([]byte{8, 2, 'k', 'k', 0x86, 60, 0xff, 0xfe, 'x', 4, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{1, 0x11, 0, 9, 1, 2})
	f.Fuzz(func(t *testing.T, data []byte) {
		v, _ := build(data, 0)
		var p Pickle
		if err := p.Value(v); err != nil {
			t.Fatalf("Value(%#v): %v", v, err)
		}
		body := appendBinaryResult(nil, "0123456789abcdef", 7, p.B)
		got, err := unpickle(body)
		if err != nil {
			t.Fatalf("unpickle of %#v: %v (%x)", v, err, body)
		}
		tup, ok := got.(tuple)
		if !ok || len(tup) != 3 || tup[0] != "0123456789abcdef" || tup[1].(*big.Int).Int64() != 7 {
			t.Fatalf("frame %#v", got)
		}
		if !equalValues(tup[2], pyNorm(v)) {
			t.Fatalf("encoded %#v, decoded %#v", v, tup[2])
		}
	})
}

func TestPickle_OtherTypesRefused(t *testing.T) {
	var p Pickle
	p.None()
	if err := p.Value([]any{1, struct{}{}}); err == nil {
		t.Fatal("struct{} encoded")
	}
	if !bytes.Equal(p.B, []byte{opNone}) {
		t.Errorf("a refused value left %x", p.B)
	}
}

// CPython's own unpickler reads what Pickle writes as the values json.loads
// makes of the same JSON, and a binary result frame goes through the
// Writer with its length.
func TestPickle_CPythonReadsTheSubset(t *testing.T) {
	values := []any{
		nil, true, false, 0, -1, int64(math.MaxInt32), int64(math.MinInt32), int64(math.MaxInt32) + 1,
		int64(math.MinInt64), int64(math.MaxInt64), uint64(math.MaxUint64), uint64(1) << 63,
		1.5, -0.0, 1e300, 5e-324, "", "Good", "é€😀", strings.Repeat("x", 255), strings.Repeat("y", 70000),
		"bad\xffutf8\xc3", []any{}, []any{1, "a", []any{nil}}, map[string]any{}, map[string]any{"a": 1, "é": []any{2.5}},
	}
	var stream bytes.Buffer
	w := NewWriter(&stream)
	var want []string
	for i, v := range values {
		var p Pickle
		if err := p.Value(v); err != nil {
			t.Fatal(err)
		}
		if err := w.WriteResult(&Result{Type: TypeResult, Exec: "e1", ID: int64(i), OK: true, Binary: p.B}); err != nil {
			t.Fatal(err)
		}
		j, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, string(j))
	}
	prog := `
import sys, json, struct, _pickle
data = sys.stdin.buffer.read()
i = 0
while i < len(data):
    (n,) = struct.unpack_from(">I", data, i)
    t = _pickle.loads(data[i + 4:i + 4 + n])
    i += 4 + n
    assert type(t) is tuple and len(t) == 3 and t[0] == "e1", t
    v = t[2]
    if type(v) is float:
        v = repr(v)
    print(json.dumps(v, ensure_ascii=False, sort_keys=True, separators=(",", ":")))
`
	cmd := exec.Command(python(t), "-I", "-S", "-c", prog)
	cmd.Stdin = &stream
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python: %v: %s", err, errOut.String())
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != len(values) {
		t.Fatalf("python read %d values, want %d: %s", len(lines), len(values), out)
	}
	for i, v := range values {
		exp := want[i]
		if f, ok := v.(float64); ok {
			exp = pyRepr(t, f)
		} else {
			var x any
			d := json.NewDecoder(strings.NewReader(exp))
			d.UseNumber()
			_ = d.Decode(&x)
			b, _ := json.Marshal(x) // sorted keys
			exp = string(b)
		}
		if lines[i] != exp {
			t.Errorf("value %d (%#v): python read %s, want %s", i, v, lines[i], exp)
		}
	}
}

func pyRepr(t *testing.T, f float64) string {
	out, err := exec.Command(python(t), "-I", "-S", "-c", "import sys, json; print(json.dumps(repr(float.fromhex(sys.argv[1]))))",
		fmt.Sprintf("%x", f)).Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

// The worker's Channel returns a binary result as its tuple, refuses one
// where a message is expected (check=True), and a corrupt one is BadFrame
// (the call fails, the stream is intact).
func TestPythonChannel_BinaryFrames(t *testing.T) {
	var p Pickle
	p.BeginList()
	p.Float(1.5)
	p.EndList()
	good := appendBinaryResult(nil, "e1", 3, p.B)
	prog := `
import sys
sys.path.insert(0, "../python")
import qubiq_rpc as rpc
good = bytes.fromhex(sys.argv[1])
assert rpc.Channel._decode(good, False) == ("e1", 3, [1.5])
try:
    rpc.Channel._decode(good, True)
    raise SystemExit("check=True accepted a binary frame")
except rpc.BadFrame:
    raise SystemExit("check=True: BadFrame, want ProtocolError")
except rpc.ProtocolError:
    pass
for bad in (good[:-3], b"\x80\x04N.", b"\x80\x04\x8c\x02\xff\xfeN\x87."):
    try:
        rpc.Channel._decode(bad, False)
        raise SystemExit("accepted %r" % bad)
    except rpc.BadFrame:
        pass
    except rpc.ProtocolError:
        assert bad == b"\x80\x04N.", bad
print("ok")
`
	out, err := exec.Command(python(t), "-I", "-S", "-c", prog, fmt.Sprintf("%x", good)).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("python: %v: %s", err, out)
	}
}
