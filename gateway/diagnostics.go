package gateway

import "context"

// Diagnostics gives the figures the metrics export (docs/metrics.md). It
// needs no grant: the figures are counts and states, never tag values or
// script data (the route table: GET /metrics needs nothing, and the
// diagnostics listener is bound to loopback by default).
type Diagnostics interface {
	// Figures returns every part's figures now. A part the daemon does
	// not run (no sandbox, no history) is nil.
	Figures(ctx context.Context) Figures
}

// Figures are the appliance's figures for the metrics: each device with
// its statistics, the tag engine, history, the script sandbox, the audit
// log and the alarms (nil without alarms).
type Figures struct {
	Devices []DeviceInfo
	Engine  EngineFigures
	History *HistoryFigures
	Sandbox *SandboxFigures
	Audit   *AuditFigures
	Alarms  *AlarmMetrics
}

// EngineFigures are the tag engine's: configured tags; counters since the
// start of changes published, scans completed, scans that overran their
// period, and changes the history feed lost.
type EngineFigures struct {
	Tags           int
	Changes        uint64
	Scans          uint64
	Overruns       uint64
	HistorySkipped uint64
}

// HistoryFigures are the history store's: samples waiting to be committed
// now, journal samples not yet folded into blocks, bytes of blocks;
// counters of samples offered, dropped (queue full), rejected (no stored
// form), committed, group commits, failed commits, retention runs and
// failures.
type HistoryFigures struct {
	Queue             int
	Journal           int
	Bytes             int64
	Offered           uint64
	Dropped           uint64
	Rejected          uint64
	Committed         uint64
	Commits           uint64
	CommitFailures    uint64
	RetentionRuns     uint64
	RetentionFailures uint64
}

// SandboxFigures are the script sandbox's: runs by result ("ok" or a run
// error kind: "timeout", "busy", "script_error", ...), worker restarts,
// runs killed at their timeout and by the memory limit; worker slots,
// live and busy workers and queued runs now, and each live worker's
// resident memory in bytes by slot.
type SandboxFigures struct {
	Runs     map[string]uint64
	Restarts uint64
	Timeouts uint64
	OOMs     uint64
	Workers  int
	Live     int
	Busy     int
	Queued   int
	Memory   map[int]uint64
}

// AuditFigures are the audit log's counters: records queued, committed,
// refused because the queue was full, and failed commit attempts.
type AuditFigures struct {
	Enqueued       uint64
	Committed      uint64
	Refused        uint64
	CommitFailures uint64
}
