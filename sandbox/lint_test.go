package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestParseRuff_Shapes(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []Diagnostic
	}{
		{"syntax error, code null (ruff 0.5–0.13)",
			`[{"code":null,"message":"SyntaxError: Expected an expression","location":{"row":2,"column":9},"end_location":{"row":2,"column":10}}]`,
			[]Diagnostic{{Line: 2, Column: 9, EndLine: 2, EndColumn: 10, Code: "syntax-error", Message: "SyntaxError: Expected an expression", Severity: "error"}}},
		{"syntax error, invalid-syntax (later ruff)",
			`[{"code":"invalid-syntax","message":"Expected an expression","location":{"row":1,"column":5},"end_location":{"row":1,"column":6}}]`,
			[]Diagnostic{{Line: 1, Column: 5, EndLine: 1, EndColumn: 6, Code: "syntax-error", Message: "SyntaxError: Expected an expression", Severity: "error"}}},
		{"syntax error, E999 (ruff before 0.5)",
			`[{"code":"E999","message":"SyntaxError: invalid syntax","location":{"row":3,"column":1},"end_location":{"row":3,"column":1}}]`,
			[]Diagnostic{{Line: 3, Column: 1, EndLine: 3, EndColumn: 1, Code: "syntax-error", Message: "SyntaxError: invalid syntax", Severity: "error"}}},
		{"undefined names: builtins dropped, others errors",
			`[{"code":"F821","message":"Undefined name ` + "`system`" + `","location":{"row":1,"column":1},"end_location":{"row":1,"column":7}},
			  {"code":"F821","message":"Undefined name ` + "`gateway`" + `","location":{"row":2,"column":2},"end_location":{"row":2,"column":9}},
			  {"code":"F821","message":"Undefined name ` + "`spede`" + `","location":{"row":3,"column":12},"end_location":{"row":3,"column":17}}]`,
			[]Diagnostic{{Line: 3, Column: 12, EndLine: 3, EndColumn: 17, Code: "F821", Message: "Undefined name `spede`", Severity: "error"}}},
		{"other rules are warnings; a missing end is the start",
			`[{"code":"B006","message":"Do not use mutable data structures for argument defaults","location":{"row":4,"column":14}}]`,
			[]Diagnostic{{Line: 4, Column: 14, EndLine: 4, EndColumn: 14, Code: "B006", Message: "Do not use mutable data structures for argument defaults", Severity: "warning"}}},
		{"no findings", `[]`, []Diagnostic{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseRuff([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
	if _, err := parseRuff([]byte("error: unexpected argument")); err == nil {
		t.Error("non-JSON output parsed")
	}
}

// ruffCode is the module the recorded ruff answer (testdata/ruff) is about.
const ruffCode = "import json\nimport os\ndef f(args):\n    system.tag.read([])\n    return speeed\n"

// The recorded answer of the stand-in ruff, in the one diagnostic shape,
// with the guardrail's refusal of "import os" merged in order.
var ruffWant = []Diagnostic{
	{Line: 1, Column: 8, EndLine: 1, EndColumn: 12, Code: "F401", Message: "`json` imported but unused", Severity: "warning"},
	{Line: 2, Column: 1, EndLine: 2, EndColumn: 10, Code: "forbidden-import", Severity: "error"},
	{Line: 2, Column: 8, EndLine: 2, EndColumn: 10, Code: "F401", Message: "`os` imported but unused", Severity: "warning"},
	{Line: 5, Column: 12, EndLine: 5, EndColumn: 18, Code: "F821", Message: "Undefined name `speeed`", Severity: "error"},
}

func checkRuffDiags(t *testing.T, got []Diagnostic) {
	t.Helper()
	if len(got) != len(ruffWant) {
		t.Fatalf("diagnostics %+v\nwant %+v", got, ruffWant)
	}
	for i, w := range ruffWant {
		g := got[i]
		if w.Code == "forbidden-import" { // the guardrail's message names the allow-list
			g.Message = ""
		}
		if g != w {
			t.Errorf("diagnostic %d: %+v, want %+v", i, got[i], w)
		}
	}
}

// With ruff on PATH (a stand-in printing a recorded answer), the linter is
// ruff, health says so, and the diagnostics are ruff's plus the guardrail's.
func TestPool_Lint_RuffOnPath(t *testing.T) {
	dir, err := filepath.Abs("testdata/ruff")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+":/usr/bin:/bin")
	p := startPool(t, testConfig(t), newFakeServices())
	if h := p.Health(); h.Linter != LinterRuff {
		t.Fatalf("health linter %q, want ruff", h.Linter)
	}
	linter, diags, err := p.Lint(context.Background(), ruffCode)
	if err != nil || linter != LinterRuff {
		t.Fatalf("Lint: %q, %v", linter, err)
	}
	checkRuffDiags(t, diags)
}

// ruff in the runtime's bin/ is found before PATH.
func TestPool_Lint_RuffInRuntimeBin(t *testing.T) {
	t.Setenv("PATH", "/usr/bin:/bin")
	bin := filepath.Join(t.TempDir(), "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(testPython(), filepath.Join(bin, "python3")); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"ruff", "ruff-output.json"} {
		b, err := os.ReadFile(filepath.Join("testdata/ruff", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(bin, f), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cfg := testConfig(t)
	cfg.PythonPath = filepath.Join(bin, "python3")
	p := startPool(t, cfg, newFakeServices())
	if p.Settings(context.Background()).LinterPath != filepath.Join(bin, "ruff") {
		t.Fatalf("linter path %q", p.Settings(context.Background()).LinterPath)
	}
	linter, diags, err := p.Lint(context.Background(), ruffCode)
	if err != nil || linter != LinterRuff {
		t.Fatalf("Lint: %q, %v", linter, err)
	}
	checkRuffDiags(t, diags)
}

// Without ruff the linter is syntax-only: compile() in a short-lived
// interpreter, 1-based character columns (non-ASCII text before the
// error), compiler-level errors that ast.parse misses, and the guardrail.
func TestPool_Lint_SyntaxOnly(t *testing.T) {
	t.Setenv("PATH", "/usr/bin:/bin")
	p := startPool(t, testConfig(t), newFakeServices())
	if h := p.Health(); h.Linter != LinterSyntaxOnly {
		t.Fatalf("health linter %q, want syntax-only", h.Linter)
	}
	tests := []struct {
		name string
		code string
		want Diagnostic
	}{
		{"non-ASCII before the error", "x = \"éé\" $\n",
			Diagnostic{Line: 1, Column: 10, EndLine: 1, EndColumn: 11, Code: "syntax-error", Message: "SyntaxError: invalid syntax", Severity: "error"}},
		{"return outside a function (compile, not ast.parse)", "def f(args):\n    return 1\nreturn 2\n",
			Diagnostic{Line: 3, Column: 1, EndLine: 3, EndColumn: 9, Code: "syntax-error", Message: "SyntaxError: 'return' outside function", Severity: "error"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			linter, diags, err := p.Lint(context.Background(), tt.code)
			if err != nil || linter != LinterSyntaxOnly {
				t.Fatalf("Lint: %q, %v", linter, err)
			}
			if len(diags) != 1 || diags[0] != tt.want {
				t.Errorf("diagnostics %+v, want [%+v]", diags, tt.want)
			}
		})
	}
	_, diags, err := p.Lint(context.Background(), "import os\ndef f(args):\n    return args\n")
	if err != nil || len(diags) != 1 || diags[0].Code != "forbidden-import" {
		t.Errorf("guardrail finding: %+v, %v", diags, err)
	}
	_, diags, err = p.Lint(context.Background(), "def f(args):\n    return args\n")
	if err != nil || diags == nil || len(diags) != 0 {
		t.Errorf("clean module: %#v, %v", diags, err)
	}
	// Saving refuses what the linter reports as an error.
	if _, err := p.Check(context.Background(), "m", "return 2\n"); KindOf(err) != KindInvalid {
		t.Errorf("Check of a syntax error: %v", err)
	}
}

// Without a runtime and without ruff there is no linter: runtime_missing.
func TestPool_Lint_NoRuntime(t *testing.T) {
	t.Setenv("PATH", "/usr/bin:/bin")
	cfg := testConfig(t)
	cfg.PythonPath = filepath.Join(t.TempDir(), "nowhere", "python3")
	p, err := New(cfg, newFakeServices(), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	if _, _, err := p.Lint(context.Background(), "x = 1\n"); KindOf(err) != KindRuntimeMissing {
		t.Errorf("Lint without a runtime: %v", err)
	}
}
