package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWriteFile_ReplacesWithPermAndLeavesNoTemp(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f.yaml")
	if err := os.WriteFile(p, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(p, []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	st, _ := os.Stat(p)
	if err != nil || string(b) != "new" || st.Mode().Perm() != 0o600 {
		t.Fatalf("content %q mode %v err %v", b, st.Mode(), err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("directory holds %v; want only f.yaml", ents)
	}
}

func TestWriteFile_MissingDirIsAnErrorAndWritesNothing(t *testing.T) {
	p := filepath.Join(t.TempDir(), "no", "f")
	if err := WriteFile(p, []byte("x"), 0o644); err == nil {
		t.Fatal("write into a missing directory succeeded")
	}
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Fatalf("stat: %v", err)
	}
}
