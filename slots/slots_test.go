package slots

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"qubiq.dev/edge/store"
)

func testLayout(t *testing.T) Layout {
	t.Helper()
	d := t.TempDir()
	l := Layout{Root: filepath.Join(d, "usr/lib/qubiq"), DataDir: filepath.Join(d, "var/lib/qubiq")}
	if err := os.MkdirAll(filepath.Join(l.Root, "slots"), 0o755); err != nil {
		t.Fatal(err)
	}
	return l
}

// makeSlot installs a stand-in daemon and manifest in slot.
func makeSlot(t *testing.T, l Layout, slot, version string, schema uint64) {
	t.Helper()
	bin := filepath.Join(l.SlotDir(slot), "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "qubiqd"), []byte("#!/bin/sh\necho "+version+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	m, _ := json.Marshal(map[string]any{"version": version, "arch": "amd64", "schema_version": schema})
	if err := os.WriteFile(filepath.Join(l.SlotDir(slot), ManifestFile), m, 0o644); err != nil {
		t.Fatal(err)
	}
}

// setStore writes a store file with schema version v and meta marker=val.
func setStore(t *testing.T, l Layout, v uint64, marker string) {
	t.Helper()
	os.MkdirAll(l.DataDir, 0o700)
	db, err := bolt.Open(l.StorePath(), 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte("meta"))
		if err != nil {
			return err
		}
		var k [8]byte
		binary.BigEndian.PutUint64(k[:], v)
		if err := b.Put([]byte("schema_version"), k[:]); err != nil {
			return err
		}
		return b.Put([]byte("marker"), []byte(marker))
	})
	if err != nil {
		t.Fatal(err)
	}
}

func storeMarker(t *testing.T, l Layout) (uint64, string) {
	t.Helper()
	db, err := bolt.Open(l.StorePath(), 0o600, &bolt.Options{Timeout: time.Second, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var v uint64
	var m string
	db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("meta"))
		v = binary.BigEndian.Uint64(b.Get([]byte("schema_version")))
		m = string(b.Get([]byte("marker")))
		return nil
	})
	return v, m
}

func fresh(t *testing.T) Layout {
	l := testLayout(t)
	makeSlot(t, l, A, "1.0.0", 1)
	if err := Activate(l, A, "installed"); err != nil {
		t.Fatal(err)
	}
	return l
}

func TestLoad_WithoutStateFollowsCurrent(t *testing.T) {
	l := testLayout(t)
	makeSlot(t, l, B, "1.0.0", 1)
	if err := SwitchCurrent(l, B); err != nil {
		t.Fatal(err)
	}
	st, err := Load(l)
	if err != nil || st.Active != B || st.Trial || st.Slots[B].Version != "1.0.0" {
		t.Fatalf("state %+v, %v", st, err)
	}
	os.MkdirAll(l.DataDir, 0o700)
	os.WriteFile(l.StatePath(), []byte("{not json"), 0o600)
	if _, err := Load(l); err == nil || !strings.Contains(err.Error(), "damaged") || !strings.Contains(err.Error(), "qubiq-slot activate") {
		t.Fatalf("damaged state: %v", err)
	}
	// activate repairs it
	if err := Activate(l, B, "repair"); err != nil {
		t.Fatal(err)
	}
	if st, err := Load(l); err != nil || st.Active != B {
		t.Fatalf("after repair %+v %v", st, err)
	}
	ents, _ := os.ReadDir(l.Root)
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Fatalf("temporary left: %s", e.Name())
		}
	}
}

func TestBoot_FailedTrialRollsBackAfterLimit(t *testing.T) {
	l := fresh(t)
	makeSlot(t, l, B, "1.1.0", 1)
	if err := BeginTrial(l, B, SlotInfo{Version: "1.1.0", SchemaVersion: 1}, 3); err != nil {
		t.Fatal(err)
	}
	if cur, _ := CurrentSlot(l); cur != B {
		t.Fatalf("current %s after BeginTrial", cur)
	}
	for i := 1; i <= 3; i++ {
		rep, err := Boot(l, BootOptions{})
		if err != nil || rep.Active != B || !rep.Trial || rep.BootCount != i || rep.RolledBack {
			t.Fatalf("boot %d: %+v %v", i, rep, err)
		}
	}
	var lines []string
	rep, err := Boot(l, BootOptions{Logf: func(f string, a ...any) { lines = append(lines, f) }})
	if err != nil || !rep.RolledBack || rep.Active != A || rep.Trial {
		t.Fatalf("4th boot: %+v %v", rep, err)
	}
	if cur, _ := CurrentSlot(l); cur != A {
		t.Fatalf("current %s after rollback", cur)
	}
	st, _ := Load(l)
	if st.Last == nil || st.Last.Action != "rollback" || st.Last.Slot != B ||
		!strings.Contains(st.Last.Message, "started 3 times on trial without confirming health (limit 3)") || !st.Slots[B].Bad {
		t.Fatalf("last result %+v, slots %+v", st.Last, st.Slots)
	}
	// the old slot boots normally from now on
	if rep, err := Boot(l, BootOptions{}); err != nil || rep.RolledBack || rep.Active != A {
		t.Fatalf("after rollback: %+v %v", rep, err)
	}
}

