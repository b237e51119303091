package apitypes

import "time"

// PassphraseHeader carries the passphrase that seals a backup's secrets
// key (POST /api/v1/backup) or opens it (POST /api/v1/restore): a header,
// never a query parameter, which proxies and access logs keep.
const PassphraseHeader = "Qubiq-Backup-Passphrase"

// FlashResult is the answer of POST /api/v1/firmware: the bundle accepted
// (version, arch, the key that signed it, the slot it goes into, its size
// in bytes and SHA-256, whether a downgrade was forced, the version it
// replaces) and whether the daemon now restarts to install it.
type FlashResult struct {
	Version         string `json:"version"`
	Arch            string `json:"arch"`
	Key             string `json:"key"`
	Slot            string `json:"slot"`
	Size            int64  `json:"size"`
	SHA256          string `json:"sha256"`
	Forced          bool   `json:"forced,omitempty"`
	Previous        string `json:"previous_version,omitempty"`
	RestartRequired bool   `json:"restart_required"`
}

// FirmwareStatus is GET /api/v1/firmware (and the "firmware" member of GET
// /api/v1/health, without history, when the daemon runs from a slot): the
// slot the daemon runs from, the active slot, the one current
// names, the trial (start count of limit), both slots, the last result,
// earlier results (oldest first) and an upload being received.
type FirmwareStatus struct {
	Running   string                `json:"running_slot,omitempty"`
	Active    string                `json:"active"`
	Current   string                `json:"current,omitempty"`
	Trial     bool                  `json:"trial"`
	BootCount int                   `json:"boot_count"`
	BootLimit int                   `json:"boot_limit"`
	Slots     map[string]SlotStatus `json:"slots"`
	Last      *SlotResult           `json:"last_result,omitempty"`
	History   []SlotResult          `json:"history,omitempty"`
	Upload    *UploadProgress       `json:"upload,omitempty"`
}

// SlotStatus is one slot's firmware: version, arch, store schema, install
// time, and bad when a trial of it was rolled back.
type SlotStatus struct {
	Version       string    `json:"version,omitempty"`
	Arch          string    `json:"arch,omitempty"`
	SchemaVersion uint64    `json:"schema_version,omitempty"`
	InstalledAt   time.Time `json:"installed_at,omitzero"`
	Bad           bool      `json:"bad,omitempty"`
}

// SlotResult is one recorded outcome: action flash, install, confirm,
// rollback, refuse or activate.
type SlotResult struct {
	Time    time.Time `json:"time"`
	Action  string    `json:"action"`
	Slot    string    `json:"slot,omitempty"`
	Version string    `json:"version,omitempty"`
	OK      bool      `json:"ok"`
	Message string    `json:"message"`
}

// UploadProgress is a firmware upload being received: bytes so far.
type UploadProgress struct {
	Received int64     `json:"received"`
	Started  time.Time `json:"started"`
}

// RestoreStaged is the answer of POST /api/v1/restore: the backup's
// appliance, the version that wrote it, when, its entry count, and whether
// the daemon now restarts to apply it.
type RestoreStaged struct {
	ApplianceID     string    `json:"appliance_id"`
	Version         string    `json:"version"`
	Created         time.Time `json:"created"`
	Entries         int       `json:"entries"`
	RestartRequired bool      `json:"restart_required"`
}

// LogLevel is GET and PUT /api/v1/log-level: "debug", "info", "warn",
// "error" when set; the answer names the level in slog's form ("DEBUG").
type LogLevel struct {
	Level string `json:"level"`
}
