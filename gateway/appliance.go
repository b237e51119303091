package gateway

import (
	"context"
	"io"
	"time"

	"qubiq.dev/edge/auth"
)

// Appliance is what the front doors may ask of the appliance itself
// (docs/appliance.md): flash a signed firmware bundle into the inactive
// A/B slot, show the slots, stream a backup, stage a restore, and change
// the log level at run time. Every call that changes something is audited
// (the refused ones too) under g. Package gateway/appliance implements it;
// the daemon wires it.
type Appliance interface {
	// Flash checks the bundle read from body (signature and every hash
	// against the trusted firmware keys before anything is kept, the
	// architecture always, a downgrade unless force) and stages it for
	// the slot agent; then the daemon exits for systemd to restart it
	// into the new slot on trial. A refused bundle is a *Refusal whose
	// Kind names the rule ("unknown_key", "signature", "hash", "format",
	// "arch", "downgrade", "upgrade_path", "too_large", "busy").
	Flash(ctx context.Context, g auth.Grant, body io.Reader, force bool) (FlashResult, error)
	// FirmwareStatus is the slots' state: both slots, the active one, the
	// trial, the last result and an upload in progress.
	FirmwareStatus(ctx context.Context) (FirmwareStatus, error)
	// Backup streams a backup (a read-transaction snapshot of the store,
	// the project, files, trusted certificates, the secrets key, sealed
	// with req.Passphrase when given; every entry hashed) to w. An error
	// after the first byte leaves w with a truncated backup, which a
	// restore refuses.
	Backup(ctx context.Context, g auth.Grant, w io.Writer, req BackupRequest) error
	// StageRestore checks the backup read from body (every hash, and that
	// req.Passphrase opens sealed secrets) and stages it; the daemon then
	// exits for systemd to restart it, and the next start restores it
	// into its data directory before the store opens. A refused backup is
	// a *Refusal ("format", "hash", "signature", "passphrase", "busy").
	StageRestore(ctx context.Context, g auth.Grant, body io.Reader, req RestoreRequest) (RestoreStaged, error)
	// LogLevel is the daemon's log level now ("DEBUG", "INFO", "WARN",
	// "ERROR", or slog's offsets such as "INFO+2").
	LogLevel() string
	// SetLogLevel changes it for every later record (debug, info, warn,
	// error; any case) and returns the new level; another name is an
	// error wrapping ErrInvalid.
	SetLogLevel(ctx context.Context, g auth.Grant, level string) (string, error)
}

// Refusal is an upload the appliance refused because of what it holds (a
// bundle or a backup breaking a rule), not because of the appliance. Kind
// names the rule (see Appliance.Flash); Err says what was wrong.
type Refusal struct {
	Kind string
	Err  error
}

// Error is the underlying error's text.
func (r *Refusal) Error() string { return r.Err.Error() }

// Unwrap returns the underlying error.
func (r *Refusal) Unwrap() error { return r.Err }

// FlashResult describes an accepted bundle: its version, architecture,
// signing key, the slot it goes into, its size (bytes) and SHA-256, whether
// the downgrade was forced, the version it replaces, and whether the daemon
// restarts now to install it.
type FlashResult struct {
	Version         string
	Arch            string
	Key             string
	Slot            string
	Size            int64
	SHA256          string
	Forced          bool
	Previous        string
	RestartRequired bool
}

// FirmwareStatus is the A/B slots' state (slots.json): the slot the daemon
// runs from ("" for a development build outside the slots), the active
// slot and the one `current` points to, whether the active one is on trial with its
// start count and limit, each slot's contents, the last result and the
// results before it (oldest first), and the upload in progress, if any.
type FirmwareStatus struct {
	Running   string
	Active    string
	Current   string
	Trial     bool
	BootCount int
	BootLimit int
	Slots     map[string]SlotStatus
	Last      *SlotResult
	History   []SlotResult
	Upload    *UploadProgress
}

// SlotStatus is one slot: the firmware version in it, its architecture and
// store schema, when it was installed, and whether a trial of it failed.
type SlotStatus struct {
	Version       string
	Arch          string
	SchemaVersion uint64
	InstalledAt   time.Time
	Bad           bool
}

// SlotResult is one outcome recorded in slots.json: a flash, install,
// confirm, rollback, refuse or activate, with its slot and version.
type SlotResult struct {
	Time    time.Time
	Action  string
	Slot    string
	Version string
	OK      bool
	Message string
}

// UploadProgress is a firmware upload being received: bytes so far and
// since when.
type UploadProgress struct {
	Received int64
	Started  time.Time
}

// BackupRequest asks for a backup: Passphrase, when set, seals the
// secrets key in it (argon2id, AES-256-GCM); without one the key is kept
// as is and the backup must be guarded like the data directory.
type BackupRequest struct {
	Passphrase []byte
}

// RestoreRequest asks for a restore: KeepCredentials carries the old
// appliance's API keys and sessions (dropped by default; users and their
// passwords stay); Passphrase opens the secrets of a sealed backup.
type RestoreRequest struct {
	KeepCredentials bool
	Passphrase      []byte
}

// RestoreStaged describes a staged restore: the backup's appliance, the
// daemon version that wrote it, when, its entries, and whether the daemon
// restarts now to apply it.
type RestoreStaged struct {
	ApplianceID     string
	Version         string
	Created         time.Time
	Entries         int
	RestartRequired bool
}
