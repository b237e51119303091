package service

import (
	"context"
	"os"
	"testing"
	"time"

	"qubiq.dev/edge/value"
)

// TestService_Start_EmptyProjectFileKeepsLastValues: a project file with
// neither a devices: nor a tags: section (truncated to nothing, "{}", a
// file of comments) is what an import refuses, because "it would remove
// them all" (docs/project.md, Import and export), their last values with
// them. The start that reads such a file must not delete every stored last
// value either: once the right file is back, the tags are seeded with the
// values they had (Uncertain_LastUsableValue, docs/project.md, Quality).
func TestService_Start_EmptyProjectFileKeepsLastValues(t *testing.T) {
	for _, src := range []string{"", "{}\n", "# truncated\n"} {
		dir := t.TempDir()
		opts := withProjectFile(t, testOptions(t, dir), dir, src)
		t0 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
		if err := opts.Store.SaveLastValues(map[string]value.VQT{"L/Set": {Value: 42.5, Quality: value.Good, Time: t0}}); err != nil {
			t.Fatal(err)
		}
		if s, err := New(opts); err == nil {
			s.Close(context.Background())
		}
		if err := os.WriteFile(opts.ProjectFile, []byte(projectV1), 0o640); err != nil {
			t.Fatal(err)
		}
		s := newService(t, opts)
		res, err := s.Engine().Read(designer, []string{"L/Set"})
		if err != nil {
			t.Fatal(err)
		}
		if res[0].Value != 42.5 {
			t.Errorf("project file %q at one start: L/Set at the next is %v %s, want its last value 42.5 kept", src, res[0].Value, res[0].Quality)
		}
	}
}
