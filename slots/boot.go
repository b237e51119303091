package slots

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"qubiq.dev/edge/store"
)

// BootOptions configures Boot.
type BootOptions struct {
	// StoreTimeout bounds the wait for the store file's lock (the daemon is
	// stopped when ExecStartPre runs, so it is free); zero is 5 s.
	StoreTimeout time.Duration
	// Logf receives one line per action taken (qubiq-slot prints them to
	// the journal); nil discards.
	Logf func(format string, args ...any)
}

// Report says what Boot did.
type Report struct {
	Active     string
	Trial      bool
	BootCount  int
	RolledBack bool
	Snapshot   bool // a store snapshot was taken for the trial
	Repaired   bool // current was switched to match slots.json
}

// Boot is the unit's ExecStartPre (qubiq-slot boot), run before every start
// of the daemon:
//
//  1. A slot on trial has its boot count raised and saved before the daemon
//     runs, so a crash, a watchdog kill or a power cut counts. When the
//     count passes the boot limit without a confirmation, the trial has
//     failed: the store snapshot taken for it is put back, the previous slot
//     becomes active again and the reason is recorded.
//  2. At a trial slot's first start, when its store schema is newer than the
//     store file's (or unknown), the store is snapshotted (a bbolt
//     read-transaction copy) so a rollback can restore it.
//  3. `current` is made to match slots.json (repairing a power cut between
//     the two writes).
//  4. The active slot's schema is checked against the store's: a store
//     newer than the slot knows is refused with a *SchemaError that says
//     what to do.
//
// Every step is idempotent: a Boot interrupted at any point is completed by
// the next one.
func Boot(l Layout, opts BootOptions) (Report, error) {
	logf := opts.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if opts.StoreTimeout <= 0 {
		opts.StoreTimeout = 5 * time.Second
	}
	st, err := Load(l)
	if err != nil {
		return Report{}, err
	}
	var rep Report
	// A snapshot put back half-way (a power cut during a rollback) is
	// finished first.
	if err := finishRestore(l, &st); err != nil {
		return rep, err
	}
	if st.Trial {
		st.BootCount++
		info := st.Slots[st.Active]
		switch {
		case st.BootCount > st.BootLimit:
			reason := fmt.Sprintf("slot %s (version %s) was started %d times on trial without confirming health (limit %d)",
				st.Active, orUnknown(info.Version), st.BootCount-1, st.BootLimit)
			if err := rollback(l, &st, reason, logf); err != nil {
				return rep, err
			}
			rep.RolledBack = true
		case !slotComplete(l, st.Active):
			reason := fmt.Sprintf("slot %s has no executable bin/qubiqd", st.Active)
			if err := rollback(l, &st, reason, logf); err != nil {
				return rep, err
			}
			rep.RolledBack = true
		case st.BootCount == 1:
			took, err := snapshotForTrial(l, &st, opts.StoreTimeout, logf)
			if err != nil {
				return rep, err
			}
			rep.Snapshot = took
		}
		if !rep.RolledBack {
			if err := Save(l, st); err != nil {
				return rep, err
			}
			logf("slot %s on trial: start %d of %d", st.Active, st.BootCount, st.BootLimit)
		}
	}
	if cur, err := CurrentSlot(l); err != nil || cur != st.Active {
		if err := SwitchCurrent(l, st.Active); err != nil {
			return rep, err
		}
		logf("current pointed to %q; switched to slot %s as %s says", cur, st.Active, StateFile)
		rep.Repaired = true
	}
	rep.Active, rep.Trial, rep.BootCount = st.Active, st.Trial, st.BootCount
	if err := CheckSchema(l, st, opts.StoreTimeout); err != nil {
		return rep, err
	}
	return rep, nil
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// slotComplete reports whether slot holds an executable daemon.
func slotComplete(l Layout, slot string) bool {
	fi, err := os.Stat(filepath.Join(l.SlotDir(slot), "bin", "qubiqd"))
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// snapshotForTrial copies the store before the trial slot's daemon may
// migrate it: when the slot's schema is newer than the file's, or unknown.
func snapshotForTrial(l Layout, st *State, timeout time.Duration, logf func(string, ...any)) (bool, error) {
	slotSchema := st.Slots[st.Active].SchemaVersion
	if slotSchema == 0 {
		if info, err := ReadSlotInfo(l, st.Active); err == nil {
			slotSchema = info.SchemaVersion
		}
	}
	fileSchema, err := store.FileSchemaVersion(l.StorePath(), timeout)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil // no store yet: nothing to protect
	}
	if err != nil {
		return false, fmt.Errorf("slots: snapshot before trial: %w", err)
	}
	if slotSchema != 0 && slotSchema <= fileSchema {
		return false, nil
	}
	dst := l.SnapshotPath(st.Active)
	tmp := dst + ".tmp"
	os.Remove(tmp)
	v, err := store.CopyFile(l.StorePath(), tmp, timeout)
	if err != nil {
		return false, fmt.Errorf("slots: snapshot before trial: %w", err)
	}
	if own := ownerOf(l.DataDir); own != nil {
		if err := os.Chown(tmp, own.uid, own.gid); err != nil {
			return false, fmt.Errorf("slots: snapshot before trial: %w", err)
		}
	}
	if err := os.Rename(tmp, dst); err != nil {
		return false, fmt.Errorf("slots: snapshot before trial: %w", err)
	}
	if err := SyncDir(l.DataDir); err != nil {
		return false, err
	}
	st.Snapshot = &Snapshot{Path: dst, ForSlot: st.Active, SchemaVersion: v, TakenAt: time.Now().UTC()}
	logf("store snapshot (schema %d) taken before slot %s (schema %s) first starts: %s", v, st.Active, schemaText(slotSchema), dst)
	return true, nil
}

func schemaText(v uint64) string {
	if v == 0 {
		return "unknown"
	}
	return fmt.Sprint(v)
}

// rollback makes the previous slot active again after a failed trial,
// restoring the store snapshot taken for the trial. The state is saved
// before current is switched.
func rollback(l Layout, st *State, reason string, logf func(string, ...any)) error {
	from := st.Active
	to := st.Previous
	if !ValidSlot(to) || to == from {
		to = Other(from)
	}
	if !slotComplete(l, to) {
		return fmt.Errorf("slots: %s; cannot roll back: slot %s has no executable bin/qubiqd either", reason, to)
	}
	restored := ""
	if st.Snapshot != nil && st.Snapshot.ForSlot == from {
		if err := putBack(l, st.Snapshot, from); err != nil {
			return err
		}
		restored = fmt.Sprintf("; store restored from the snapshot taken before the trial (schema %d; the trial's store kept as %s)",
			st.Snapshot.SchemaVersion, filepath.Base(rejectedPath(l, from)))
		st.Snapshot = nil
	}
	info := st.Slots[from]
	info.Bad = true
	st.Slots[from] = info
	st.Active, st.Previous, st.Trial, st.BootCount = to, "", false, 0
	msg := reason + "; switched back to slot " + to + restored
	st.record(Result{Action: "rollback", Slot: from, Version: info.Version, OK: false, Message: msg})
	if err := Save(l, *st); err != nil {
		return err
	}
	if err := SwitchCurrent(l, to); err != nil {
		return err
	}
	logf("rollback: %s", msg)
	return nil
}

func rejectedPath(l Layout, slot string) string {
	return l.StorePath() + ".from-failed-slot-" + slot
}

// putBack puts the snapshot in place of the store: the store is renamed
// aside, then the snapshot renamed to the store's name. Interrupted, the
// next Boot finishes it (finishRestore).
func putBack(l Layout, snap *Snapshot, from string) error {
	if _, err := os.Stat(snap.Path); err != nil {
		return fmt.Errorf("slots: the store snapshot %s for the trial is gone (%v); the store is left as it is", snap.Path, err)
	}
	if _, err := os.Stat(l.StorePath()); err == nil {
		if err := os.Rename(l.StorePath(), rejectedPath(l, from)); err != nil {
			return fmt.Errorf("slots: restore snapshot: %w", err)
		}
	}
	if err := os.Rename(snap.Path, l.StorePath()); err != nil {
		return fmt.Errorf("slots: restore snapshot: %w", err)
	}
	return SyncDir(l.DataDir)
}

// finishRestore completes a putBack cut short: the store moved aside but
// the snapshot not yet in its place.
func finishRestore(l Layout, st *State) error {
	if st.Snapshot == nil {
		return nil
	}
	if _, err := os.Stat(l.StorePath()); errors.Is(err, fs.ErrNotExist) {
		if _, err := os.Stat(st.Snapshot.Path); err == nil {
			if err := os.Rename(st.Snapshot.Path, l.StorePath()); err != nil {
				return fmt.Errorf("slots: finish restoring the snapshot: %w", err)
			}
			st.Snapshot = nil // the rollback that was cut short goes on without it
			return SyncDir(l.DataDir)
		}
	}
	return nil
}

// SchemaError is returned when the store's schema is newer than the active
// slot's daemon knows: it would refuse to open it. The message says what
// to do.
type SchemaError struct {
	Slot, Version string
	Store, Knows  uint64
	Snapshot      string // a snapshot file that could be restored, if any
}

// Error says which schema the store has, which the slot's daemon knows,
// and what to do (flash firmware that knows it, or restore Snapshot).
func (e *SchemaError) Error() string {
	msg := fmt.Sprintf("store schema version %d is newer than this firmware knows (slot %s, version %s, knows schema %d): a newer firmware migrated the store. "+
		"To go on, flash firmware that knows schema %d again", e.Store, e.Slot, orUnknown(e.Version), e.Knows, e.Store)
	if e.Snapshot != "" {
		msg += fmt.Sprintf(", or put back the copy taken before the upgrade with `qubiq-slot restore-snapshot` (%s; changes since it are lost)", e.Snapshot)
	}
	return msg + ", or restore a backup made on this version into a fresh data directory (docs/appliance.md, \"Backup and restore\")"
}

// CheckSchema compares the store file's schema with what the active slot's
// daemon knows (its manifest's schema_version; unknown passes). No store
// file passes.
func CheckSchema(l Layout, st State, timeout time.Duration) error {
	knows := st.Slots[st.Active].SchemaVersion
	if info, err := ReadSlotInfo(l, st.Active); err == nil && info.SchemaVersion != 0 {
		knows = info.SchemaVersion
	}
	if knows == 0 {
		return nil
	}
	v, err := store.FileSchemaVersion(l.StorePath(), timeout)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("slots: schema check: %w", err)
	}
	if v <= knows {
		return nil
	}
	e := &SchemaError{Slot: st.Active, Version: st.Slots[st.Active].Version, Store: v, Knows: knows}
	if p, ok := findSnapshot(l); ok {
		e.Snapshot = p
	}
	return e
}

