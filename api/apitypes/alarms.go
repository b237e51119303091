package apitypes

import (
	"encoding/json"
	"time"
)

// The alarm wire forms (docs/alarms.md, "REST"): GET /api/v1/alarms,
// /alarms/journal, /alarms/stats; POST /alarms/ack, /alarms/shelve,
// /alarms/unshelve, /alarms/note; and the WebSocket's alarm messages.

// Alarm is one alarm (one definition applied to one tag). ID is
// "<source tag path>:<name>"; State is normal, active_unacked,
// active_acked or rtn_unacked; Priority diagnostic, low, medium, high or
// critical; Shelved is null unless shelved; Evaluable is false with a
// Reason when the source or a limit tag is not Good (the alarm then keeps
// its state); Value is the source's last known value (integers exact,
// null when none) and Timestamp its VQT time; Setpoint, Low and High are the limits in force (null:
// none, or the limit tag is not known); the times are RFC 3339 UTC, null
// when unset; Notes are the last 20, oldest first. Mode and AckMode are
// the definition's.
type Alarm struct {
	ID           string          `json:"id"`
	Name         string          `json:"name"`
	Source       string          `json:"source"`
	DisplayPath  string          `json:"display_path"`
	Priority     string          `json:"priority"`
	Mode         string          `json:"mode"`
	AckMode      string          `json:"ack_mode"`
	State        string          `json:"state"`
	Active       bool            `json:"active"`
	Acked        bool            `json:"acked"`
	Shelved      *AlarmShelf     `json:"shelved"`
	Suppressed   bool            `json:"suppressed"`
	OutOfService bool            `json:"out_of_service"`
	Latched      bool            `json:"latched"`
	Chattering   bool            `json:"chattering"`
	Evaluable    bool            `json:"evaluable"`
	Reason       string          `json:"reason"`
	Message      string          `json:"message"`
	Value        json.RawMessage `json:"value"`
	Units        string          `json:"units"`
	Quality      string          `json:"quality"`
	Timestamp    *time.Time      `json:"timestamp"`
	Setpoint     *float64        `json:"setpoint"`
	Low          *float64        `json:"low,omitempty"`
	High         *float64        `json:"high,omitempty"`
	ActiveSince  *time.Time      `json:"active_since"`
	AckedAt      *time.Time      `json:"acked_at"`
	AckedBy      *string         `json:"acked_by"`
	LastChange   *time.Time      `json:"last_change"`
	AckLevel     string          `json:"ack_level"`
	ShelveLevel  string          `json:"shelve_level"`
	Notes        []AlarmNote     `json:"notes"`
}

// AlarmShelf is an alarm's shelving: by whom, until when (never forever),
// one-shot (also ends when the alarm returns to normal) or timed, and when
// it was shelved.
type AlarmShelf struct {
	By      string    `json:"by"`
	Until   time.Time `json:"until"`
	OneShot bool      `json:"one_shot"`
	At      time.Time `json:"at"`
}

// AlarmNote is an operator's note on an alarm.
type AlarmNote struct {
	By   string    `json:"by"`
	At   time.Time `json:"at"`
	Text string    `json:"text"`
}

// AlarmList is the answer of GET /alarms: the alarms, and over every alarm
// the caller may see the annunciated unacknowledged and active ones and
// the highest priority not normal (null when none).
type AlarmList struct {
	Alarms  []Alarm `json:"alarms"`
	Unacked int     `json:"unacked"`
	Active  int     `json:"active"`
	Highest *string `json:"highest"`
}

// AlarmJournalEntry is one entry of GET /alarms/journal: a transition of
// an alarm (event, the states from and to, the cause, who: "" for the
// process) with the source's value and quality, and a note's text.
type AlarmJournalEntry struct {
	Seq      uint64          `json:"seq"`
	At       time.Time       `json:"at"`
	ID       string          `json:"id"`
	Source   string          `json:"source"`
	Priority string          `json:"priority"`
	Event    string          `json:"event"`
	From     string          `json:"from"`
	To       string          `json:"to"`
	Cause    string          `json:"cause"`
	By       string          `json:"by"`
	Value    json.RawMessage `json:"value"`
	Quality  string          `json:"quality"`
	Note     string          `json:"note,omitempty"`
}

// AlarmJournal is the answer of GET /alarms/journal: the entries and the
// after= of the next page (null when there is none).
type AlarmJournal struct {
	Entries []AlarmJournalEntry `json:"entries"`
	Next    *uint64             `json:"next"`
}

