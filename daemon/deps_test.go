package daemon

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"slices"
	"strings"
	"testing"

	"qubiq.dev/edge/internal/deptest"
)

// daemon is wiring only: it imports the parts it builds, and nothing but
// cmd/qubiqd imports it (checked from the other side by every package's
// own deps test, which forbids daemon). It must not import the CLI's
// packages.
func TestDeps_Daemon(t *testing.T) {
	deptest.Forbid(t, "qubiq.dev/edge/daemon", "qubiq.dev/edge/client", "qubiq.dev/edge/cmd")
}

// TestDaemon_ExportsOnlyWhatQubiqdUses: daemon is wiring, not a library:
// its exported identifiers are exactly what cmd/qubiqd calls.
func TestDaemon_ExportsOnlyWhatQubiqdUses(t *testing.T) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range pkgs {
		for _, f := range p.Files {
			for _, d := range f.Decls {
				switch x := d.(type) {
				case *ast.FuncDecl:
					if x.Recv != nil && !recvExported(x.Recv) {
						continue // a method of an unexported type is not the package's API
					}
					if x.Name.IsExported() {
						got = append(got, x.Name.Name)
					}
				case *ast.GenDecl:
					for _, sp := range x.Specs {
						switch s := sp.(type) {
						case *ast.TypeSpec:
							if s.Name.IsExported() {
								got = append(got, s.Name.Name)
							}
						case *ast.ValueSpec:
							for _, n := range s.Names {
								if n.IsExported() {
									got = append(got, n.Name)
								}
							}
						}
					}
				}
			}
		}
	}
	slices.Sort(got)
	if want := []string{"Check", "New", "Run", "System", "Version"}; !slices.Equal(got, want) {
		t.Errorf("daemon exports %v; cmd/qubiqd uses %v", got, want)
	}
}

// recvExported reports whether a method's receiver type is exported.
func recvExported(recv *ast.FieldList) bool {
	t := recv.List[0].Type
	if st, ok := t.(*ast.StarExpr); ok {
		t = st.X
	}
	id, ok := t.(*ast.Ident)
	return ok && id.IsExported()
}
