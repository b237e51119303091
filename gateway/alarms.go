package gateway

import (
	"context"
	"time"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/value"
)

// Alarms is alarm management under a grant (docs/alarms.md): reading
// needs alarm:read, acknowledging, shelving, unshelving and notes need
// alarm:ack (an *auth.DeniedError otherwise) and, per alarm, the grant's
// write level at or above the alarm's ack_level (acknowledge, note) or
// shelve_level (shelve, unshelve), compared as tag writes are
// (auth.Grant.AllowsLevel). A grant's tag prefixes limit the alarms it sees
// to those whose source tag is inside them. Every operation is audited
// ("alarm.ack", "alarm.shelve", "alarm.unshelve", "alarm.note"), the
// refusals too.
type Alarms interface {
	// ListAlarms returns the alarms f selects, sorted by priority
	// (critical first) then by activation (newest first), with the counts
	// of every alarm g may see.
	ListAlarms(ctx context.Context, g auth.Grant, f AlarmFilter) (AlarmList, error)
	// AlarmJournal returns journal entries, oldest first (newest first
	// with q.Desc), and the continuation.
	AlarmJournal(ctx context.Context, g auth.Grant, q AlarmJournalQuery) (AlarmJournalPage, error)
	// AlarmStats returns the EEMUA 191 figures over the last window
	// (clamped to 10 min .. 24 h) of the alarms g may see.
	AlarmStats(ctx context.Context, g auth.Grant, window time.Duration) (AlarmStats, error)
	// AckAlarms acknowledges the alarms ids, or with all every
	// unacknowledged alarm g may see: one AlarmResult per alarm, in order
	// (Bad_UserAccessDenied naming the level for a refusal,
	// Bad_NodeIdUnknown for an unknown id). An error refuses the whole
	// call and nothing changed: *auth.DeniedError (no alarm:ack),
	// ErrUnavailable (the journal or the audit log cannot record it; retry).
	AckAlarms(ctx context.Context, g auth.Grant, ids []string, all bool) ([]AlarmResult, error)
	// ShelveAlarms shelves the alarms ids for d, or one-shot (until the
	// alarm next returns to normal, and at most d, or the maximum when d
	// is 0). Shelving is never forever: d must be positive unless oneShot,
	// and at most the daemon's alarms.max_shelve (24 h by default), else
	// the error wraps ErrInvalid and names the maximum.
	ShelveAlarms(ctx context.Context, g auth.Grant, ids []string, d time.Duration, oneShot bool) ([]AlarmResult, error)
	// UnshelveAlarms ends the shelving of the alarms ids; one still active
	// is annunciated anew.
	UnshelveAlarms(ctx context.Context, g auth.Grant, ids []string) ([]AlarmResult, error)
	// AddAlarmNote adds g's note to alarm id. Errors: ErrNotFound,
	// ErrInvalid (empty, or longer than 2000 characters), an
	// *auth.DeniedError (scope, prefix or level), ErrUnavailable.
	AddAlarmNote(ctx context.Context, g auth.Grant, id, text string) error
	// AlarmSummary returns the banner's counts for g.
	AlarmSummary(ctx context.Context, g auth.Grant) (AlarmSummary, error)
	// SubscribeAlarms delivers every transition of an alarm g may read (g
	// needs alarm:read; its prefixes apply), in commit order, into a
	// channel of buf events, until cancel. dropped counts the events lost
	// because the subscriber fell behind (take a fresh ListAlarms then).
	// The MQTT link (alarms/<path> through the outbox) and flow triggers
	// consume it. cancel may be called more than once.
	SubscribeAlarms(g auth.Grant, buf int) (ch <-chan AlarmEvent, dropped func() uint64, cancel func())
	// AlarmMetrics returns the figures the /metrics route exports
	// (docs/alarms.md, "Metrics"); it needs no grant.
	AlarmMetrics(ctx context.Context) AlarmMetrics
}

// Alarm is one alarm now (docs/alarms.md, "The alarm object"): ID is
// "<source tag path>:<name>"; State one of normal, active_unacked,
// active_acked, rtn_unacked; Priority diagnostic, low, medium, high or
// critical; Mode and AckMode the definition's; Shelf nil unless shelved;
// Evaluable false with a Reason when the source or a limit tag is not
// Good (the alarm then keeps its state); Message interpolated with the
// current value; Value, Quality and Timestamp the source's VQT; Setpoint, Low, High the limits in force (nil: none or
// unknown); ActiveSince and AckedAt zero when not set; Notes oldest first,
// the last 20.
type Alarm struct {
	ID           string
	Name         string
	Source       string
	DisplayPath  string
	Priority     string
	Mode         string
	AckMode      string
	State        string
	Active       bool
	Acked        bool
	Shelf        *AlarmShelf
	Suppressed   bool
	OutOfService bool
	Latched      bool
	Chattering   bool
	Evaluable    bool
	Reason       string
	Message      string
	Value        value.Value
	Units        string
	Quality      value.Quality
	Timestamp    time.Time
	Setpoint     *float64
	Low          *float64
	High         *float64
	ActiveSince  time.Time
	AckedAt      time.Time
	AckedBy      string
	LastChange   time.Time
	AckLevel     auth.Level
	ShelveLevel  auth.Level
	Notes        []AlarmNote
}

