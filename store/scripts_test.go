package store_test

import (
	"errors"
	"fmt"
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