func TestBoot_ConfirmedTrialStaysAndStopsCounting(t *testing.T) {
	l := fresh(t)
	makeSlot(t, l, B, "1.1.0", 1)
	BeginTrial(l, B, SlotInfo{Version: "1.1.0"}, 2)
	Boot(l, BootOptions{})
	if ok, err := Confirm(l, A); ok || err != nil {
		t.Fatalf("confirming the inactive slot: %v %v", ok, err)
	}
	if ok, err := Confirm(l, B); !ok || err != nil {
		t.Fatalf("confirm: %v %v", ok, err)
	}
	for i := 0; i < 5; i++ {
		rep, err := Boot(l, BootOptions{})
		if err != nil || rep.Active != B || rep.Trial || rep.RolledBack {
			t.Fatalf("boot after confirm: %+v %v", rep, err)
		}
	}
	st, _ := Load(l)
	if st.Last.Action != "confirm" {
		t.Fatalf("last %+v", st.Last)
	}
}

func TestBoot_SchemaSnapshotRestoredOnRollback(t *testing.T) {
	l := fresh(t)
	setStore(t, l, 1, "before upgrade")
	makeSlot(t, l, B, "2.0.0", 2)
	BeginTrial(l, B, SlotInfo{Version: "2.0.0", SchemaVersion: 2}, 1)
	rep, err := Boot(l, BootOptions{})
	if err != nil || !rep.Snapshot {
		t.Fatalf("first trial boot: %+v %v", rep, err)
	}
	if v, err := store.FileSchemaVersion(l.SnapshotPath(B), time.Second); err != nil || v != 1 {
		t.Fatalf("snapshot schema %d %v", v, err)
	}
	// The new daemon migrates the store and writes to it, then fails.
	setStore(t, l, 2, "written by 2.0.0")
	rep, err = Boot(l, BootOptions{})
	if err != nil || !rep.RolledBack || rep.Active != A {
		t.Fatalf("rollback boot: %+v %v", rep, err)
	}
	if v, m := storeMarker(t, l); v != 1 || m != "before upgrade" {
		t.Fatalf("store after rollback: schema %d marker %q", v, m)
	}
	if _, err := os.Stat(l.StorePath() + ".from-failed-slot-b"); err != nil {
		t.Fatalf("the trial's store was not kept aside: %v", err)
	}
	st, _ := Load(l)
	if st.Snapshot != nil || !strings.Contains(st.Last.Message, "store restored from the snapshot") {
		t.Fatalf("state %+v last %+v", st.Snapshot, st.Last)
	}
}

func TestBoot_NoSnapshotWhenSchemaUnchanged(t *testing.T) {
	l := fresh(t)
	setStore(t, l, 1, "x")
	makeSlot(t, l, B, "1.0.1", 1)
	BeginTrial(l, B, SlotInfo{Version: "1.0.1", SchemaVersion: 1}, 3)
	if rep, err := Boot(l, BootOptions{}); err != nil || rep.Snapshot {
		t.Fatalf("%+v %v", rep, err)
	}
	if _, err := os.Stat(l.SnapshotPath(B)); err == nil {
		t.Fatal("snapshot taken without a schema change")
	}
}

func TestBoot_OldSlotRefusesNewerSchemaSayingWhatToDo(t *testing.T) {
	l := fresh(t)
	setStore(t, l, 3, "from a newer firmware")
	_, err := Boot(l, BootOptions{})
	var se *SchemaError
	if !errors.As(err, &se) || se.Store != 3 || se.Knows != 1 {
		t.Fatalf("err = %v", err)
	}
	for _, want := range []string{"store schema version 3 is newer than this firmware knows", "flash firmware that knows schema 3", "restore a backup"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message lacks %q: %s", want, err)
		}
	}
	// The daemon's own open error gets the same explanation.
	openErr := errors.Join(store.ErrSchemaTooNew)
	if got := ExplainStoreError(l, openErr); !errors.As(got, &se) || !errors.Is(got, store.ErrSchemaTooNew) {
		t.Fatalf("ExplainStoreError = %v", got)
	}
}

