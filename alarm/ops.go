package alarm

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/store"
	"qubiq.dev/edge/value"
)

// Errors of the operations; each error returned wraps one, with its
// subject.
var (
	// ErrInvalid: the request is not acceptable (a shelve without a
	// duration or longer than Settings.MaxShelve, an empty note).
	ErrInvalid = errors.New("invalid request")
	// ErrNotFound: no alarm has the id.
	ErrNotFound = errors.New("no such alarm")
	// ErrUnavailable: the journal cannot commit now, so an operator's
	// action would not be recorded; nothing was changed. Retry.
	ErrUnavailable = errors.New("alarm journal cannot commit")
)

// MaxNoteLen is the longest note, in characters.
const MaxNoteLen = 2000

// snapshot is the Alarm of in now.
func (e *Engine) snapshot(in *inst) Alarm {
	d := in.Def
	a := Alarm{ID: in.ID, Name: d.Name, Source: in.Source, DisplayPath: d.DisplayPath, Priority: d.Priority, Mode: d.Mode,
		AckMode: d.AckMode, State: in.state(), Active: in.active, Acked: in.acked, Suppressed: in.suppressed,
		OutOfService: in.oos, Latched: in.latched, Chattering: in.chattering, Evaluable: in.evaluable, Reason: in.reason,
		Value: in.src.Value, Units: in.Units, Quality: in.src.Quality, Timestamp: in.src.Time, ActiveSince: in.activeSince, AckedAt: in.ackedAt,
		AckedBy: in.ackedBy, LastChange: in.lastChange, AckLevel: d.AckLevel, ShelveLevel: d.ShelveLevel,
		Notes: slices.Clone(in.notes)}
	if a.DisplayPath == "" {
		a.DisplayPath = in.ID
	}
	if !in.srcSet {
		a.Quality = value.BadWaitingForInitialData
	}
	if in.shelf != nil {
		s := *in.shelf
		a.Shelf = &s
	}
	a.Setpoint, a.Low, a.High = in.limits()
	parts := d.msg
	if len(parts) == 0 {
		parts = defaultMessage(d.Mode)
	}
	var rate *float64
	if d.Mode == ModeRate {
		r := in.rate
		rate = &r
	}
	a.Message = render(parts, msgArgs{value: in.src.Value, units: in.Units, quality: a.Quality.String(), setpoint: a.Setpoint,
		low: a.Low, high: a.High, rate: rate, name: d.Name, source: in.Source, display: a.DisplayPath, priority: d.Priority.String()})
	if a.Notes == nil {
		a.Notes = []Note{}
	}
	return a
}

// Filter selects alarms for List. By default List returns the alarms
// annunciated and not normal, plus the shelved ones; States picks the
// alarms in those states instead; IncludeNormal returns every alarm.
// Priorities, Prefix (a folder, whole segments, or a tag path) and Allow
// (a grant's prefixes) narrow any of these.
type Filter struct {
	States        []State
	Priorities    []Priority
	Prefix        string
	IncludeNormal bool
	Allow         func(source string) bool
}

// Summary is what a banner shows: the alarms annunciated and
// unacknowledged, those annunciated and active, and the highest priority
// among the annunciated alarms that are not normal (0: none).
type Summary struct {
	Unacked int
	Active  int
	Highest Priority
}

func (f Filter) allows(in *inst) bool {
	if f.Allow != nil && !f.Allow(in.Source) {
		return false
	}
	if p := strings.Trim(f.Prefix, "/"); p != "" && in.Source != p && !strings.HasPrefix(in.Source, p+"/") && in.ID != f.Prefix {
		return false
	}
	if len(f.Priorities) > 0 && !slices.Contains(f.Priorities, in.Def.Priority) {
		return false
	}
	switch {
	case len(f.States) > 0:
		return slices.Contains(f.States, in.state())
	case f.IncludeNormal:
		return true
	}
	return in.shelf != nil || (!in.overlaid() && in.state() != Normal)
}

// summarize adds in to s.
func (s *Summary) add(in *inst) {
	if in.overlaid() || in.state() == Normal {
		return
	}
	if !in.acked {
		s.Unacked++
	}
	if in.active {
		s.Active++
	}
	s.Highest = max(s.Highest, in.Def.Priority)
}

// List returns the alarms f selects, sorted by priority (critical first),
// then by activation (newest first), then by id; and the summary of every
// alarm f.Allow lets through.
func (e *Engine) List(f Filter) ([]Alarm, Summary) {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []Alarm
	var sum Summary
	for _, in := range e.insts {
		if f.Allow == nil || f.Allow(in.Source) {
			sum.add(in)
		}
		if f.allows(in) {
			out = append(out, e.snapshot(in))
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Priority != b.Priority {
			return a.Priority > b.Priority
		}
		if !a.ActiveSince.Equal(b.ActiveSince) {
			return a.ActiveSince.After(b.ActiveSince)
		}
		return a.ID < b.ID
	})
	if out == nil {
		out = []Alarm{}
	}
	return out, sum
}