// AlarmStats is the answer of GET /alarms/stats: the EEMUA 191 figures
// over the last window_h hours (docs/alarms.md, "Statistics").
type AlarmStats struct {
	WindowH         float64         `json:"window_h"`
	From            time.Time       `json:"from"`
	To              time.Time       `json:"to"`
	Activations     int             `json:"activations"`
	RatePer10Min    float64         `json:"rate_per_10min"`
	RatePerHour     float64         `json:"rate_per_hour"`
	MaxPer10Min     int             `json:"max_per_10min"`
	Floods          int             `json:"floods"`
	FloodPercent    float64         `json:"flood_pct"`
	Stale           []string        `json:"stale"`
	Top             []AlarmCount    `json:"top"`
	Chattering      []string        `json:"chattering"`
	ChatteringTotal uint64          `json:"chattering_total"`
	Alarms          int             `json:"alarms"`
	Active          int             `json:"active"`
	Unacked         int             `json:"unacked"`
	Shelved         int             `json:"shelved"`
	Suppressed      int             `json:"suppressed"`
	OutOfService    int             `json:"out_of_service"`
	NotEvaluable    int             `json:"not_evaluable"`
	Intervals       []AlarmInterval `json:"intervals"`
}

// AlarmCount is how often an alarm was annunciated in the window.
type AlarmCount struct {
	ID    string `json:"id"`
	Count int    `json:"count"`
}

// AlarmInterval is the annunciations of one 10-minute interval.
type AlarmInterval struct {
	Start time.Time `json:"start"`
	Count int       `json:"count"`
}

// AlarmAckRequest is the body of POST /alarms/ack: ids, or all: true for
// every unacknowledged alarm the caller may see.
type AlarmAckRequest struct {
	IDs []string `json:"ids,omitempty"`
	All bool     `json:"all,omitempty"`
}

// AlarmShelveRequest is the body of POST /alarms/shelve: the ids, the
// duration in seconds (at most the daemon's alarms.max_shelve, 24 h by
// default; 0 only with one_shot, which then lasts at most that maximum),
// and one_shot.
type AlarmShelveRequest struct {
	IDs       []string `json:"ids"`
	DurationS float64  `json:"duration_s,omitempty"`
	OneShot   bool     `json:"one_shot,omitempty"`
}

// AlarmUnshelveRequest is the body of POST /alarms/unshelve.
type AlarmUnshelveRequest struct {
	IDs []string `json:"ids"`
}

// AlarmNoteRequest is the body of POST /alarms/note.
type AlarmNoteRequest struct {
	ID   string `json:"id"`
	Text string `json:"text"`
}

// AlarmResult is the outcome for one alarm of ack, shelve or unshelve:
// status Good, or the quality that refused it (Bad_UserAccessDenied
// naming the level needed, Bad_NodeIdUnknown) and why.
type AlarmResult struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
}

// AlarmResults is the answer of ack, shelve and unshelve.
type AlarmResults struct {
	Results []AlarmResult `json:"results"`
}

// OK is the answer {"ok": true} (POST /alarms/note).
type OK struct {
	OK bool `json:"ok"`
}

// WSAlarm is the WebSocket message {"type": "alarm", "alarm": Alarm}, sent
// on every transition of an alarm the client may read, with what happened
// (event, from, to, cause, by, at, seq), and, with snapshot true and no
// event, for each current alarm when alarms are subscribed and after the
// client fell behind.
type WSAlarm struct {
	Type     string     `json:"type"`
	Alarm    Alarm      `json:"alarm"`
	Event    string     `json:"event,omitempty"`
	From     string     `json:"from,omitempty"`
	To       string     `json:"to,omitempty"`
	Cause    string     `json:"cause,omitempty"`
	By       string     `json:"by,omitempty"`
	At       *time.Time `json:"at,omitempty"`
	Seq      uint64     `json:"seq,omitempty"`
	Snapshot bool       `json:"snapshot,omitempty"`
}

// WSAlarmSummary is the WebSocket message {"type": "alarm_summary",
// "unacked", "active", "highest"} sent after each batch of alarm messages:
// highest is the highest priority not normal, null when none.
type WSAlarmSummary struct {
	Type    string  `json:"type"`
	Unacked int     `json:"unacked"`
	Active  int     `json:"active"`
	Highest *string `json:"highest"`
}