// AlarmShelf is a shelving: by whom, when, until when, one-shot or timed.
type AlarmShelf struct {
	By      string
	At      time.Time
	Until   time.Time
	OneShot bool
}

// AlarmNote is an operator's note.
type AlarmNote struct {
	By   string
	At   time.Time
	Text string
}

// AlarmFilter selects alarms. Without States or IncludeNormal: the alarms
// annunciated and not normal, plus the shelved ones. States (state names)
// picks the alarms in those states; IncludeNormal every alarm. Priorities
// (names) and Prefix (a folder, whole segments, or a tag path) narrow.
type AlarmFilter struct {
	States        []string
	Priorities    []string
	Prefix        string
	IncludeNormal bool
}

// AlarmList is ListAlarms' answer: the alarms, and over every alarm the
// grant may see the annunciated unacknowledged and active ones and the
// highest priority not normal ("" when none).
type AlarmList struct {
	Alarms  []Alarm
	Unacked int
	Active  int
	Highest string
}

// AlarmSummary is the banner's counts (AlarmList's, without the list).
type AlarmSummary struct {
	Unacked int
	Active  int
	Highest string
}

// AlarmJournalQuery selects journal entries: From and To bound the time
// (inclusive; zero: open), Path a source tag, a folder (whole segments) or
// an alarm id, Priority and State (the entry's To) exact names; After
// continues from a page's Next; Desc lists newest first; Limit defaults to
// 100, at most 1000.
type AlarmJournalQuery struct {
	From, To time.Time
	Path     string
	Priority string
	State    string
	After    uint64
	Desc     bool
	Limit    int
}

// AlarmJournalEntry is one journal entry: a transition (Event: activate,
// clear, ack, shelve, unshelve, ...; the states From and To; Cause in
// words; By, the operator, "" for the process) with the source's value
// and quality, and a note's text.
type AlarmJournalEntry struct {
	Seq      uint64
	At       time.Time
	ID       string
	Source   string
	Priority string
	Event    string
	From     string
	To       string
	Cause    string
	By       string
	Value    value.Value
	Quality  value.Quality
	Note     string
}

// AlarmJournalPage is a page of entries and the After of the next page (0
// when there is none).
type AlarmJournalPage struct {
	Entries []AlarmJournalEntry
	Next    uint64
}

// AlarmStats are the EEMUA 191 figures over a window (docs/alarms.md,
// "Statistics"): annunciations, average rate per 10 minutes and per hour,
// the busiest 10 minutes, floods (10-minute intervals with more than 10)
// and their share, stale alarms (active longer than 24 h), the top 10 most
// frequent, the chattering ones, the counts now, and each 10-minute
// interval's count.
type AlarmStats struct {
	Window          time.Duration
	From, To        time.Time
	Activations     int
	RatePer10Min    float64
	RatePerHour     float64
	Max10Min        int
	Floods          int
	FloodPercent    float64
	Stale           []string
	Top             []AlarmCount
	Chattering      []string
	ChatteringTotal uint64
	Alarms          int
	Active          int
	Unacked         int
	Shelved         int
	Suppressed      int
	OutOfService    int
	NotEvaluable    int
	Intervals       []AlarmInterval
}

// AlarmCount is how often an alarm was annunciated.
type AlarmCount struct {
	ID    string
	Count int
}

// AlarmInterval is the annunciations of one 10-minute interval.
type AlarmInterval struct {
	Start time.Time
	Count int
}

// AlarmResult is the outcome of an operation on one alarm: Status Good
// when done (Reason may say there was nothing to do), else the quality
// that refused it and why.
type AlarmResult struct {
	ID     string
	Status value.Quality
	Reason string
}

// AlarmEvent is one transition of an alarm: the journal's sequence number
// (0 when the journal could not commit it), when, what (Event, From, To,
// Cause, By, Note), the source's value and quality, and the alarm after.
type AlarmEvent struct {
	Seq     uint64
	At      time.Time
	Event   string
	From    string
	To      string
	Cause   string
	By      string
	Note    string
	Value   value.Value
	Quality value.Quality
	Alarm   Alarm
}

// AlarmMetrics are the alarm figures for Prometheus: gauges of the alarms
// by state (annunciated only: normal, active_unacked, active_acked,
// rtn_unacked), shelved, suppressed, out of service, not evaluable,
// chattering, the active ones by priority, the journal's entries and bytes,
// the alarm rate per 10 minutes over the last hour and the floods of the
// last 24 h; counters since the start of annunciations, transitions,
// chattering flags raised, evaluations, tag changes taken, changes the
// feed lost, resyncs after such losses, journal commit failures, journal
// entries lost to them, and transitions slow subscribers lost.
type AlarmMetrics struct {
	Alarms           int
	ByState          map[string]int
	Shelved          int
	Suppressed       int
	OutOfService     int
	NotEvaluable     int
	Chattering       int
	ActiveByPriority map[string]int

	ActivationsTotal    uint64
	TransitionsTotal    uint64
	ChatteringTotal     uint64
	EvaluationsTotal    uint64
	ChangesTotal        uint64
	FeedDroppedTotal    uint64
	ResyncsTotal        uint64
	CommitErrorsTotal   uint64
	LostEntriesTotal    uint64
	SubscriberDropTotal uint64

	JournalEntries uint64
	JournalBytes   uint64
	RatePer10Min   float64
	Floods24h      int
}