func findSnapshot(l Layout) (string, bool) {
	for _, s := range []string{A, B} {
		if _, err := os.Stat(l.SnapshotPath(s)); err == nil {
			return l.SnapshotPath(s), true
		}
	}
	return "", false
}

// ExplainStoreError is for the daemon: when opening the store failed with
// store.ErrSchemaTooNew it returns a *SchemaError-worded error saying what
// to do; other errors come back unchanged.
func ExplainStoreError(l Layout, err error) error {
	if !errors.Is(err, store.ErrSchemaTooNew) {
		return err
	}
	st, lerr := Load(l)
	if lerr != nil {
		return err
	}
	if serr := CheckSchema(l, st, time.Second); serr != nil {
		return fmt.Errorf("%w (%w)", serr, err)
	}
	return err
}

// RestoreSnapshot puts back the store snapshot taken before the last
// trial (qubiq-slot restore-snapshot, for an operator after a SchemaError).
// The current store is kept beside it, renamed.
func RestoreSnapshot(l Layout) (string, error) {
	st, err := Load(l)
	if err != nil {
		return "", err
	}
	snap := st.Snapshot
	if snap == nil {
		p, ok := findSnapshot(l)
		if !ok {
			return "", fmt.Errorf("slots: no store snapshot in %s", l.DataDir)
		}
		snap = &Snapshot{Path: p, ForSlot: p[len(p)-1:]} // qubiq.db.before-slot-<x>
	}
	if err := putBack(l, snap, snap.ForSlot); err != nil {
		return "", err
	}
	st.Snapshot = nil
	st.record(Result{Action: "restore-snapshot", Slot: st.Active, OK: true, Message: "store put back from " + snap.Path})
	return snap.Path, Save(l, st)
}

