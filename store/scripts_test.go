package store_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"qubiq.dev/edge/store"
	"qubiq.dev/edge/store/storetest"
)

func TestDB_Scripts_Versions(t *testing.T) {
	db := storetest.MustOpen(t)
	for i := 1; i <= 3; i++ {
		v, err := db.SaveScript("pumps", fmt.Sprintf("code %d", i), []byte(fmt.Sprintf(`{"n":%d}`, i)))
		if err != nil || v != i {
			t.Fatalf("SaveScript #%d = %d, %v; want %d", i, v, err, i)
		}
	}
	if v, err := db.SaveScript("alarms", "a1", nil); err != nil || v != 1 {
		t.Fatalf("other module starts at 1: %d, %v", v, err)
	}

	s, err := db.Script("pumps")
	if err != nil || s.Version != 3 || s.Code != "code 3" || string(s.Meta) != `{"n":3}` || s.Module != "pumps" || s.Saved.IsZero() {
		t.Errorf("Script = %+v, %v; want version 3", s, err)
	}
	s, err = db.ScriptVersion("pumps", 2)
	if err != nil || s.Version != 2 || s.Code != "code 2" {
		t.Errorf("ScriptVersion 2 = %+v, %v", s, err)
	}
	vs, err := db.ScriptVersions("pumps")
	if err != nil || len(vs) != 3 {
		t.Fatalf("ScriptVersions = %+v, %v", vs, err)
	}
	for i, s := range vs {
		if s.Version != i+1 || s.Code != fmt.Sprintf("code %d", i+1) {
			t.Errorf("version %d: %+v", i+1, s)
		}
	}
	all, err := db.Scripts()
	if err != nil || len(all) != 2 || all[0].Module != "alarms" || all[1].Module != "pumps" || all[1].Version != 3 {
		t.Errorf("Scripts = %+v, %v; want alarms@1, pumps@3", all, err)
	}

	for name, err := range map[string]error{
		"Script(absent)":          second(db.Script("absent")),
		"ScriptVersion(pumps, 9)": second(db.ScriptVersion("pumps", 9)),
		"ScriptVersion(pumps, 0)": second(db.ScriptVersion("pumps", 0)),
		"ScriptVersions(absent)":  second(db.ScriptVersions("absent")),
		"DeleteScript(absent)":    db.DeleteScript("absent"),
	} {
		if !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s = %v, want ErrNotFound", name, err)
		}
	}

	// Delete removes every version; versions are never reused afterwards.
	if err := db.DeleteScript("pumps"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Script("pumps"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Script after delete = %v, want ErrNotFound", err)
	}
	if all, _ := db.Scripts(); len(all) != 1 || all[0].Module != "alarms" {
		t.Errorf("Scripts after delete = %+v", all)
	}
	if err := db.DeleteScript("pumps"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("second delete = %v, want ErrNotFound", err)
	}
	if v, err := db.SaveScript("pumps", "again", nil); err != nil || v != 4 {
		t.Errorf("SaveScript after delete = %d, %v; want 4", v, err)
	}
	if _, err := db.SaveScript("", "x", nil); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("SaveScript empty module = %v, want ErrInvalid", err)
	}
}

func second[T any](_ T, err error) error { return err }

// TestDB_Scripts_SaveAtAndDropLatest: a numbered push must rise above every
// version ever given; a rollback drops the latest and returns the one
// before, and versions are not reused.
func TestDB_Scripts_SaveAtAndDropLatest(t *testing.T) {
	db := storetest.MustOpen(t)
	if _, err := db.SaveScript("m", "v1", nil); err != nil {
		t.Fatal(err)
	}
	if err := db.SaveScriptAt("m", 5, "v5", nil); err != nil {
		t.Fatal(err)
	}
	for _, v := range []int{5, 3, 1} {
		if err := db.SaveScriptAt("m", v, "old", nil); !errors.Is(err, store.ErrStaleVersion) {
			t.Errorf("SaveScriptAt %d: %v; want ErrStaleVersion", v, err)
		}
	}
	if v, err := db.SaveScript("m", "v6", nil); err != nil || v != 6 {
		t.Fatalf("SaveScript after a numbered push = %d, %v; want 6", v, err)
	}
	s, err := db.DropLatestScript("m")
	if err != nil || s.Version != 5 || s.Code != "v5" {
		t.Fatalf("DropLatestScript = %+v, %v; want v5", s, err)
	}
	if s, _ := db.Script("m"); s.Version != 5 {
		t.Fatalf("latest after rollback = %d", s.Version)
	}
	if s, err := db.DropLatestScript("m"); err != nil || s.Version != 1 {
		t.Fatalf("second rollback = %+v, %v", s, err)
	}
	if _, err := db.DropLatestScript("m"); !errors.Is(err, store.ErrOnlyVersion) || strings.Count(err.Error(), `script "m"`) != 1 {
		t.Fatalf("rollback of the only version: %v (want ErrOnlyVersion naming the module once)", err)
	}
	if _, err := db.DropLatestScript("nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown module: %v", err)
	}
	if v, _ := db.SaveScript("m", "v7", nil); v != 7 {
		t.Fatalf("a version was reused: %d", v)
	}
}
