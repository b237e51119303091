package sandbox

import (
	"context"
	"encoding/json"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/sandbox/rpc"
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

func benchPool(b *testing.B) *Pool {
	b.Helper()
	cfg := DefaultConfig()
	cfg.PythonPath = testPython()
	cfg.DataDir = b.TempDir()
	cfg.Replicas = 1
	cfg.GatewayTimeout.Max = 10 * 60 * 1e9
	p, err := New(cfg, &benchServices{rows: map[int]json.RawMessage{}}, nil)
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
// (PERFORMANCE.md B4: p50 ≤ 40 µs).
func BenchmarkTagRead_1(b *testing.B) { benchLoop(b, benchPool(b), "read", 1) }

// BenchmarkTagRead_100 is one system.tag.read of 100 tags (B4: p50 ≤ 80 µs).
func BenchmarkTagRead_100(b *testing.B) { benchLoop(b, benchPool(b), "read", 100) }

// BenchmarkEmptyCall is the smallest system.* round trip: no params, a null
// answer (the dispatcher and both JSON codecs, no service work).
func BenchmarkEmptyCall(b *testing.B) { benchLoop(b, benchPool(b), "empty", 0) }

// BenchmarkPipeFloor is the raw floor: a 2-byte frame echoed by Python over
// two pipes, no JSON on either side (PERFORMANCE.md C1: about 25 µs).
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