// BeginTrial makes slot, freshly installed with info, the active slot on
// trial, remembering the slot it replaces for a rollback: slots.json is
// saved first, then current switched (Boot repairs a cut between the two).
func BeginTrial(l Layout, slot string, info SlotInfo, limit int) error {
	st, err := Load(l)
	if err != nil {
		return err
	}
	if !ValidSlot(slot) {
		return fmt.Errorf("slots: trial of %q: not a slot", slot)
	}
	if limit <= 0 {
		limit = DefaultBootLimit
	}
	if st.Snapshot != nil {
		os.Remove(st.Snapshot.Path)
		st.Snapshot = nil
	}
	os.Remove(l.SnapshotPath(slot))
	if info.InstalledAt.IsZero() {
		info.InstalledAt = time.Now().UTC()
	}
	st.Previous = st.Active
	if st.Trial {
		// Flashing over a trial: going back means going to the last
		// confirmed slot, which is the trial's own previous one.
		st.Previous = Other(slot)
	}
	st.Active, st.Trial, st.BootCount, st.BootLimit = slot, true, 0, limit
	st.Slots[slot] = info
	st.record(Result{Action: "install", Slot: slot, Version: info.Version, OK: true,
		Message: fmt.Sprintf("version %s installed in slot %s, on trial (%d starts to confirm health)", orUnknown(info.Version), slot, limit)})
	if err := Save(l, st); err != nil {
		return err
	}
	return SwitchCurrent(l, slot)
}

