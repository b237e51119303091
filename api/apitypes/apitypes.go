// Package apitypes holds the JSON wire structs of the QUBIQ Edge REST API
// (docs/api.md, "REST"), shared by the server (package api), the Go client
// (package client) and qubiqctl.
//
// Keys are snake_case. Tag values are numbers, bools, strings or arrays of
// them, normalised with value.Normalize: integers travel as JSON numbers whose
// text is exact for the whole int64 and uint64 ranges, and decoding keeps them
// as int64 or uint64 (never float64). Timestamps are RFC 3339 in UTC with
// nanosecond fractional seconds (TimeFormat).
//
// It imports the standard library and value only; api, client and
// cmd/qubiqctl import it.
package apitypes

import (
	"encoding/json"
	"time"
)

// TimeFormat is the layout of every timestamp the API sends: RFC 3339, UTC,
// always with nine fractional digits (docs/api.md, REST: "Timestamps RFC 3339
// UTC with fractional seconds"). time.RFC3339Nano parses it.
const TimeFormat = "2006-01-02T15:04:05.000000000Z07:00"

// Problem is the body of every error answer, served as
// application/problem+json (RFC 9457; docs/api.md, REST "Errors"). Kind is the
// machine-readable reason: "unauthenticated", "permission_denied", "invalid",
// "not_found", "too_large", "unavailable", "not_implemented", "internal", or
// a script failure kind ("timeout", "busy", "script_error", ...).
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
	Kind   string `json:"kind"`
}

// ProblemContentType is the media type of Problem bodies.
const ProblemContentType = "application/problem+json"

// Health is the body of GET /api/v1/health (docs/api.md, REST). Status is "ok",
// "degraded" or "failed"; Reasons says why when it is not "ok". UptimeS is
// whole seconds since the daemon started. Devices maps a device name to its
// connection state, Flows a flow's name to its state (docs/flows.md).
// EscapeHatch reports whether QUBIQ_BROWSER_SCRIPT_SCOPES=off is in force.
// Warnings list what the configuration asks for that the daemon does not
// act on, and safeties turned off ([] when none; they do not make the
// status degraded; docs/config.md, "Warnings").
type Health struct {
	Status      string                  `json:"status"`
	Reasons     []string                `json:"reasons"`
	Warnings    []string                `json:"warnings"`
	Version     string                  `json:"version"`
	UptimeS     int64                   `json:"uptime_s"`
	Sandbox     SandboxHealth           `json:"sandbox"`
	Devices     map[string]DeviceHealth `json:"devices"`
	Flows       map[string]FlowHealth   `json:"flows,omitempty"`
	EscapeHatch bool                    `json:"escape_hatch"`
	MQTT        *MQTTHealth             `json:"mqtt,omitempty"`
}

// MQTTHealth is the "mqtt" object of Health, present when the supervisor
// link is on (docs/mqtt.md): connected, the broker and since when, the
// last connection error and when, the outbox's depth (messages), bytes,
// oldest message's age in seconds and drops, require_signed, and the
// commands accepted and refused since start.
type MQTTHealth struct {
	Connected        bool       `json:"connected"`
	Broker           string     `json:"broker,omitempty"`
	Since            *time.Time `json:"since,omitempty"`
	LastError        string     `json:"last_error,omitempty"`
	LastErrorAt      *time.Time `json:"last_error_at,omitempty"`
	OutboxDepth      int        `json:"outbox_depth"`
	OutboxBytes      int64      `json:"outbox_bytes"`
	OutboxOldestAgeS float64    `json:"outbox_oldest_age_s"`
	OutboxDropped    uint64     `json:"outbox_dropped"`
	RequireSigned    bool       `json:"require_signed"`
	Accepted         uint64     `json:"commands_accepted"`
	Refused          uint64     `json:"commands_refused"`
}

// Health statuses.
const (
	HealthOK       = "ok"
	HealthDegraded = "degraded"
	HealthFailed   = "failed"
)

