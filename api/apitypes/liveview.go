package apitypes

import (
	"encoding/json"
	"time"
)

// LoginRequest is the body of POST /api/v1/auth/login.
type LoginRequest struct {
	User     string `json:"user"`
	Password string `json:"password"`
}

// SessionInfo is the answer of POST /api/v1/auth/login and GET
// /api/v1/auth/session: who the session is (realm "platform" or
// "operator"; an operator's level; a platform user's permissions), the
// CSRF token the page must send in the X-CSRF-Token header of every
// state-changing request, when the session ends at the latest (Expires) and
// its idle timeout in seconds. EscapeHatch reports whether
// QUBIQ_BROWSER_SCRIPT_SCOPES=off widens the scripts this session starts.
type SessionInfo struct {
	User         string    `json:"user"`
	Realm        string    `json:"realm"`
	Level        string    `json:"level,omitempty"`
	Permissions  []string  `json:"permissions"`
	CSRFToken    string    `json:"csrf_token"`
	Expires      time.Time `json:"expires"`
	IdleTimeoutS int64     `json:"idle_timeout_s"`
	EscapeHatch  bool      `json:"escape_hatch"`
}

// UserInfo is one element of GET /api/v1/users (never the password hash).
type UserInfo struct {
	Name        string    `json:"name"`
	Realm       string    `json:"realm"`
	Level       string    `json:"level,omitempty"`
	Permissions []string  `json:"permissions"`
	Disabled    bool      `json:"disabled"`
	Created     time.Time `json:"created"`
	Changed     time.Time `json:"password_changed"`
}

// UserRequest is the body of POST /api/v1/users: a platform user
// (permissions among designer, sandbox_admin, users_admin, firmware) or an
// operator (level view, operate or supervise), with the first password.
type UserRequest struct {
	Name        string   `json:"name"`
	Realm       string   `json:"realm"`
	Level       string   `json:"level,omitempty"`
	Permissions []string `json:"permissions,omitempty"`
	Password    string   `json:"password"`
}

// PasswordRequest is the body of PUT /api/v1/users/{name}/password.
type PasswordRequest struct {
	Password string `json:"password"`
}

// TLSInfo describes the listener's certificate in GET /api/v1/health
// ("tls"): Mode "auto" (self-signed, made in <data_dir>/tls) or "files";
// FingerprintSHA256 the SHA-256 of the leaf certificate's DER bytes as
// colon-separated upper-case hex pairs (what a browser shows); NotAfter its
// expiry.
type TLSInfo struct {
	Mode              string    `json:"mode"`
	FingerprintSHA256 string    `json:"fingerprint_sha256"`
	NotAfter          time.Time `json:"not_after"`
}

// View is one LiveView panel of the project as GET /api/v1/liveview/views
// answers it (the YAML shape is in package api/liveview). MinLevel is the
// lowest operator level that may open it. Events is how many recent audit
// events of the panel it lists.
type View struct {
	Name     string   `json:"name"`
	Title    string   `json:"title"`
	MinLevel string   `json:"min_level"`
	Events   int      `json:"events"`
	Widgets  []Widget `json:"widgets"`
}

// Widget types of a View.
const (
	WidgetValue   = "value"   // a tag's value with units and quality
	WidgetNumeric = "numeric" // a numeric write control
	WidgetBoolean = "boolean" // a two-state switch showing the current state
	WidgetButton  = "button"  // one button starting a gateway entry point (module.entry); the panel groups neighbours into one bar
	WidgetButtons = "buttons" // a button bar: several buttons in one row
	WidgetTrend   = "trend"   // a trend chart of tags, backed by history
	WidgetAlarms  = "alarms"  // the alarm list of a folder, with acknowledge and shelve
)

// Widget is one element of a View (docs/liveview.md). Tag is the tag of
// value, numeric and boolean widgets; Tags those of a trend and Series
// how each is drawn; Entry the "module.entry" of a button, Args its fixed
// arguments (the request never supplies them) and Confirm the question
// asked before it runs; Buttons the buttons of a button bar, or of a
// value, numeric or boolean card they act on. Units default to the tag's;
// Device is the tag's device and TagType its type (bool, int16, ...).
// Min, Max and Step bound a numeric control (the tag engine still checks
// the tag's limits and type range); on a trend Min and Max fix the value
// axis. OnLabel and OffLabel name a boolean's two states (default On and
// Off). WindowS is a trend's default time span in seconds. Prefix is the
// folder an alarm list shows ("" for every alarm) and Limit how many rows
// it shows at most.
//
// Writable, WriteLevel and ReadOnlyReason are computed for the caller: a
// write control the caller's grant cannot use is read-only, and
// ReadOnlyReason names the missing scope or level (or "tag is read-only").
type Widget struct {
	Type           string          `json:"type"`
	Label          string          `json:"label"`
	Tag            string          `json:"tag,omitempty"`
	Tags           []string        `json:"tags,omitempty"`
	Series         []TrendSeries   `json:"series,omitempty"`
	Units          string          `json:"units,omitempty"`
	Device         string          `json:"device,omitempty"`
	TagType        string          `json:"tag_type,omitempty"`
	Decimals       *int            `json:"decimals,omitempty"`
	Min            *float64        `json:"min,omitempty"`
	Max            *float64        `json:"max,omitempty"`
	Step           *float64        `json:"step,omitempty"`
	OnLabel        string          `json:"on_label,omitempty"`
	OffLabel       string          `json:"off_label,omitempty"`
	Entry          string          `json:"entry,omitempty"`
	Args           json.RawMessage `json:"args,omitempty"`
	Confirm        string          `json:"confirm,omitempty"`
	Buttons        []Button        `json:"buttons,omitempty"`
	WindowS        int             `json:"window_s,omitempty"`
	Prefix         string          `json:"prefix,omitempty"`
	Limit          int             `json:"limit,omitempty"`
	Writable       bool            `json:"writable"`
	WriteLevel     string          `json:"write_level,omitempty"`
	ReadOnlyReason string          `json:"read_only_reason,omitempty"`
}

