package codecheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// root is the module root, two levels up from this package.
func root(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Fatalf("no go.mod at %s", dir)
	}
	return dir
}

// sources returns the project's non-test Go files by directory, skipping
// node_modules, testdata and hidden directories.
func sources(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	base := root(t)
	err := filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			n := d.Name()
			if p != base && (strings.HasPrefix(n, ".") || n == "node_modules" || n == "testdata" || n == "bin" || n == "build" || n == "var") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go") {
			rel, _ := filepath.Rel(base, filepath.Dir(p))
			out[rel] = append(out[rel], p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestNoLogPackageOrPrintOutsideCmd: outside cmd/ (and the benchmark
// harnesses, which are programs printing their result line), code logs
// through an injected *slog.Logger; the log package and fmt.Print* are
// banned (docs/architecture.md).
func TestNoLogPackageOrPrintOutsideCmd(t *testing.T) {
	fset := token.NewFileSet()
	for dir, files := range sources(t) {
		if strings.HasPrefix(dir, "cmd") || strings.HasPrefix(dir, "bench") {
			continue
		}
		for _, f := range files {
			af, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range af.Imports {
				if p, _ := strconv.Unquote(imp.Path.Value); p == "log" {
					t.Errorf("%s imports the log package; take a *slog.Logger instead", f)
				}
			}
			ast.Inspect(af, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if id, ok := sel.X.(*ast.Ident); ok && id.Name == "fmt" && strings.HasPrefix(sel.Sel.Name, "Print") {
					t.Errorf("%s: fmt.%s outside cmd/; log with slog or return the text", fset.Position(sel.Pos()), sel.Sel.Name)
				}
				return true
			})
		}
	}
}

// TestOnePackageDocPerPackage: every package has exactly one package doc
// comment (docs/architecture.md).
func TestOnePackageDocPerPackage(t *testing.T) {
	fset := token.NewFileSet()
	for dir, files := range sources(t) {
		var with []string
		for _, f := range files {
			af, err := parser.ParseFile(fset, f, nil, parser.ParseComments|parser.PackageClauseOnly)
			if err != nil {
				t.Fatal(err)
			}
			if af.Doc != nil && strings.TrimSpace(af.Doc.Text()) != "" && !strings.HasPrefix(strings.TrimSpace(af.Doc.Text()), "Code generated") {
				with = append(with, filepath.Base(f))
			}
		}
		if len(with) != 1 {
			t.Errorf("package %s has %d package doc comments (%v); want exactly one", dir, len(with), with)
		}
	}
}