// SandboxHealth is the "sandbox" object of Health. Mode is "cgroup2",
// "cgroup1", "rlimit" or "none"; Limits and Hardening are objects whose keys
// the sandbox defines (memory_max, pids_max, cpu_max; no_new_privs, netns,
// landlock) and are passed through unchanged. Linter is "ruff" or
// "syntax-only".
type SandboxHealth struct {
	Mode      string          `json:"mode"`
	Limits    json.RawMessage `json:"limits,omitempty"`
	Hardening json.RawMessage `json:"hardening,omitempty"`
	Python    PythonHealth    `json:"python"`
	Linter    string          `json:"linter"`
}

// PythonHealth is the state of the Python runtime: Status ("ok", "missing",
// ...), its version and the interpreter path.
type PythonHealth struct {
	Status  string `json:"status"`
	Version string `json:"version"`
	Path    string `json:"path"`
}

// DeviceHealth is one device's entry in Health.Devices: its connection state
// ("connected", "connecting", "demoted", "disconnected", ...) and why, when
// it is not connected.
type DeviceHealth struct {
	State  string `json:"state"`
	Reason string `json:"reason,omitempty"`
}

// DeviceInfo is one element of GET /api/v1/devices, and the body of GET
// /api/v1/devices/{name}. Stats is absent for a driver that keeps none
// (the simulator).
type DeviceInfo struct {
	Name   string       `json:"name"`
	Driver string       `json:"driver"`
	URL    string       `json:"url,omitempty"`
	State  string       `json:"state"`
	Reason string       `json:"reason,omitempty"`
	Tags   int          `json:"tags"`
	Stats  *DeviceStats `json:"stats,omitempty"`
}

// DeviceStats are a device's statistics since its driver was built
// (docs/metrics.md, "Devices"): requests sent, the failed ones by kind
// (timeout, not_connected, communication, exception, configuration) and
// in all, timeouts, reconnects, the last good poll and the last failure
// (RFC 3339 UTC; absent: never), the latency's estimated median and 99th
// percentile in milliseconds, the Modbus breaker per unit, the OPC UA
// subscription figures.
type DeviceStats struct {
	Requests    uint64            `json:"requests"`
	Errors      map[string]uint64 `json:"errors"`
	ErrorsTotal uint64            `json:"errors_total"`
	Timeouts    uint64            `json:"timeouts"`
	Reconnects  uint64            `json:"reconnects"`
	LastGood    *time.Time        `json:"last_good,omitempty"`
	LastError   *time.Time        `json:"last_error,omitempty"`
	LatencyP50  float64           `json:"latency_p50_ms"`
	LatencyP99  float64           `json:"latency_p99_ms"`
	Units       []UnitBreaker     `json:"units,omitempty"`
	OPCUA       *OPCUAFigures     `json:"opcua,omitempty"`
}

// UnitBreaker is one Modbus unit's circuit breaker: "closed", "open"
// (demoted until demoted_until) or "probing", with its consecutive
// timeouts.
type UnitBreaker struct {
	UnitID       int        `json:"unit_id"`
	Breaker      string     `json:"breaker"`
	Timeouts     int        `json:"timeouts"`
	DemotedUntil *time.Time `json:"demoted_until,omitempty"`
}

// OPCUAFigures are an OPC UA device's subscription figures: monitored
// items (and the bad ones), subscriptions, publish responses with data and
// keep-alives, data changes delivered, publish responses per second of the
// current session, sessions created and re-activated.
type OPCUAFigures struct {
	MonitoredItems      int     `json:"monitored_items"`
	BadItems            int     `json:"bad_items"`
	Subscriptions       int     `json:"subscriptions"`
	PublishResponses    uint64  `json:"publish_responses"`
	KeepAlives          uint64  `json:"keep_alives"`
	DataChanges         uint64  `json:"data_changes"`
	PublishRate         float64 `json:"publish_rate"`
	SessionsCreated     uint64  `json:"sessions_created"`
	SessionsReactivated uint64  `json:"sessions_reactivated"`
}

