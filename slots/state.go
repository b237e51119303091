package slots

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"qubiq.dev/edge/internal/atomicfile"
)

// Defaults of the appliance layout.
const (
	DefaultRoot      = "/usr/lib/qubiq"
	DefaultDataDir   = "/var/lib/qubiq"
	StateFile        = "slots.json"
	ManifestFile     = "manifest.json" // in each slot: what it holds
	DefaultBootLimit = 3
	stateFormat      = 1
	historyLen       = 20
)

// Slot names.
const (
	A = "a"
	B = "b"
)

// Other returns the other slot's name ("a" for "b" and the reverse).
func Other(slot string) string {
	if slot == A {
		return B
	}
	return A
}

// ValidSlot reports whether s names a slot.
func ValidSlot(s string) bool { return s == A || s == B }

// Layout is where the slots and their state live. Root holds slots/ and
// current; DataDir holds slots.json, the store and its snapshots.
type Layout struct {
	Root    string
	DataDir string
}

// DefaultLayout is the appliance's: /usr/lib/qubiq and /var/lib/qubiq.
func DefaultLayout() Layout { return Layout{Root: DefaultRoot, DataDir: DefaultDataDir} }

// SlotDir is <root>/slots/<slot>.
func (l Layout) SlotDir(slot string) string { return filepath.Join(l.Root, "slots", slot) }

// Current is the <root>/current symlink.
func (l Layout) Current() string { return filepath.Join(l.Root, "current") }

// StatePath is <data_dir>/slots.json.
func (l Layout) StatePath() string { return filepath.Join(l.DataDir, StateFile) }

// StorePath is <data_dir>/qubiq.db.
func (l Layout) StorePath() string { return filepath.Join(l.DataDir, "qubiq.db") }

// SnapshotPath is where the store snapshot taken before slot's first trial
// boot is kept.
func (l Layout) SnapshotPath(slot string) string {
	return filepath.Join(l.DataDir, "qubiq.db.before-slot-"+slot)
}

// SlotInfo is what state keeps about one slot.
type SlotInfo struct {
	Version       string    `json:"version,omitempty"`
	Arch          string    `json:"arch,omitempty"`
	SchemaVersion uint64    `json:"schema_version,omitempty"`
	InstalledAt   time.Time `json:"installed_at,omitzero"`
	// Bundle is the SHA-256 of the bundle the slot was installed from.
	Bundle string `json:"bundle_sha256,omitempty"`
	// Bad is set when the slot was rolled back from; a new install clears it.
	Bad bool `json:"bad,omitempty"`
}

// Result is one flash, install, confirmation or rollback, as `qubiqctl
// status` shows the last one.
type Result struct {
	Time    time.Time `json:"time"`
	Action  string    `json:"action"` // flash, install, confirm, rollback, refuse, activate
	Slot    string    `json:"slot,omitempty"`
	Version string    `json:"version,omitempty"`
	OK      bool      `json:"ok"`
	Message string    `json:"message"`
}

// Snapshot records the store copy taken before a trial slot migrated it.
type Snapshot struct {
	Path          string    `json:"path"`
	ForSlot       string    `json:"for_slot"`
	SchemaVersion uint64    `json:"schema_version"`
	TakenAt       time.Time `json:"taken_at"`
}

// State is slots.json.
type State struct {
	Format int `json:"format"`
	// Active is the slot `current` names and the unit starts.
	Active string `json:"active"`
	// Trial is set from a flash until the daemon confirms health.
	Trial bool `json:"trial"`
	// Previous is the slot a failed trial goes back to.
	Previous string `json:"previous,omitempty"`
	// BootCount is how often the trial slot was started (Boot counts).
	BootCount int `json:"boot_count"`
	// BootLimit is the number of starts a trial may take (default 3).
	BootLimit int                 `json:"boot_limit"`
	Slots     map[string]SlotInfo `json:"slots"`
	Snapshot  *Snapshot           `json:"snapshot,omitempty"`
	Last      *Result             `json:"last_result,omitempty"`
	History   []Result            `json:"history,omitempty"`
}

// record sets r as the last result and appends it to the history.
func (s *State) record(r Result) {
	if r.Time.IsZero() {
		r.Time = time.Now().UTC()
	}
	s.Last = &r
	s.History = append(s.History, r)
	if len(s.History) > historyLen {
		s.History = s.History[len(s.History)-historyLen:]
	}
}

// Record adds a result (a refused flash, say) to the state's history and
// makes it the last result; Save it afterwards.
func (s *State) Record(r Result) { s.record(r) }

