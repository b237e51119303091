package service

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	_ "qubiq.dev/edge/device/sim"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/config"
	"qubiq.dev/edge/gateway"
	"qubiq.dev/edge/sandbox"
	"qubiq.dev/edge/store"
)

var quiet = slog.New(slog.DiscardHandler)

// testPython is the interpreter of the tests that start workers.
func testPython() string {
	if p := os.Getenv("PYTHON_PATH"); p != "" {
		return p
	}
	return "/usr/bin/python3"
}

// testOptions are the options of a service in dir, over a fresh store and
// audit log (closed when t ends), with a project: file (projectFile: the
// config names it, as "project:") or kept in the store only.
func testOptions(t *testing.T, dir string) Options {
	t.Helper()
	data := filepath.Join(dir, "data")
	db, err := store.Open(filepath.Join(data, store.FileName), store.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	audit := store.NewAuditLog(db, store.AuditOptions{MaxDelay: 2 * time.Millisecond}, quiet)
	t.Cleanup(func() {
		ctx := context.Background()
		if err := audit.Close(ctx); err != nil {
			t.Error(err)
		}
		if err := db.Close(); err != nil {
			t.Error(err)
		}
	})
	sb := sandbox.DefaultConfig()
	sb.PythonPath, sb.DataDir, sb.Replicas = testPython(), data, 1
	// The worker limits are off (python.*: unlimited): this test binary has
	// no sandbox-exec helper to apply them with (the sandbox's own tests do).
	sb.MemoryMax, sb.PidsMax, sb.CPUMax = 0, 0, 0
	return Options{DataDir: data, Baseline: auth.LevelOperate, Sandbox: sb, Version: "test", Store: db, Audit: audit, Log: quiet}
}

// newService builds a service with opts (nothing started) and closes it
// when t ends.
func newService(t *testing.T, opts Options) *Service {
	t.Helper()
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

// withProjectFile writes src as dir/project.yaml (mode 0640) and names it
// the config's project file.
func withProjectFile(t *testing.T, opts Options, dir, src string) Options {
	t.Helper()
	file := filepath.Join(dir, "project.yaml")
	if err := os.WriteFile(file, []byte(src), 0o640); err != nil {
		t.Fatal(err)
	}
	opts.ProjectFile = file
	return opts
}

// withStoredProject keeps src in the store as the project (no file).
func withStoredProject(t *testing.T, opts Options, src string) Options {
	t.Helper()
	doc, _ := json.Marshal(map[string]any{"version": 1, "yaml": src, "file": ""})
	if err := opts.Store.PutProject(doc); err != nil {
		t.Fatal(err)
	}
	return opts
}

// simService is a service over a stored project of one simulator device
// and the float64 memory tag Line1/Setpoint, with its tag engine and
// sandbox started; both stop when t ends.
func simService(t *testing.T) *Service {
	t.Helper()
	s := newService(t, withStoredProject(t, testOptions(t, t.TempDir()), `
devices:
  - {name: sim, driver: sim}
tags:
  - {path: Line1/Setpoint, device: sim, address: memory, type: float64}
`))
	for _, st := range s.Steps() {
		if st.Name == "tag engine" || st.Name == "sandbox" {
			if err := st.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Stop(context.Background()) })
		}
	}
	return s
}

// startEngine starts the tag engine and stops it when t ends.
func startEngine(t *testing.T, s *Service) {
	t.Helper()
	if err := s.Engine().Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if eng := s.Engine(); eng != nil {
			eng.Stop(context.Background())
		}
	})
}

func auditRecords(t *testing.T, s *Service) []store.AuditRecord {
	t.Helper()
	if err := s.audit.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	recs, err := s.db.AuditRecords(0, 10000)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// fakeRunner stands for the service's own runs of nested entries: it
// records each and, when inner is set, makes a nested call itself with the
// run's ctx.
type fakeRunner struct {
	mu     sync.Mutex
	runs   []fakeRun
	inner  func(ctx context.Context, g auth.Grant) error
	result string
	err    error
}

type fakeRun struct {
	g             auth.Grant
	module, entry string
	args          string
	depth         int
}

func (f *fakeRunner) run(ctx context.Context, g auth.Grant, module, entry string, args json.RawMessage) (gateway.ScriptRun, error) {
	f.mu.Lock()
	f.runs = append(f.runs, fakeRun{g: g, module: module, entry: entry, args: string(args), depth: callDepth(ctx)})
	inner, res, err := f.inner, f.result, f.err
	f.mu.Unlock()
	if inner != nil {
		if err := inner(ctx, g); err != nil {
			return gateway.ScriptRun{}, err
		}
	}
	if err != nil {
		return gateway.ScriptRun{}, err
	}
	if res == "" {
		res = `"ok"`
	}
	return gateway.ScriptRun{Result: json.RawMessage(res)}, nil
}

var designer = auth.Full("alice", auth.RealmPlatform, "rest")

var _ = config.Project{}