// TagInfo is one element of GET /api/v1/tags: a tag of the project as the
// project file names it (docs/project.md, "Project file"). Type and WriteLevel are
// contract names ("float32", "operate"); WriteLevel is the level a write
// would need, and ReadOnly says that no level may write the tag (the
// console and qubiqctl show "read-only" then). Scan is a Go duration text
// ("1s"), empty for tags not polled.
type TagInfo struct {
	Path       string `json:"path"`
	Device     string `json:"device"`
	Address    string `json:"address"`
	Type       string `json:"type"`
	Units      string `json:"units,omitempty"`
	WriteLevel string `json:"write_level"`
	ReadOnly   bool   `json:"read_only"`
	Scan       string `json:"scan,omitempty"`
	// Min and Max are the tag's engineering limits of writes (absent:
	// none); the server refuses a write outside them (Bad_OutOfRange).
	Min *float64 `json:"min,omitempty"`
	Max *float64 `json:"max,omitempty"`
}

// ReadRequest is the body of POST /api/v1/tags/read.
type ReadRequest struct {
	Paths []string `json:"paths"`
}

// WriteRequest is the body of POST /api/v1/tags/write.
type WriteRequest struct {
	Writes []TagWrite `json:"writes"`
}

// WriteResult is one element of the answer of POST /api/v1/tags/write: the
// tag path, Status a quality name ("Good" when written, "Bad_UserAccessDenied"
// when the grant's write level or prefixes refuse it, ...) and, when not
// Good, the reason.
type WriteResult struct {
	Path   string `json:"path"`
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
}

// ScriptSaveRequest is the body of PUT /api/v1/scripts/{module}.
type ScriptSaveRequest struct {
	Code string `json:"code"`
}

// ScriptSaved is the answer of PUT /api/v1/scripts/{module}: the new version
// number, the @gateway entries found (timeout in milliseconds, after the
// clamp of python.gateway_timeout) and the linter's diagnostics.
type ScriptSaved struct {
	Module      string        `json:"module"`
	Version     int64         `json:"version"`
	Entries     []ScriptEntry `json:"entries"`
	Diagnostics []Diagnostic  `json:"diagnostics"`
}

// ScriptEntry is one @gateway entry point of a module.
type ScriptEntry struct {
	Name      string `json:"name"`
	TimeoutMS int64  `json:"timeout_ms"`
}

// ScriptInfo is one element of GET /api/v1/scripts: a saved module, its
// current version, its entries, and the entries a LiveView button may start.
type ScriptInfo struct {
	Module   string        `json:"module"`
	Version  int64         `json:"version"`
	Entries  []ScriptEntry `json:"entries"`
	LiveView []string      `json:"liveview,omitempty"`
}

// ScriptRunRequest is the body of POST /api/v1/scripts/{module}/{entry}/run.
// Args is passed to the entry as the JSON value it is, unchanged; an absent
// body or absent "args" is JSON null.
type ScriptRunRequest struct {
	Args json.RawMessage `json:"args,omitempty"`
}

// ScriptRun is the 200 answer of a run that returned: the entry's return
// value as JSON (refused tag writes show inside it as statuses), the lines it
// logged, and its duration in milliseconds.
type ScriptRun struct {
	Result     json.RawMessage `json:"result"`
	Logs       []LogLine       `json:"logs"`
	DurationMS int64           `json:"duration_ms"`
}

// LogLine is one line a script logged: level ("debug", "info", "warning",
// "error") and message.
type LogLine struct {
	Level string `json:"level"`
	Msg   string `json:"msg"`
}

// LintRequest is the body of POST /api/v1/scripts/lint.
type LintRequest struct {
	Code string `json:"code"`
}

// LintResult is the answer of POST /api/v1/scripts/lint. Linter is "ruff" or
// "syntax-only"; both give the same diagnostics shape.
type LintResult struct {
	Linter      string       `json:"linter"`
	Diagnostics []Diagnostic `json:"diagnostics"`
}

