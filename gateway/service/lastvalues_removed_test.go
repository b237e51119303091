package service

import (
	"context"
	"strings"
	"testing"

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