// Summary returns the summary of the alarms allow lets through (nil: all).
func (e *Engine) Summary(allow func(source string) bool) Summary {
	e.mu.Lock()
	defer e.mu.Unlock()
	var sum Summary
	for _, in := range e.insts {
		if allow == nil || allow(in.Source) {
			sum.add(in)
		}
	}
	return sum
}

// Get returns one alarm.
func (e *Engine) Get(id string) (Alarm, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	in, ok := e.byID[id]
	if !ok {
		return Alarm{}, false
	}
	return e.snapshot(in), true
}

// usable refuses an operator's action while the journal cannot commit.
func (e *Engine) usable() error {
	if e.lastCommitErr != nil {
		return fmt.Errorf("%w: %v; nothing was changed, retry", ErrUnavailable, e.lastCommitErr)
	}
	return nil
}

// target resolves one id of an operation by g: the alarm, or the
// refusal (unknown id, outside g's prefixes, g's write level below the
// level the operation needs, shelve or ack).
func (e *Engine) target(g auth.Grant, id, what string, shelve bool) (*inst, *Result) {
	in, ok := e.byID[id]
	if !ok {
		return nil, &Result{ID: id, Status: value.BadNodeIDUnknown, Reason: "no such alarm"}
	}
	if !g.AllowsPath(in.Source) {
		return nil, &Result{ID: id, Status: value.BadUserAccessDenied, Reason: "the alarm's tag is outside the allowed prefixes"}
	}
	level, key := in.Def.AckLevel, "ack_level"
	if shelve {
		level, key = in.Def.ShelveLevel, "shelve_level"
	}
	if !g.AllowsLevel(level) {
		return nil, &Result{ID: id, Status: value.BadUserAccessDenied,
			Reason: fmt.Sprintf("%s this alarm needs write level %q (its %s); yours is %q", what, level, key, g.WriteLevel)}
	}
	return in, nil
}