// Diagnostic is one finding of the linter or of the save-time checks. Lines
// and columns are 1-based; Severity is "error", "warning" or "info".
type Diagnostic struct {
	Line      int    `json:"line"`
	Column    int    `json:"column"`
	EndLine   int    `json:"end_line"`
	EndColumn int    `json:"end_column"`
	Code      string `json:"code"`
	Message   string `json:"message"`
	Severity  string `json:"severity"`
}

// APIKeyRequest is the body of POST /api/v1/apikeys. Scopes, WriteLevel and
// Permissions are contract names ("tag:read", "operate", "designer");
// Prefixes limit the key to tag paths under them (whole segments); Expires,
// when set, is RFC 3339. A key never gets more than its creator's grant.
type APIKeyRequest struct {
	Name        string     `json:"name"`
	Scopes      []string   `json:"scopes"`
	WriteLevel  string     `json:"write_level"`
	Permissions []string   `json:"permissions,omitempty"`
	Prefixes    []string   `json:"prefixes,omitempty"`
	Expires     *time.Time `json:"expires,omitempty"`
}

// APIKeyCreated is the answer of POST /api/v1/apikeys. Token is the Bearer
// credential; it is shown this once and never stored in clear.
type APIKeyCreated struct {
	ID    string `json:"id"`
	Token string `json:"token"`
}

// APIKeyInfo is one element of GET /api/v1/apikeys (never the token).
type APIKeyInfo struct {
	ID          string     `json:"id"`
	Name        string     `json:"name"`
	Scopes      []string   `json:"scopes"`
	WriteLevel  string     `json:"write_level"`
	Permissions []string   `json:"permissions,omitempty"`
	Prefixes    []string   `json:"prefixes,omitempty"`
	Expires     *time.Time `json:"expires,omitempty"`
	Created     time.Time  `json:"created"`
}

// ProvisionRequest is the body of POST /api/v1/provision: the first admin
// password, which revokes the bootstrap token (docs/security.md, "Credentials on
// first start").
type ProvisionRequest struct {
	Password string `json:"password"`
}

// PlannedRequest is one request of a device's scan plan (GET
// /api/v1/devices/{name}/plan): the scan class it belongs to, the Modbus
// function code (Modbus Application Protocol v1.1b3 §6), unit id, first PDU
// address, quantity (registers or bits), and the tags it serves.
type PlannedRequest struct {
	Scan         string   `json:"scan"`
	FunctionCode int      `json:"function_code"`
	UnitID       int      `json:"unit_id"`
	Start        int      `json:"start"`
	Count        int      `json:"count"`
	Tags         []string `json:"tags"`
}

// AuditRecord is one audit record (GET /api/v1/audit; docs/security.md, Audit):
// its sequence number (commit order), time, who (principal, realm, origin,
// script), what (action, target), the value before and after as JSON, the
// result and a detail.
type AuditRecord struct {
	Seq       uint64          `json:"seq"`
	Time      time.Time       `json:"time"`
	Principal string          `json:"principal,omitempty"`
	Realm     string          `json:"realm,omitempty"`
	Origin    string          `json:"origin,omitempty"`
	Script    string          `json:"script,omitempty"`
	Action    string          `json:"action"`
	Target    string          `json:"target,omitempty"`
	Before    json.RawMessage `json:"before,omitempty"`
	After     json.RawMessage `json:"after,omitempty"`
	Result    string          `json:"result,omitempty"`
	Detail    string          `json:"detail,omitempty"`
}

// Done is the 200 answer of DELETE /api/v1/apikeys/{id} and POST
// /api/v1/users/{name}/disable when the key was already revoked or the
// user already disabled: Already true and, for people, Detail (`api key
// "3f9a..." was already revoked; nothing changed`). The calls are
// idempotent and say so; the revocation or disabling itself answers 204
// (docs/api.md).
type Done struct {
	Already bool   `json:"already"`
	Detail  string `json:"detail"`
}
