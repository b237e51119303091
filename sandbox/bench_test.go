package sandbox

import (
	"context"
	"encoding/json"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/sandbox/rpc"
	"qubiq.dev/edge/value"
)

// benchServices answers tag.read with a prepared row per path and anything
// else with null: the benchmarks measure the sandbox, not a tag engine.
type benchServices struct{ rows map[int]json.RawMessage }

func (b *benchServices) Call(_ context.Context, _ auth.Grant, method string, params json.RawMessage) (json.RawMessage, error) {
	if method != "tag.read" {
		return json.RawMessage("null"), nil
	}
	n := strings.Count(string(params), `","`) + 1
	if r, ok := b.rows[n]; ok {
		return r, nil
	}
	var sb strings.Builder
	sb.WriteByte('[')
	for i := range n {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(`{"path":"Line1/Motor` + strconv.Itoa(i) + `/Speed","value":42.5,"quality":"Good","timestamp":"2024-05-01T10:00:00.123456789Z"}`)
	}
	sb.WriteByte(']')
	b.rows[n] = json.RawMessage(sb.String())
	return b.rows[n], nil
}

const benchModule = `
@gateway(timeout_ms=600000)
def read(args):
    paths = ["Line1/Motor%d/Speed" % i for i in range(args["tags"])]
    read = system.tag.read
    for _ in range(args["n"]):
        read(paths)
    return args["n"]

@gateway(timeout_ms=600000)
def empty(args):
    keys = system.vars.keys
    for _ in range(args["n"]):
        keys()
    return args["n"]
`

// benchColumns adds the TagReader fast path to benchServices: VQTs from a
// map, encoded by the sandbox as columns.
type benchColumns struct {
	*benchServices
	tags map[string]value.VQT
}

func (c *benchColumns) ReadTags(_ context.Context, _ auth.Grant, paths []string) ([]value.VQT, error) {
	out := make([]value.VQT, len(paths))
	for i, p := range paths {
		v, ok := c.tags[p]
		if !ok {
			v = value.Bad(value.BadNodeIDUnknown, "unknown tag", time.Now())
		}
		out[i] = v
	}
	return out, nil
}

func newBenchColumns() *benchColumns {
	c := &benchColumns{benchServices: &benchServices{rows: map[int]json.RawMessage{}}, tags: map[string]value.VQT{}}
	ts := time.Date(2024, 5, 1, 10, 0, 0, 123456789, time.UTC)
	for i := range 100 {
		c.tags["Line1/Motor"+strconv.Itoa(i)+"/Speed"] = value.VQT{Value: 42.5, Quality: value.Good, Time: ts}
	}
	return c
}

func benchPool(b *testing.B) *Pool { return benchPoolWith(b, newBenchColumns()) }

func benchPoolWith(b *testing.B, svc Services) *Pool {
	b.Helper()
	cfg := DefaultConfig()
	cfg.PythonPath = testPython()
	cfg.DataDir = b.TempDir()
	cfg.Replicas = 1
	cfg.GatewayTimeout.Max = 10 * 60 * 1e9
	p, err := New(cfg, svc, nil)
	if err != nil {
		b.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { p.Close(context.Background()) })
	if p.Health().Python.Status != "ok" {
		b.Fatalf("pool: %+v", p.Health())
	}
	info, err := p.Check(context.Background(), "bench", benchModule)
	if err != nil {
		b.Fatal(err)
	}
	p.SetModule("bench", benchModule, info, 1)
	return p
}

