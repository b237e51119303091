package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/sandbox/rpc"
)

// TestMain lets the test binary serve as the sandbox-exec helper, as
// cmd/qubiqd does.
func TestMain(m *testing.M) {
	MaybeRunHelper()
	if port := os.Getenv(nonRootEnv); port != "" {
		os.Exit(nonRootChild(port)) // TestHelper_NonRootDaemon_NetNS's unprivileged daemon
	}
	code := m.Run()
	if wheelDir != "" {
		os.RemoveAll(wheelDir)
	}
	os.Exit(code)
}

// testPython is the interpreter of the tests: PYTHON_PATH when set, else
// Debian's /usr/bin/python3.
func testPython() string {
	if p := os.Getenv("PYTHON_PATH"); p != "" {
		return p
	}
	return "/usr/bin/python3"
}

// fakeServices serves tag.read and tag.write from a map, records calls, and
// refuses writes to tags whose level is above the grant's.
type fakeServices struct {
	mu      sync.Mutex
	tags    map[string]any
	levels  map[string]auth.Level
	calls   []fakeCall
	release chan struct{} // tag.read of "Block" waits for it (or ctx)
	blocked chan struct{} // signalled when a read blocks
}

type fakeCall struct {
	Grant  auth.Grant
	Method string
	Params string
}

func newFakeServices() *fakeServices {
	return &fakeServices{
		tags:    map[string]any{"Line1/Pump/Speed": 42.5, "Line1/Pump/Setpoint": 0.0, "Big": uint64(18446744073709551615)},
		levels:  map[string]auth.Level{"Line1/Pump/Setpoint": auth.LevelOperate, "Line1/Pump/Mode": auth.LevelDesign},
		release: make(chan struct{}),
		blocked: make(chan struct{}, 16),
	}
}

func (f *fakeServices) Call(ctx context.Context, g auth.Grant, method string, params json.RawMessage) (json.RawMessage, error) {
	if method == "tag.read" && strings.Contains(string(params), `"Block"`) {
		f.blocked <- struct{}{}
		select {
		case <-f.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fakeCall{Grant: g, Method: method, Params: string(params)})
	switch method {
	case "tag.read":
		var p struct {
			Paths []string `json:"paths"`
		}
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, err
		}
		type row struct {
			Path      string `json:"path"`
			Value     any    `json:"value"`
			Quality   string `json:"quality"`
			Timestamp string `json:"timestamp"`
			Reason    string `json:"reason,omitempty"`
		}
		out := make([]row, 0, len(p.Paths))
		for _, path := range p.Paths {
			v, ok := f.tags[path]
			r := row{Path: path, Value: v, Quality: "Good", Timestamp: "2024-05-01T10:00:00.123456789Z"}
			if !ok {
				r.Quality, r.Reason = "Bad_NodeIdUnknown", "unknown tag"
			}
			out = append(out, r)
		}
		return json.Marshal(out)
	case "tag.write":
		var p struct {
			Paths  []string `json:"paths"`
			Values []any    `json:"values"`
		}
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, err
		}
		out := make([]string, len(p.Paths))
		for i, path := range p.Paths {
			lvl, ok := f.levels[path]
			if !ok {
				lvl = auth.LevelOperate
			}
			if !g.AllowsLevel(lvl) || !g.AllowsPath(path) {
				out[i] = "Bad_UserAccessDenied"
				continue
			}
			f.tags[path] = p.Values[i]
			out[i] = "Good"
		}
		return json.Marshal(out)
	case "vars.get":
		return nil, &auth.DeniedError{Kind: "level", Need: "design", Target: "vars"}
	}
	return nil, fmt.Errorf("%s: not implemented", method)
}

func (f *fakeServices) callsOf(method string) []fakeCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []fakeCall
	for _, c := range f.calls {
		if c.Method == method {
			out = append(out, c)
		}
	}
	return out
}

// testConfig is a small, fast config in a temp data dir.
func testConfig(t *testing.T) Config {
	t.Helper()
	c := DefaultConfig()
	// The worker limits are off unless a test sets them (python.*:
	// unlimited): the limits tests set their own, and DefaultConfig's are
	// tested in config_test.go.
	c.MemoryMax, c.PidsMax, c.CPUMax = 0, 0, 0
	c.PythonPath = testPython()
	c.DataDir = t.TempDir()
	c.Replicas = 2
	c.GatewayTimeout.Default = 5 * time.Second
	c.GatewayTimeout.Min = 10 * time.Millisecond
	c.GatewayTimeout.Max = 30 * time.Second
	return c
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// startPool starts a pool and closes it at the end of the test.
func startPool(t *testing.T, cfg Config, svc Services, opts ...func(*Pool)) *Pool {
	t.Helper()
	p, err := New(cfg, svc, testLogger(t))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	for _, o := range opts {
		o(p)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := p.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := p.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	if h := p.Health(); h.Python.Status != "ok" {
		t.Fatalf("pool not ok after Start: %+v", h)
	}
	return p
}

// load checks code and registers it as module; it fails the test when Check
// refuses it.
func load(t *testing.T, p *Pool, module, code string) ModuleInfo {
	t.Helper()
	info, err := p.Check(context.Background(), module, code)
	if err != nil {
		t.Fatalf("Check(%s): %v; diagnostics %+v", module, err, info.Diagnostics)
	}
	p.SetModule(module, code, info, 1)
	return info
}

func run(t *testing.T, p *Pool, g auth.Grant, module, entry, args string) (RunResult, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return p.Run(ctx, g, module, entry, json.RawMessage(args))
}

// mustRun runs and fails the test on error; it returns the result's JSON.
func mustRun(t *testing.T, p *Pool, g auth.Grant, module, entry, args string) string {
	t.Helper()
	r, err := run(t, p, g, module, entry, args)
	if err != nil {
		t.Fatalf("Run(%s.%s): %v", module, entry, err)
	}
	return string(r.Result)
}

func runErrOf(t *testing.T, err error) *RunError {
	t.Helper()
	var re *RunError
	if !errors.As(err, &re) {
		t.Fatalf("error %v (%T) is not a *RunError", err, err)
	}
	return re
}

// waitWorkers waits until the pool reports n live workers.
func waitWorkers(t *testing.T, p *Pool, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if p.Health().Workers == n {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("pool has %d workers, want %d: %+v", p.Health().Workers, n, p.Health())
}

var full = auth.Full("tester", auth.RealmPlatform, "test")

// runPython runs a Python program with the pool's interpreter and code
// directory as argv[1]; it returns stdout.
func runPython(t *testing.T, p *Pool, program string) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, p.python, "-I", "-S", "-c", program, p.codeDir)
	var errOut strings.Builder
	cmd.Stderr = &errOut
	out, err := cmd.Output()
	if err != nil {
		return []byte(errOut.String()), err
	}
	return out, nil
}

// decodeCall decodes a raw call frame as the worker reader does.
func decodeCall(t *testing.T, raw string) *rpc.Call {
	t.Helper()
	v, err := rpc.Decode([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	c, ok := v.(*rpc.Call)
	if !ok {
		t.Fatalf("decoded %T", v)
	}
	return c
}
