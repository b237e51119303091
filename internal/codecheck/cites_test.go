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

// TestNoCitationOfFilesOutsideTheRepo walks every source, script and page
// of the repository (tests included) and fails on each line that cites a
// design note a clone does not have, naming the file and line.
func TestNoCitationOfFilesOutsideTheRepo(t *testing.T) {
	base := root(t)
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
			if m := notInClone.FindString(sc.Text()); m != "" {
				rel, _ := filepath.Rel(base, p)
				t.Errorf("%s:%d cites %s, which a clone of the repository does not have: cite docs/, a specification section or an upstream issue", rel, n, m)
			}
		}
		return sc.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
}