// benchLoop runs entry with n calls inside one run, b.N calls in all.
func benchLoop(b *testing.B, p *Pool, entry string, tags int) {
	b.Helper()
	grant := auth.Grant{Principal: "bench", Scopes: auth.AllScopes}
	args := func(n int) json.RawMessage {
		return json.RawMessage(`{"n":` + strconv.Itoa(n) + `,"tags":` + strconv.Itoa(tags) + `}`)
	}
	if _, err := p.Run(context.Background(), grant, "bench", entry, args(200)); err != nil { // warm-up
		b.Fatal(err)
	}
	b.ResetTimer()
	if _, err := p.Run(context.Background(), grant, "bench", entry, args(b.N)); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkTagRead_1 is one system.tag.read of 1 tag from Python, round trip
// (bench/README.md, B4: p50 ≤ 40 µs).
func BenchmarkTagRead_1(b *testing.B) { benchLoop(b, benchPool(b), "read", 1) }

// BenchmarkTagRead_100 is one system.tag.read of 100 tags (B4: p50 ≤ 80 µs).
func BenchmarkTagRead_100(b *testing.B) { benchLoop(b, benchPool(b), "read", 100) }

// BenchmarkTagRead_100_Rows is the same through Services.Call with the row
// answer (a Services without TagReader), for comparison.
func BenchmarkTagRead_100_Rows(b *testing.B) {
	benchLoop(b, benchPoolWith(b, &benchServices{rows: map[int]json.RawMessage{}}), "read", 100)
}

// BenchmarkEmptyCall is the smallest system.* round trip: no params, a null
// answer (the dispatcher and both JSON codecs, no service work).
func BenchmarkEmptyCall(b *testing.B) { benchLoop(b, benchPool(b), "empty", 0) }

// BenchmarkPipeFloor is the raw floor: a 2-byte frame echoed by Python over
// two pipes, no JSON on either side (bench/README.md, C1: about 25 µs).
func BenchmarkPipeFloor(b *testing.B) {
	prog := `
import os, struct
r, w = 0, 1
while True:
    h = os.read(r, 4)
    if len(h) < 4:
        break
    (n,) = struct.unpack(">I", h)
    body = os.read(r, n)
    os.write(w, h + body)
`
	cmd := exec.Command(testPython(), "-I", "-S", "-c", prog)
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer cmd.Wait()
	defer in.Close()
	wr := rpc.NewWriter(in)
	rd := rpc.NewReader(out)
	b.ResetTimer()
	for range b.N {
		if err := wr.WriteFrame([]byte("{}")); err != nil {
			b.Fatal(err)
		}
		if _, err := rd.ReadFrame(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDispatch_TagRead100 is the daemon's share of a 100-tag
// system.tag.read: decoding the call frame, the scope check, the
// TagReader, the column encoding and the result frame (no process).
func BenchmarkDispatch_TagRead100(b *testing.B) { benchDispatch(b, 100) }

// BenchmarkDispatch_TagRead1 is the same for one tag: the daemon's share of
// bench-sandbox's read1 round trip, beside the floor of empty frames
// (bench/README.md, "The script call floor").
func BenchmarkDispatch_TagRead1(b *testing.B) { benchDispatch(b, 1) }

func benchDispatch(b *testing.B, tags int) {
	cfg := DefaultConfig()
	cfg.PythonPath = testPython()
	cfg.DataDir = b.TempDir()
	p, err := New(cfg, newBenchColumns(), nil)
	if err != nil {
		b.Fatal(err)
	}
	var sb strings.Builder
	sb.WriteString(`{"type":"call","exec":"0123456789abcdef","id":5,"method":"tag.read","params":{"paths":[`)
	for i := range tags {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(`"Line1/Motor` + strconv.Itoa(i) + `/Speed"`)
	}
	sb.WriteString(`]}}`)
	raw := []byte(sb.String())
	wr := rpc.NewWriter(io.Discard)
	grant := auth.Grant{Principal: "bench", Scopes: auth.AllScopes}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		v, err := rpc.Decode(raw)
		if err != nil {
			b.Fatal(err)
		}
		if err := wr.WriteResult(p.dispatch(context.Background(), grant, "bench.read", v.(*rpc.Call))); err != nil {
			b.Fatal(err)
		}
	}
}