// Button is one button of a button bar or of a card: its label, the
// "module.entry" it starts, the fixed arguments it sends (never the
// request's) and the question asked before it runs ("" for none). A
// script may return {"message": "..."}: the panel shows that text;
// otherwise it says "done".
type Button struct {
	Label   string          `json:"label"`
	Entry   string          `json:"entry"`
	Args    json.RawMessage `json:"args,omitempty"`
	Confirm string          `json:"confirm,omitempty"`
}

// TrendSeries is how a trend draws one tag: its legend label (the
// view's, else the tag's description, else the tag's name: the last
// segment of its path), units, device, and whether the line is drawn in
// steps (discrete values: a bool or integer tag, or step: true).
type TrendSeries struct {
	Tag    string `json:"tag"`
	Label  string `json:"label"`
	Units  string `json:"units,omitempty"`
	Device string `json:"device,omitempty"`
	Step   bool   `json:"step"`
}

// PanelEvent is one element of GET /api/v1/liveview/views/{panel}/events:
// an audit record of the panel (a press, a write, a refusal), newest first.
// After holds the record's JSON detail (the value written; for a press the
// entry, the grant the script ran with and whether the escape hatch
// widened it).
type PanelEvent struct {
	Seq       uint64          `json:"seq"`
	Time      time.Time       `json:"time"`
	Principal string          `json:"principal"`
	Realm     string          `json:"realm,omitempty"`
	Action    string          `json:"action"`
	Target    string          `json:"target,omitempty"`
	Result    string          `json:"result,omitempty"`
	Detail    string          `json:"detail,omitempty"`
	After     json.RawMessage `json:"after,omitempty"`
}

// WSMessage is one message of the live-value WebSocket GET /api/v1/ws.
//
// docs/api.md, "WebSocket", lists every message with examples; the
// client's are WSSubscribe and WSControl, and any other type is answered
// with an error naming it.
//
// Client to server: {"type": "subscribe", "paths": [...]} (replaces the
// subscription; the server answers with a "values" snapshot of every path),
// {"type": "activity"} (the operator touched the panel: the session's idle
// timeout restarts), {"type": "subscribe_alarms"} and
// {"type": "unsubscribe_alarms"} (a browser session gets alarms without
// asking; the grant needs alarm:read).
//
// Server to client: {"type": "values", "values": [TagValue...]} (a snapshot
// or changes), {"type": "heartbeat", "time"} every few seconds (a client
// that hears nothing for two heartbeats marks its values stale),
// {"type": "error", "reason"} before the server closes the socket (session
// ended: close code 4001), and the alarm messages WSAlarm ({"type":
// "alarm", "alarm": Alarm, ...}) and WSAlarmSummary ({"type":
// "alarm_summary", "unacked", "active", "highest"}), which decode into the
// fields Alarm, Unacked, Active and Highest here.
type WSMessage struct {
	Type    string     `json:"type"`
	Paths   []string   `json:"paths,omitempty"`
	Values  []TagValue `json:"values,omitempty"`
	Time    *time.Time `json:"time,omitempty"`
	Reason  string     `json:"reason,omitempty"`
	Alarm   *Alarm     `json:"alarm,omitempty"`
	Unacked *int       `json:"unacked,omitempty"`
	Active  *int       `json:"active,omitempty"`
	Highest *string    `json:"highest,omitempty"`
}

// WSSubscribe is the client message {"type": "subscribe", "paths":
// [...]}: it replaces the subscription with paths (at most 2000 tag paths,
// each as GET /tags names it; a folder is not expanded) and the server
// answers with a "values" snapshot of every path.
type WSSubscribe struct {
	Type  string   `json:"type"`
	Paths []string `json:"paths"`
}

// WSControl is a client message with no field but its type: "activity"
// (a browser session's idle timeout restarts), "subscribe_alarms" and
// "unsubscribe_alarms".
type WSControl struct {
	Type string `json:"type"`
}