// Confirm ends slot's trial: the daemon running from it was healthy for the
// configured time. It reports whether a trial was ended (false when slot is
// not the active trial slot: nothing to do).
func Confirm(l Layout, slot string) (bool, error) {
	st, err := Load(l)
	if err != nil {
		return false, err
	}
	if !st.Trial || st.Active != slot {
		return false, nil
	}
	info := st.Slots[slot]
	st.Trial, st.BootCount = false, 0
	st.record(Result{Action: "confirm", Slot: slot, Version: info.Version, OK: true,
		Message: fmt.Sprintf("version %s in slot %s confirmed healthy", orUnknown(info.Version), slot)})
	return true, Save(l, st)
}

// Activate makes slot the active slot, not on trial (qubiq-slot activate;
// the package's postinst after dpkg replaced slot a). reason is recorded.
func Activate(l Layout, slot, reason string) error {
	if !ValidSlot(slot) {
		return fmt.Errorf("slots: activate %q: not a slot", slot)
	}
	if !slotComplete(l, slot) {
		return fmt.Errorf("slots: activate %s: the slot has no executable bin/qubiqd", slot)
	}
	st, err := Load(l)
	if err != nil {
		if _, serr := os.Stat(l.StatePath()); serr == nil {
			// A damaged state is replaced: this is the repair.
			st = State{Slots: map[string]SlotInfo{}, BootLimit: DefaultBootLimit}
		} else {
			return err
		}
	}
	info, _ := ReadSlotInfo(l, slot)
	info.InstalledAt = st.Slots[slot].InstalledAt
	st.Slots[slot] = info
	st.Active, st.Previous, st.Trial, st.BootCount = slot, "", false, 0
	st.record(Result{Action: "activate", Slot: slot, Version: info.Version, OK: true, Message: reason})
	if err := Save(l, st); err != nil {
		return err
	}
	return SwitchCurrent(l, slot)
}

// SlotOfExecutable returns the slot the running executable lives in (the
// daemon, started through current, resolves to slots/<x>/bin/qubiqd), or
// an error when it runs from elsewhere (a development build).
func SlotOfExecutable(l Layout) (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	exe, err = filepath.EvalSymlinks(exe)
	if err != nil {
		return "", err
	}
	root, err := filepath.EvalSymlinks(filepath.Join(l.Root, "slots"))
	if err != nil {
		return "", err
	}
	rel, err := filepath.Rel(root, exe)
	if err != nil || len(rel) < 2 || !ValidSlot(rel[:1]) || rel[1] != filepath.Separator {
		return "", fmt.Errorf("slots: %s is not inside %s", exe, root)
	}
	return rel[:1], nil
}
