package store

import (
	"errors"
	"fmt"
	"testing"
)

// TestFlows_Versions: numbered versions, a named version above the latest
// only, rollback to the one before, never reused numbers, delete.
func TestFlows_Versions(t *testing.T) {
	db := openTest(t)
	if _, _, ok, err := db.FlowVersion("scale", 0); ok || err != nil {
		t.Fatalf("empty store: ok %v err %v", ok, err)
	}
	if names, _, _, err := db.LatestFlows(); len(names) != 0 || err != nil {
		t.Fatalf("empty store lists %v %v", names, err)
	}
	for i := 1; i <= 2; i++ {
		v, stale, err := db.SaveFlowVersion("scale", 0, []byte(fmt.Sprintf("rec%d", i)))
		if v != i || stale || err != nil {
			t.Fatalf("save %d: %d %v %v", i, v, stale, err)
		}
	}
	if _, stale, err := db.SaveFlowVersion("scale", 2, []byte("replay")); !stale || err != nil {
		t.Fatalf("a replayed version: stale %v err %v", stale, err)
	}
	if v, _, err := db.SaveFlowVersion("scale", 7, []byte("rec7")); v != 7 || err != nil {
		t.Fatalf("version 7: %d %v", v, err)
	}
	v, rec, ok, err := db.FlowVersion("scale", 0)
	if v != 7 || string(rec) != "rec7" || !ok || err != nil {
		t.Fatalf("latest: %d %q %v %v", v, rec, ok, err)
	}
	if v, rec, _, _ := db.FlowVersion("scale", 1); v != 1 || string(rec) != "rec1" {
		t.Fatalf("version 1: %d %q", v, rec)
	}
	if _, _, ok, _ := db.FlowVersion("scale", 3); ok {
		t.Fatal("version 3 never saved but found")
	}
	vs, recs, err := db.FlowVersions("scale")
	if fmt.Sprint(vs) != "[1 2 7]" || string(recs[2]) != "rec7" || err != nil {
		t.Fatalf("versions %v %q %v", vs, recs, err)
	}
	v, rec, found, only, err := db.DropLatestFlowVersion("scale")
	if v != 2 || string(rec) != "rec2" || !found || only || err != nil {
		t.Fatalf("rollback: %d %q %v %v %v", v, rec, found, only, err)
	}
	if v, _, _ := db.SaveFlowVersion("scale", 0, []byte("next")); v != 8 {
		t.Fatalf("after a rollback the next version is %d, want 8 (never reused)", v)
	}
	if _, _, err := db.SaveFlowVersion("other", 0, []byte("o1")); err != nil {
		t.Fatal(err)
	}
	names, lv, lrec, err := db.LatestFlows()
	if fmt.Sprint(names) != "[other scale]" || fmt.Sprint(lv) != "[1 8]" || string(lrec[1]) != "next" || err != nil {
		t.Fatalf("latest flows %v %v %q %v", names, lv, lrec, err)
	}
	if _, _, found, only, _ := db.DropLatestFlowVersion("other"); !found || !only {
		t.Errorf("rollback of a single version: found %v only %v", found, only)
	}
	if _, _, found, _, _ := db.DropLatestFlowVersion("nope"); found {
		t.Error("rollback of an unknown flow found it")
	}
	if found, err := db.DeleteFlowVersions("scale"); !found || err != nil {
		t.Fatalf("delete: %v %v", found, err)
	}
	if found, _ := db.DeleteFlowVersions("scale"); found {
		t.Error("second delete found versions")
	}
	if v, _, _ := db.SaveFlowVersion("scale", 0, []byte("again")); v != 9 {
		t.Errorf("after delete the next version is %d, want 9", v)
	}
	if _, _, err := db.SaveFlowVersion("", 0, nil); !errors.Is(err, ErrInvalid) {
		t.Errorf("empty name: %v", err)
	}
}
