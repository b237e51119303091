package alarm

import (
	"time"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/value"
)

// State is an alarm's state in the ISA-18.2 state model (ISA-18.2-2016
// §11, Figure 5): normal; active and unacknowledged; active and
// acknowledged; returned to normal and unacknowledged. Shelved, suppressed
// by design and out of service are shown beside it (Alarm.Shelf,
// Suppressed, OutOfService): while one holds, nothing is annunciated.
type State uint8

// The states, named as on the wire.
const (
	Normal State = iota
	ActiveUnacked
	ActiveAcked
	RTNUnacked
)

var stateNames = [...]string{"normal", "active_unacked", "active_acked", "rtn_unacked"}

// String returns the state's wire name ("active_unacked").
func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return ""
}

// ParseState returns the state named s; the error names s and the valid
// names.
func ParseState(s string) (State, bool) {
	for i, n := range stateNames {
		if n == s {
			return State(i), true
		}
	}
	return 0, false
}

// The pseudo-states a journal entry's From or To names when an alarm
// enters or leaves shelving, suppression by design or out of service.
const (
	StateShelved      = "shelved"
	StateSuppressed   = "suppressed"
	StateOutOfService = "out_of_service"
)

// Events of a Transition (and of a journal entry).
const (
	EventActivate       = "activate"               // the alarm became active and is annunciated
	EventActivateSilent = "activate_unannunciated" // it became active while shelved, suppressed or out of service
	EventClear          = "clear"                  // its condition returned to normal (after the clear delay)
	EventLatch          = "latch"                  // its condition returned to normal; latched until acknowledged
	EventAck            = "ack"                    // an operator acknowledged it
	EventShelve         = "shelve"                 // an operator shelved it
	EventUnshelve       = "unshelve"               // unshelved: by an operator, at expiry, or one-shot on return to normal
	EventSuppress       = "suppress"               // its condition tag suppresses it
	EventUnsuppress     = "unsuppress"             // no longer suppressed
	EventOutOfService   = "out_of_service"         // taken out of service (project)
	EventInService      = "in_service"             // returned to service (project)
	EventNotEvaluable   = "not_evaluable"          // its source or a limit tag is not Good: it keeps its state and says so
	EventEvaluable      = "evaluable"              // evaluable again
	EventNote           = "note"                   // an operator added a note
	EventChattering     = "chattering"             // activated Count times within the window
	EventChatteringEnd  = "chattering_end"         // below the count again
	EventRemoved        = "removed"                // its definition left the project
)

// Shelf is an alarm's shelving: who shelved it and when, until when (never
// forever: at most Settings.MaxShelve), and whether it is one-shot (it
// also ends when the alarm next returns to normal).
type Shelf struct {
	By      string    `json:"by"`
	At      time.Time `json:"at"`
	Until   time.Time `json:"until"`
	OneShot bool      `json:"one_shot"`
}

// Note is an operator's note on an alarm.
type Note struct {
	By   string    `json:"by"`
	At   time.Time `json:"at"`
	Text string    `json:"text"`
}

// Alarm is the state of one alarm now: its identity, state, overlays,
// whether it can be evaluated (and why not), its message, the source's
// value, quality, timestamp and units, the limits in force (nil when the mode has
// none or a limit tag is not known), the times and who of its last
// activation and acknowledgement, the levels its operations need, and its
// notes (the last MaxNotes, oldest first).
type Alarm struct {
	ID           string
	Name         string
	Source       string
	DisplayPath  string
	Priority     Priority
	Mode         Mode
	AckMode      AckMode
	State        State
	Active       bool
	Acked        bool
	Shelf        *Shelf
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
	Timestamp    time.Time // the source's VQT time
	Setpoint     *float64
	Low, High    *float64
	ActiveSince  time.Time
	AckedAt      time.Time
	AckedBy      string
	LastChange   time.Time
	AckLevel     auth.Level
	ShelveLevel  auth.Level
	Notes        []Note
}

// Annunciated reports whether the alarm is shown to operators now: not
// shelved, suppressed or out of service.
func (a Alarm) Annunciated() bool { return a.Shelf == nil && !a.Suppressed && !a.OutOfService }

// Transition is one change of an alarm: what happened (Event, the states
// From and To, Cause in words, By for an operator's action), when, the
// source's value and quality then, a note's text, the alarm after it, and
// the journal sequence number once committed (0 when the journal could not
// commit it).
type Transition struct {
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

// Result is the outcome of an operation on one alarm: Good when done (or
// nothing was to do, with a Reason saying so), Bad_NodeIdUnknown for an
// unknown id, Bad_UserAccessDenied when the grant's level or prefixes do
// not reach it (Reason names the level needed).
type Result struct {
	ID     string
	Status value.Quality
	Reason string
}

// Change is one change of a tag, as the tag engine's subscription
// delivers it.
type Change struct {
	Path string
	value.VQT
}
