package store_test

import (
	"errors"
	"testing"

	"qubiq.dev/edge/store"
	"qubiq.dev/edge/store/storetest"
)

func TestDB_Project(t *testing.T) {
	db := storetest.MustOpen(t)
	if doc, err := db.Project(); doc != nil || err != nil {
		t.Fatalf("Project on a new store = %q, %v; want nil, nil", doc, err)
	}
	for _, bad := range []string{``, `not json`, `[1,2]`, `"s"`, `{"a":`} {
		if err := db.PutProject([]byte(bad)); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("PutProject(%q) = %v, want ErrInvalid", bad, err)
		}
	}
	for _, doc := range []string{`{"version":1,"tags":[]}`, `{"version":2}`} {
		if err := db.PutProject([]byte(doc)); err != nil {
			t.Fatal(err)
		}
		got, err := db.Project()
		if err != nil || string(got) != doc {
			t.Errorf("Project = %q, %v; want %q", got, err, doc)
		}
	}
}

func TestDB_Meta(t *testing.T) {
	db := storetest.MustOpen(t)
	if v, err := db.Meta("absent"); v != nil || err != nil {
		t.Errorf("Meta(absent) = %q, %v; want nil, nil", v, err)
	}
	if err := db.PutMeta("bootstrap_hash", []byte{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	v, err := db.Meta("bootstrap_hash")
	if err != nil || string(v) != "\x01\x02\x03" {
		t.Errorf("Meta = %v, %v", v, err)
	}
	v[0] = 9 // a copy: the store is unchanged
	if again, _ := db.Meta("bootstrap_hash"); again[0] != 1 {
		t.Error("Meta returned memory shared with the store")
	}
	if err := db.PutMeta("empty", nil); err != nil {
		t.Fatal(err)
	}
	if v, err := db.Meta("empty"); v == nil || len(v) != 0 || err != nil {
		t.Errorf("Meta(empty) = %#v, %v; want empty, non-nil", v, err)
	}
	if err := db.DeleteMeta("bootstrap_hash"); err != nil {
		t.Fatal(err)
	}
	if v, _ := db.Meta("bootstrap_hash"); v != nil {
		t.Errorf("after DeleteMeta: %q", v)
	}
	for _, k := range []string{"", "schema_version"} {
		if err := db.PutMeta(k, []byte("x")); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("PutMeta(%q) = %v, want ErrInvalid", k, err)
		}
		if err := db.DeleteMeta(k); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("DeleteMeta(%q) = %v, want ErrInvalid", k, err)
		}
	}
	if v, err := db.Meta("schema_version"); len(v) != 8 || err != nil {
		t.Errorf("Meta(schema_version) = %x, %v", v, err)
	}
}