func TestBoot_RepairsCurrentAfterCutBetweenStateAndSymlink(t *testing.T) {
	l := fresh(t)
	makeSlot(t, l, B, "1.1.0", 1)
	BeginTrial(l, B, SlotInfo{Version: "1.1.0"}, 3)
	SwitchCurrent(l, A) // as if the power went between the state write and the swap
	rep, err := Boot(l, BootOptions{})
	if err != nil || !rep.Repaired || rep.Active != B {
		t.Fatalf("%+v %v", rep, err)
	}
	if cur, _ := CurrentSlot(l); cur != B {
		t.Fatalf("current %s", cur)
	}
}

func TestBoot_FinishesRestoreCutShort(t *testing.T) {
	l := fresh(t)
	setStore(t, l, 1, "before")
	makeSlot(t, l, B, "2.0.0", 2)
	BeginTrial(l, B, SlotInfo{Version: "2.0.0", SchemaVersion: 2}, 1)
	Boot(l, BootOptions{}) // snapshot taken
	// Cut during the rollback: the store moved aside, snapshot not yet in place.
	os.Rename(l.StorePath(), l.StorePath()+".from-failed-slot-b")
	if _, err := Boot(l, BootOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, m := storeMarker(t, l); m != "before" {
		t.Fatalf("marker %q", m)
	}
}

func TestBoot_TrialSlotWithoutDaemonRollsBackAtOnce(t *testing.T) {
	l := fresh(t)
	os.MkdirAll(l.SlotDir(B), 0o755)
	BeginTrial(l, B, SlotInfo{Version: "9"}, 3)
	rep, err := Boot(l, BootOptions{})
	if err != nil || !rep.RolledBack || rep.Active != A {
		t.Fatalf("%+v %v", rep, err)
	}
}

func TestRunTrial_ConfirmsAfterHealthyPeriodOrTimesOut(t *testing.T) {
	l := fresh(t)
	makeSlot(t, l, B, "1.1.0", 1)
	BeginTrial(l, B, SlotInfo{Version: "1.1.0"}, 3)
	// healthy only from the third poll on: the period restarts at each failure
	polls := 0
	err := RunTrial(context.Background(), l, TrialOptions{Slot: B, ConfirmAfter: 100 * time.Millisecond, Timeout: 5 * time.Second, Poll: 10 * time.Millisecond,
		Healthy: func(context.Context) error {
			polls++
			if polls < 3 {
				return errors.New("devices not up")
			}
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := Load(l); st.Trial {
		t.Fatal("still on trial after RunTrial returned")
	}
	// a new trial that never gets healthy
	makeSlot(t, l, A, "1.2.0", 1)
	BeginTrial(l, A, SlotInfo{Version: "1.2.0"}, 3)
	err = RunTrial(context.Background(), l, TrialOptions{Slot: A, ConfirmAfter: 50 * time.Millisecond, Timeout: 200 * time.Millisecond, Poll: 10 * time.Millisecond,
		Healthy: func(context.Context) error { return errors.New("API down") }})
	if !errors.Is(err, ErrTrialTimeout) || !strings.Contains(err.Error(), "API down") {
		t.Fatalf("err = %v", err)
	}
	if st, _ := Load(l); !st.Trial {
		t.Fatal("trial ended without confirmation")
	}
	// not on trial (another slot): returns at once
	if err := RunTrial(context.Background(), l, TrialOptions{Slot: B, Healthy: func(context.Context) error { return nil }}); err != nil {
		t.Fatal(err)
	}
}

func TestSaveLoad_RoundTripAndHistoryBound(t *testing.T) {
	l := fresh(t)
	st, _ := Load(l)
	for i := 0; i < 30; i++ {
		st.Record(Result{Action: "refuse", Message: "bad signature"})
	}
	if err := Save(l, st); err != nil {
		t.Fatal(err)
	}
	got, err := Load(l)
	if err != nil || len(got.History) != historyLen || got.Last.Action != "refuse" {
		t.Fatalf("%d history entries, last %+v, %v", len(got.History), got.Last, err)
	}
	fi, _ := os.Stat(l.StatePath())
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", fi.Mode())
	}
}
