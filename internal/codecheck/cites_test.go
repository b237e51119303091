package codecheck

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// notInClone matches citations of design notes that live outside the
// repository (the project's private design files and field-case notes): a
// user's clone has none of them, so comments, messages and docs cite the
// repo's own docs/, a protocol specification section or an upstream issue
// instead (docs/architecture.md). The names are put together here so that
// this file does not match itself.
var notInClone = regexp.MustCompile(`\b(` + strings.Join([]string{
	"DESIGN" + `\.md`, "SANDBOX" + `\.md`, "PERFORMANCE" + `\.md`, "STYLE" + `\.md`, "PEERS" + `\.md`,
	"cases" + `/[a-z]+\.md`,
}, "|") + `)`)

// fieldCase matches the other kind of citation a clone cannot follow: a
// field-case note named in words ("field" and "case" with a space; the notes
// are not in the repository). Put together so this file does not match itself.
var fieldCase = regexp.MustCompile(`(?i)\bfield` + ` cases?\b`)

// faultLabel matches a fault label such as C08. A label is fine where a
// page under docs/ defines it in a table row ("| C08 | ..."), as
// docs/modbus.md and docs/opcua.md do under "Faults from the field".
var faultLabel = regexp.MustCompile(`\bC[0-9]{2}\b`)

// docsLabels returns the fault labels defined by a table row of a page under
// docs/.
func docsLabels(t *testing.T, base string) map[string]bool {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join(base, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile(`^\| (C[0-9]{2}) \|`)
	out := map[string]bool{}
	for _, p := range pages {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if m := row.FindStringSubmatch(l); m != nil {
				out[m[1]] = true
			}
		}
	}
	return out
}

// TestNoCitationOfFilesOutsideTheRepo walks every source, script and page
// of the repository (tests included) and fails on each line that cites a
// design note a clone does not have (a field-case note, a fault label no
// page under docs/ defines), naming the file and line.
func TestNoCitationOfFilesOutsideTheRepo(t *testing.T) {
	base := root(t)
	labels := docsLabels(t, base)
	exts := map[string]bool{".go": true, ".md": true, ".py": true, ".js": true, ".sh": true, ".yaml": true, ".service": true}
	err := filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			n := d.Name()
			if p != base && (strings.HasPrefix(n, ".") || n == "node_modules" || n == "bin" || n == "build" || n == "var" || n == "dist") {
				return filepath.SkipDir
			}
			return nil
		}
		if !exts[filepath.Ext(p)] && d.Name() != "Makefile" {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for n := 1; sc.Scan(); n++ {
			l := sc.Text()
			rel, _ := filepath.Rel(base, p)
			if m := notInClone.FindString(l); m != "" {
				t.Errorf("%s:%d cites %s, which a clone of the repository does not have: cite docs/, a specification section or an upstream issue", rel, n, m)
			}
			if m := fieldCase.FindString(l); m != "" {
				t.Errorf("%s:%d cites a %q, which a clone of the repository does not have: say the reason itself, or cite docs/, a specification section or an upstream issue", rel, n, m)
			}
			for _, m := range faultLabel.FindAllString(l, -1) {
				if !labels[m] {
					t.Errorf("%s:%d cites fault %s, which no page under docs/ defines: say the reason itself, or cite docs/, a specification section or an upstream issue", rel, n, m)
				}
			}
		}
		return sc.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
}
