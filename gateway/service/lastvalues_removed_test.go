package service

import (
	"context"
	"strings"
	"testing"
	"time"

	"qubiq.dev/edge/tagengine"
	"qubiq.dev/edge/value"
)

// TestService_ImportProject_RemovedTagsLastValuesDeleted: a tag removed
// by an import keeps no last value in the store (store.DeleteLastValues:
// "tags removed from the project"). Else the store keeps every removed
// tag's VQT for ever (an import that removed 49,999 of 50,000 tags left
// 50,001 last values), each is loaded at every start, and a tag of the
// same path added again later is seeded at the next start with the VQT
// the removed one had.
func TestService_ImportProject_RemovedTagsLastValuesDeleted(t *testing.T) {
	s := newProjectService(t, projectV1)
	ctx := context.Background()
	if res, err := s.Engine().Write(ctx, designer, []tagengine.WriteRequest{{Path: "L/Gone", Value: 7}}); err != nil || res[0].Quality != value.Good {
		t.Fatalf("write: %+v %v", res, err)
	}
	v2 := strings.Replace(projectV1, "  - {path: L/Gone, device: sim, address: memory, type: int16, scan: 20ms}\n", "", 1)
	if _, err := s.ImportProject(ctx, designer, []byte(v2)); err != nil {
		t.Fatal(err)
	}
	readOne(t, s, "L/Gone", func(r tagengine.Result) bool { return r.Quality == value.BadNodeIDUnknown })
	last, err := s.db.LoadLastValues()
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := last["L/Gone"]; ok {
		t.Errorf("the store still holds the removed tag's last value %v (%s)", v.Value, v.Quality)
	}
}

// TestService_Start_DeletesLastValuesOfTagsNoLongerInTheProject: a last
// value kept for a path the project no longer has (removed while the
// daemon was stopped, or by a build that did not delete them) is deleted
// when the engine is built; the project's tags keep theirs, seeded as
// Uncertain_LastUsableValue (docs/project.md, Quality).
func TestService_Start_DeletesLastValuesOfTagsNoLongerInTheProject(t *testing.T) {
	dir := t.TempDir()
	opts := testOptions(t, dir)
	t0 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	if err := opts.Store.SaveLastValues(map[string]value.VQT{
		"L/Set": {Value: 42.5, Quality: value.Good, Time: t0},
		"L/Old": {Value: int64(7), Quality: value.Good, Time: t0},
	}); err != nil {
		t.Fatal(err)
	}
	s := newService(t, withProjectFile(t, opts, dir, projectV1))
	last, err := opts.Store.LoadLastValues()
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := last["L/Old"]; ok {
		t.Errorf("the store still holds L/Old, no tag of the project: %v", v.Value)
	}
	if v := last["L/Set"]; v.Value != 42.5 {
		t.Errorf("L/Set's stored last value: %v, want 42.5 kept", v.Value)
	}
	res, err := s.Engine().Read(designer, []string{"L/Set"})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Value != 42.5 || res[0].Quality != value.UncertainLastUsableValue {
		t.Errorf("L/Set before its first scan: %v %s, want 42.5 %s", res[0].Value, res[0].Quality, value.UncertainLastUsableValue)
	}
}
