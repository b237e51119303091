package codecheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"sort"
	"testing"
)

// TestExportedIdentifiersHaveDocComments: every exported function, method
// (of an exported type), type, constant and variable of a non-main package
// has a doc comment (a comment group above it, or above its group, or a
// line comment after a value), as the project's standards ask.
func TestExportedIdentifiersHaveDocComments(t *testing.T) {
	var missing []string
	for _, files := range sources(t) {
		for _, p := range files {
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, p, nil, parser.ParseComments)
			if err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			if f.Name.Name == "main" {
				continue
			}
			at := func(pos token.Pos, name string) {
				missing = append(missing, fset.Position(pos).String()+": "+name)
			}
			for _, d := range f.Decls {
				switch d := d.(type) {
				case *ast.FuncDecl:
					if d.Name.IsExported() && d.Doc == nil && exportedReceiver(d) {
						at(d.Pos(), d.Name.Name)
					}
				case *ast.GenDecl:
					for _, s := range d.Specs {
						switch s := s.(type) {
						case *ast.TypeSpec:
							if s.Name.IsExported() && d.Doc == nil && s.Doc == nil {
								at(s.Pos(), s.Name.Name)
							}
						case *ast.ValueSpec:
							for _, n := range s.Names {
								if n.IsExported() && d.Doc == nil && s.Doc == nil && s.Comment == nil {
									at(n.Pos(), n.Name)
								}
							}
						}
					}
				}
			}
		}
	}
	sort.Strings(missing)
	for _, m := range missing {
		t.Errorf("exported identifier without a doc comment: %s", m)
	}
}

// exportedReceiver reports whether d is a function or a method whose
// receiver type is exported (methods of unexported types are not part of
// the package's documentation).
func exportedReceiver(d *ast.FuncDecl) bool {
	if d.Recv == nil || len(d.Recv.List) == 0 {
		return true
	}
	t := d.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	switch x := t.(type) {
	case *ast.IndexExpr:
		t = x.X
	case *ast.IndexListExpr:
		t = x.X
	}
	id, ok := t.(*ast.Ident)
	return !ok || id.IsExported()
}