// Load reads slots.json. Without one (a fresh install) the state is
// derived: the slot `current` names (or a), not on trial. A file that does
// not parse, or names no valid active slot, is an error naming the file:
// nothing is guessed over a damaged state.
func Load(l Layout) (State, error) {
	b, err := os.ReadFile(l.StatePath())
	if errors.Is(err, fs.ErrNotExist) {
		active, err := CurrentSlot(l)
		if err != nil {
			active = A
		}
		st := State{Format: stateFormat, Active: active, BootLimit: DefaultBootLimit, Slots: map[string]SlotInfo{}}
		for _, s := range []string{A, B} {
			if info, err := ReadSlotInfo(l, s); err == nil {
				st.Slots[s] = info
			}
		}
		return st, nil
	}
	if err != nil {
		return State{}, fmt.Errorf("slots: read %s: %w", l.StatePath(), err)
	}
	var st State
	if err := json.Unmarshal(b, &st); err != nil {
		return State{}, fmt.Errorf("slots: %s is damaged (%v); repair it with `qubiq-slot activate a|b`", l.StatePath(), err)
	}
	if !ValidSlot(st.Active) {
		return State{}, fmt.Errorf("slots: %s names active slot %q; want a or b (repair with `qubiq-slot activate a|b`)", l.StatePath(), st.Active)
	}
	if st.BootLimit <= 0 {
		st.BootLimit = DefaultBootLimit
	}
	if st.Slots == nil {
		st.Slots = map[string]SlotInfo{}
	}
	return st, nil
}

// Save writes st to slots.json atomically and durably
// (internal/atomicfile), owned like the data directory (qubiq-slot runs as root, the daemon as
// qubiq, and both write it).
func Save(l Layout, st State) error {
	st.Format = stateFormat
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(l.DataDir, 0o700); err != nil {
		return fmt.Errorf("slots: %w", err)
	}
	if err := atomicfile.WriteFile(l.StatePath(), append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("slots: write %s: %w", l.StatePath(), err)
	}
	// Written by root (qubiq-slot), read and written by the daemon's user.
	// A cut before this chown leaves a root-owned file until the next
	// qubiq-slot run, which writes it again.
	if own := ownerOf(l.DataDir); own != nil {
		if err := os.Chown(l.StatePath(), own.uid, own.gid); err != nil {
			return fmt.Errorf("slots: %w", err)
		}
	}
	return nil
}

// owner is a uid/gid pair; nil means "leave as created".
type owner struct{ uid, gid int }

func ownerOf(dir string) *owner {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || os.Geteuid() != 0 {
		return nil
	}
	return &owner{int(st.Uid), int(st.Gid)}
}

// SyncDir fsyncs a directory, making renames and creations in it durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("slots: sync %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("slots: sync %s: %w", dir, err)
	}
	return nil
}

func randHex() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// CurrentSlot returns the slot the `current` symlink names.
func CurrentSlot(l Layout) (string, error) {
	t, err := os.Readlink(l.Current())
	if err != nil {
		return "", fmt.Errorf("slots: %w", err)
	}
	s := filepath.Base(t)
	if !ValidSlot(s) || filepath.Base(filepath.Dir(t)) != "slots" {
		return "", fmt.Errorf("slots: %s points to %q, not slots/a or slots/b", l.Current(), t)
	}
	return s, nil
}

// SwitchCurrent points `current` at slot atomically: a new relative
// symlink (slots/<slot>) renamed over the old one, then the directory
// fsync'd. A crash leaves current at the old or the new slot.
func SwitchCurrent(l Layout, slot string) error {
	if !ValidSlot(slot) {
		return fmt.Errorf("slots: switch to %q: not a slot", slot)
	}
	tmp := filepath.Join(l.Root, ".current.tmp-"+randHex())
	if err := os.Symlink(filepath.Join("slots", slot), tmp); err != nil {
		return fmt.Errorf("slots: switch to %s: %w", slot, err)
	}
	if err := os.Rename(tmp, l.Current()); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("slots: switch to %s: %w", slot, err)
	}
	return SyncDir(l.Root)
}

// slotManifest is the part of a slot's manifest.json slots reads (the
// firmware package writes the whole of it).
type slotManifest struct {
	Version       string `json:"version"`
	Arch          string `json:"arch"`
	SchemaVersion uint64 `json:"schema_version"`
}

// ReadSlotInfo reads <slot>/manifest.json: the version, architecture and
// store schema version the slot's daemon writes.
func ReadSlotInfo(l Layout, slot string) (SlotInfo, error) {
	b, err := os.ReadFile(filepath.Join(l.SlotDir(slot), ManifestFile))
	if err != nil {
		return SlotInfo{}, fmt.Errorf("slots: slot %s: %w", slot, err)
	}
	var m slotManifest
	if err := json.Unmarshal(b, &m); err != nil {
		return SlotInfo{}, fmt.Errorf("slots: slot %s: %s: %w", slot, ManifestFile, err)
	}
	return SlotInfo{Version: m.Version, Arch: m.Arch, SchemaVersion: m.SchemaVersion}, nil
}