// ids returns the distinct ids, in order.
func distinct(ids []string) []string {
	seen := map[string]bool{}
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

// Ack acknowledges the alarms ids, or with all every alarm g may see that
// is unacknowledged, as g's principal: each alarm's ack_level is checked
// against g's write level (auth.Grant.AllowsLevel, the order of tag
// writes). One Result per alarm, in order. The error (ErrUnavailable)
// refuses the whole call: nothing was acknowledged.
func (e *Engine) Ack(g auth.Grant, ids []string, all bool) ([]Result, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.usable(); err != nil {
		return nil, err
	}
	if all {
		ids = ids[:0:0]
		for _, in := range e.insts {
			if !in.acked && g.AllowsPath(in.Source) {
				ids = append(ids, in.ID)
			}
		}
	}
	now := e.now()
	out := make([]Result, 0, len(ids))
	for _, id := range distinct(ids) {
		in, refused := e.target(g, id, "acknowledging", false)
		if refused != nil {
			out = append(out, *refused)
			continue
		}
		q, why := e.ack(in, now, g.Principal)
		out = append(out, Result{ID: id, Status: q, Reason: why})
		e.schedule(in)
	}
	e.flushLocked()
	return out, nil
}

// shelveUntil is the end of a shelve of d at now; a bad duration is an
// error wrapping ErrInvalid that names the maximum.
func (e *Engine) shelveUntil(now time.Time, d time.Duration, oneShot bool) (time.Time, error) {
	switch {
	case d < 0:
		return time.Time{}, fmt.Errorf("%w: duration %s is below zero", ErrInvalid, d)
	case d == 0 && !oneShot:
		return time.Time{}, fmt.Errorf("%w: shelving needs a duration (at most %s) or one_shot: true; it is never forever", ErrInvalid, e.set.MaxShelve)
	case d > e.set.MaxShelve:
		return time.Time{}, fmt.Errorf("%w: duration %s is longer than the maximum shelve of %s (alarms.max_shelve)", ErrInvalid, d, e.set.MaxShelve)
	case d == 0:
		d = e.set.MaxShelve
	}
	return now.Add(d), nil
}

// MaxShelve is the longest shelve the engine allows.
func (e *Engine) MaxShelve() time.Duration { return e.set.MaxShelve }

// Shelve shelves the alarms ids for d (0 with oneShot: the maximum), or
// one-shot (also ending when the alarm next returns to normal), as g's
// principal, each alarm's shelve_level checked against g's write level. A
// bad duration refuses the whole call (ErrInvalid), as does ErrUnavailable.
func (e *Engine) Shelve(g auth.Grant, ids []string, d time.Duration, oneShot bool) ([]Result, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.usable(); err != nil {
		return nil, err
	}
	now := e.now()
	until, err := e.shelveUntil(now, d, oneShot)
	if err != nil {
		return nil, err
	}
	out := make([]Result, 0, len(ids))
	for _, id := range distinct(ids) {
		in, refused := e.target(g, id, "shelving", true)
		if refused != nil {
			out = append(out, *refused)
			continue
		}
		e.shelve(in, now, until, oneShot, g.Principal)
		e.schedule(in)
		out = append(out, Result{ID: id, Status: value.Good})
	}
	e.flushLocked()
	e.wake()
	return out, nil
}

// Unshelve ends the shelving of the alarms ids, as g's principal, each
// alarm's shelve_level checked against g's write level; an alarm still
// active is annunciated anew.
func (e *Engine) Unshelve(g auth.Grant, ids []string) ([]Result, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.usable(); err != nil {
		return nil, err
	}
	now := e.now()
	out := make([]Result, 0, len(ids))
	for _, id := range distinct(ids) {
		in, refused := e.target(g, id, "unshelving", true)
		if refused != nil {
			out = append(out, *refused)
			continue
		}
		if in.shelf == nil {
			out = append(out, Result{ID: id, Status: value.Good, Reason: "not shelved"})
			continue
		}
		e.unshelve(in, now, g.Principal, "unshelved by "+g.Principal)
		e.evaluate(in, now)
		out = append(out, Result{ID: id, Status: value.Good})
	}
	e.flushLocked()
	return out, nil
}

// AddNote adds g's note text to alarm id (its ack_level checked against
// g's write level). Errors: ErrNotFound, ErrInvalid (empty or longer than
// MaxNoteLen), an *auth.DeniedError (kind "prefix" or "level"),
// ErrUnavailable.
func (e *Engine) AddNote(g auth.Grant, id, text string) error {
	text = strings.TrimSpace(text)
	switch n := utf8.RuneCountInString(text); {
	case n == 0:
		return fmt.Errorf("%w: the note is empty", ErrInvalid)
	case n > MaxNoteLen:
		return fmt.Errorf("%w: the note has %d characters; at most %d", ErrInvalid, n, MaxNoteLen)
	}
	if err := checkText(text); err != nil {
		return fmt.Errorf("%w: the note %v", ErrInvalid, err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.usable(); err != nil {
		return err
	}
	in, ok := e.byID[id]
	switch {
	case !ok:
		return fmt.Errorf("%w: %q", ErrNotFound, id)
	case !g.AllowsPath(in.Source):
		return &auth.DeniedError{Kind: "prefix", Target: "alarm " + id}
	case !g.AllowsLevel(in.Def.AckLevel):
		return &auth.DeniedError{Kind: "level", Need: in.Def.AckLevel.String(), Target: "a note on alarm " + id}
	}
	e.addNote(in, e.now(), g.Principal, text)
	e.flushLocked()
	return nil
}

// Journal returns the journal entries q selects and the continuation
// (store.DB.QueryAlarmJournal); without a journal, none.
func (e *Engine) Journal(q store.AlarmQuery) ([]store.AlarmEntry, uint64, error) {
	if e.opts.Journal == nil {
		return nil, 0, nil
	}
	return e.opts.Journal.QueryAlarmJournal(q)
}

// resyncShown is how long health names a feed overflow.
const resyncShown = 10 * time.Minute

// Health returns what health must show, one reason each: a journal that
// cannot commit, journal entries lost to that, and a feed overflow in the
// last 10 minutes (events are never dropped silently).
func (e *Engine) Health() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	if e.lastCommitErr != nil {
		out = append(out, "alarm journal cannot commit: "+e.lastCommitErr.Error())
	}
	if e.lostEntries > 0 {
		out = append(out, fmt.Sprintf("alarm journal lost %d entries while it could not commit", e.lostEntries))
	}
	if e.resyncs > 0 && e.now().Sub(e.lastResync) < resyncShown {
		out = append(out, fmt.Sprintf("alarm feed overflowed %d times (%d tag changes lost; every alarm was re-evaluated from current values)",
			e.resyncs, e.feedDropped.Load()))
	}
	return out
}

// checkText refuses text shown to operators that is not plain text:
// invalid UTF-8, and control and direction-formatting characters other
// than newline and tab (notes, messages and display paths are shown on
// operator screens and printed by qubiqctl, where an escape sequence or a
// right-to-left override would change what the reader sees; Unicode
// TR #9 §2 lists the formatting characters).
func checkText(text string) error {
	if !utf8.ValidString(text) {
		return errors.New("is not valid UTF-8")
	}
	for i, r := range text {
		switch {
		case r == '\n' || r == '\t':
		case unicode.IsControl(r), r >= 0x202A && r <= 0x202E, r >= 0x2066 && r <= 0x2069, r == 0x200E, r == 0x200F, r == 0x061C:
			return fmt.Errorf("has the control character %U at byte %d; the text must be plain (newlines and tabs allowed)", r, i)
		}
	}
	return nil
}
