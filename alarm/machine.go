package alarm

import (
	"fmt"
	"math"
	"time"

	"qubiq.dev/edge/value"
)

// The ISA-18.2 state machine of one alarm (docs/alarms.md, "States").
// Every function here runs with Engine.mu held and takes the time it acts
// at; none reads a clock, so the tests drive it with their own.

// inst is one alarm at run time: its definition, the latest values of the
// tags it reads, and its state.
type inst struct {
	Instance

	// Inputs: the source, and (allocated when one is set) the limit tags
	// (setpoint, low, high) and the suppression condition tag.
	src    value.VQT
	srcSet bool
	more   *inputs

	// Rate of change of the source (ModeRate), units per second.
	prevV     float64
	prevT     time.Time
	havePrev  bool
	rate      float64
	rateStale time.Time // engine time when the rate falls to 0 without a new sample

	active, acked, latched bool
	evaluable              bool
	everEvaluable          bool
	reason                 string
	activeSince, ackedAt   time.Time
	ackedBy                string
	lastChange             time.Time
	pendOn, pendOff        time.Time // the trigger held since / the clear held since (zero: not pending)
	shelf                  *Shelf
	suppressed, oos        bool
	notes                  []Note
	acts                   []time.Time // activations within the chattering window
	chattering             bool

	sched time.Time // the deadline queued for it (zero: none)
	gen   uint64    // invalidates older queued deadlines
	dirty bool      // its persisted state changed
}

// inputs are an alarm's tag inputs besides its source.
type inputs struct {
	ops [3]value.VQT
	sup value.VQT
}

// op returns the value of the i-th limit tag (zero: none yet).
func (in *inst) op(i int) value.VQT {
	if in.more == nil {
		return value.VQT{}
	}
	return in.more.ops[i]
}

// supv returns the value of the suppression condition tag (zero: none yet).
func (in *inst) supv() value.VQT {
	if in.more == nil {
		return value.VQT{}
	}
	return in.more.sup
}

// Roles of a tag for an alarm.
const (
	roleSource = iota
	roleSetpoint
	roleLow
	roleHigh
	roleSuppress
)

// MaxNotes is how many notes an alarm keeps (the newest).
const MaxNotes = 20

func (in *inst) state() State {
	switch {
	case in.active && !in.acked:
		return ActiveUnacked
	case in.active:
		return ActiveAcked
	case !in.acked:
		return RTNUnacked
	}
	return Normal
}

func (in *inst) overlaid() bool { return in.shelf != nil || in.suppressed || in.oos }

// stateName is the state as a journal entry names it: an overlay first.
func (in *inst) stateName() string {
	switch {
	case in.shelf != nil:
		return StateShelved
	case in.oos:
		return StateOutOfService
	case in.suppressed:
		return StateSuppressed
	}
	return in.state().String()
}

// operand returns the value of a limit: its constant, or its tag's value
// when Good and numeric.
func (in *inst) operand(i int, op Operand) (float64, bool) {
	if op.Tag == "" {
		return op.Value, true
	}
	v := in.op(i)
	if !v.Quality.IsGood() {
		return 0, false
	}
	f, ok := value.ToFloat(v.Value)
	return f, ok && !math.IsNaN(f)
}

// limits returns the setpoint, low and high in force (nil: none or not
// known).
func (in *inst) limits() (sp, lo, hi *float64) {
	d := in.Def
	get := func(i int, op Operand) *float64 {
		if !op.set {
			return nil
		}
		if f, ok := in.operand(i, op); ok {
			return &f
		}
		return nil
	}
	return get(0, d.Setpoint), get(1, d.Low), get(2, d.High)
}

// check reports whether the alarm can be evaluated now, and why not.
func (in *inst) check() (bool, string) {
	d := in.Def
	if !in.srcSet {
		return false, "no value of " + in.Source + " yet"
	}
	q := in.src.Quality
	why := func(what string, v value.VQT) string {
		s := what + " is " + v.Quality.String()
		if v.Reason != "" {
			s += ": " + v.Reason
		}
		return s
	}
	switch {
	case d.Mode == ModeBadQuality:
		if q == value.UncertainLastUsableValue {
			return false, why(in.Source, in.src)
		}
		return true, ""
	case !q.IsGood():
		return false, why(in.Source, in.src)
	}
	for i, op := range []Operand{d.Setpoint, d.Low, d.High} {
		if op.Tag == "" {
			continue
		}
		if v := in.op(i); !v.Quality.IsGood() {
			return false, why([]string{"setpoint", "low", "high"}[i]+" tag "+op.Tag, v)
		}
		if _, ok := in.operand(i, op); !ok {
			return false, fmt.Sprintf("%s tag %s holds no number", []string{"setpoint", "low", "high"}[i], op.Tag)
		}
	}
	if d.Mode.numeric() || d.Mode == ModeState {
		f, ok := value.ToFloat(in.src.Value)
		if !ok || (d.Mode != ModeState && isBool(in.src.Value)) || math.IsNaN(f) {
			return false, fmt.Sprintf("%s holds %v, not a number", in.Source, in.src.Value)
		}
	}
	return true, ""
}

// deadband returns the deadband in the source's units for base (the
// setpoint, the band or the rate limit).
func (in *inst) deadband(base float64) float64 {
	db := in.Def.Deadband
	if db.Percent {
		return math.Abs(base) * db.Value / 100
	}
	return db.Value
}

// condition returns, for an evaluable alarm, whether the alarm's condition
// holds (trig: it would activate) and whether it has cleared, deadband
// applied (clr: it would return to normal). Both false is the deadband:
// an active alarm stays active, an inactive one stays inactive.
func (in *inst) condition() (trig, clr bool) {
	d := in.Def
	v, _ := value.ToFloat(in.src.Value)
	switch d.Mode {
	case ModeAbove:
		sp, _ := in.operand(0, d.Setpoint)
		return v > sp, v <= sp-in.deadband(sp)
	case ModeBelow:
		sp, _ := in.operand(0, d.Setpoint)
		return v < sp, v >= sp+in.deadband(sp)
	case ModeBetween:
		lo, _ := in.operand(1, d.Low)
		hi, _ := in.operand(2, d.High)
		db := in.deadband(hi - lo)
		return lo <= v && v <= hi, v < lo-db || v > hi+db
	case ModeOutside:
		lo, _ := in.operand(1, d.Low)
		hi, _ := in.operand(2, d.High)
		db := in.deadband(hi - lo)
		return v < lo || v > hi, v >= lo+db && v <= hi-db
	case ModeState:
		on := v != 0
		if d.Bit >= 0 {
			on = bitSet(in.src.Value, d.Bit)
		}
		return on == d.State, on != d.State
	case ModeEquals:
		eq := value.Equal(in.src.Value, d.Equals)
		if a, ok := value.ToFloat(in.src.Value); ok && !isBool(in.src.Value) {
			if b, ok := value.ToFloat(d.Equals); ok && !isBool(d.Equals) {
				eq = a == b
			}
		}
		return eq, !eq
	case ModeBadQuality:
		return in.src.Quality.IsBad(), in.src.Quality.IsGood()
	case ModeRate:
		r := in.rate
		switch d.Direction {
		case DirBoth:
			r = math.Abs(r)
		case DirFalling:
			r = -r
		}
		return r > d.Rate, r <= d.Rate-in.deadband(d.Rate)
	}
	return false, false
}

func bitSet(v value.Value, bit int) bool {
	switch x := value.Normalize(v).(type) {
	case int64:
		return uint64(x)>>bit&1 == 1
	case uint64:
		return x>>bit&1 == 1
	case bool:
		return x && bit == 0
	case float64:
		return uint64(int64(x))>>bit&1 == 1
	}
	return false
}

// setInput records a new value of one of the alarm's tags; now is the
// engine's time (the rate's staleness is measured in it).
func (in *inst) setInput(role int, v value.VQT, now time.Time) {
	switch role {
	case roleSource:
		in.src, in.srcSet = v, true
		if in.Def.Mode == ModeRate {
			in.sample(v, now)
		}
	case roleSetpoint, roleLow, roleHigh:
		if in.more == nil {
			in.more = &inputs{}
		}
		in.more.ops[role-roleSetpoint] = v
	case roleSuppress:
		if in.more == nil {
			in.more = &inputs{}
		}
		in.more.sup = v
	}
}

// sample updates the rate of change from a new source value: the slope to
// the previous Good sample, by the samples' own times. A source that stops
// changing has rate 0 after three of its intervals (at least 1 s).
func (in *inst) sample(v value.VQT, now time.Time) {
	f, ok := value.ToFloat(v.Value)
	if !v.Quality.IsGood() || !ok {
		in.havePrev, in.rate, in.rateStale = false, 0, time.Time{}
		return
	}
	t := v.Time
	if t.IsZero() {
		t = now
	}
	if in.havePrev && t.After(in.prevT) {
		dt := t.Sub(in.prevT)
		in.rate = (f - in.prevV) / dt.Seconds()
		in.rateStale = now.Add(max(time.Second, 3*dt))
	} else if !in.havePrev {
		in.rate = 0
	}
	in.prevV, in.prevT, in.havePrev = f, t, true
}

// suppressedNow reports whether the condition tag suppresses the alarm: it
// is Good and true or non-zero. A condition tag that is Bad does not
// suppress (the alarm stays annunciated: fail safe); one not known yet
// (no value, or the last value before a restart) keeps the suppression
// as it is.
func (in *inst) suppressedNow() bool {
	sup := in.supv()
	switch {
	case in.Def.SuppressedBy == "":
		return false
	case sup.Quality == value.UncertainLastUsableValue || (sup.Time.IsZero() && sup.Value == nil):
		return in.suppressed
	case !sup.Quality.IsGood():
		return false
	}
	f, ok := value.ToFloat(sup.Value)
	return ok && f != 0
}

// chatterRule is the chattering rule in force for in.
func (e *Engine) chatterRule(in *inst) Chattering {
	c := in.Def.Chattering
	if c.Count == 0 {
		c.Count = e.set.Chattering.Count
	}
	if c.Window == 0 {
		c.Window = e.set.Chattering.Window
	}
	return c
}

// nextDeadline is the earliest time the alarm must be looked at again
// without a new value: the end of an active or clear delay, a shelve's
// expiry, the oldest activation leaving the chattering window, a rate
// falling to 0. Zero: none.
func (e *Engine) nextDeadline(in *inst) time.Time {
	var next time.Time
	take := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	if !in.pendOn.IsZero() {
		take(in.pendOn.Add(in.Def.ActiveDelay))
	}
	if !in.pendOff.IsZero() {
		take(in.pendOff.Add(in.Def.ClearDelay))
	}
	if in.shelf != nil {
		take(in.shelf.Until)
	}
	if len(in.acts) > 0 {
		take(in.acts[0].Add(e.chatterRule(in).Window))
	}
	if in.Def.Mode == ModeRate && in.rate != 0 {
		take(in.rateStale)
	}
	return next
}

// evaluate brings the alarm up to date with its inputs at now:
// suppression, evaluability, then the condition with its delays.
func (e *Engine) evaluate(in *inst, now time.Time) {
	e.evaluations++
	if sup := in.suppressedNow(); sup != in.suppressed {
		e.setSuppressed(in, sup, now)
	}
	ok, reason := in.check()
	if !ok {
		if in.evaluable {
			from := in.stateName()
			in.evaluable, in.reason = false, reason
			in.pendOn, in.pendOff = time.Time{}, time.Time{}
			e.emit(in, now, EventNotEvaluable, from, in.stateName(), "cannot be evaluated: "+reason+"; the alarm keeps its state", "", "")
		} else {
			in.reason = reason
		}
		e.schedule(in)
		return
	}
	if !in.evaluable {
		in.evaluable, in.reason = true, ""
		if in.everEvaluable {
			e.emit(in, now, EventEvaluable, in.stateName(), in.stateName(), "evaluable again", "", "")
		}
		in.everEvaluable = true
	}
	trig, clr := in.condition()
	d := in.Def
	if !in.active {
		in.pendOff = time.Time{}
		if trig {
			if in.pendOn.IsZero() {
				in.pendOn = now
			}
			if at := in.pendOn.Add(d.ActiveDelay); !now.Before(at) {
				e.activate(in, at)
			}
		} else {
			in.pendOn = time.Time{}
		}
	} else {
		in.pendOn = time.Time{}
		switch {
		case clr && !in.latched:
			if in.pendOff.IsZero() {
				in.pendOff = now
			}
			if at := in.pendOff.Add(d.ClearDelay); !now.Before(at) {
				e.clear(in, at)
			}
		case !clr:
			in.pendOff = time.Time{}
			if in.latched && trig {
				in.latched = false // the condition is back: active again, still unacknowledged
				in.dirty = true
			}
		}
	}
	e.schedule(in)
}

// tick handles the alarm's deadlines that passed by now, then evaluates.
func (e *Engine) tick(in *inst, now time.Time) {
	if in.shelf != nil && !now.Before(in.shelf.Until) {
		e.unshelve(in, in.shelf.Until, "", "shelve expired")
	}
	e.pruneActs(in, now)
	if in.Def.Mode == ModeRate && in.rate != 0 && !in.rateStale.IsZero() && !now.Before(in.rateStale) {
		in.rate, in.rateStale = 0, time.Time{} // no new sample: the value stopped changing
	}
	e.evaluate(in, now)
}

// pruneActs drops activations that left the chattering window and ends
// the chattering flag below the count.
func (e *Engine) pruneActs(in *inst, now time.Time) {
	rule := e.chatterRule(in)
	n := 0
	for n < len(in.acts) && !now.Before(in.acts[n].Add(rule.Window)) {
		n++
	}
	if n > 0 {
		in.acts = append(in.acts[:0], in.acts[n:]...)
	}
	if in.chattering && len(in.acts) < rule.Count {
		in.chattering = false
		e.emit(in, now, EventChatteringEnd, in.stateName(), in.stateName(),
			fmt.Sprintf("fewer than %d activations in %s", rule.Count, rule.Window), "", "")
	}
}

// activate makes the alarm active at at (its delay elapsed).
func (e *Engine) activate(in *inst, at time.Time) {
	from := in.state()
	in.active, in.activeSince, in.pendOn, in.latched = true, at, time.Time{}, false
	event := EventActivate
	switch {
	case in.overlaid():
		event = EventActivateSilent
	case in.Def.AckMode == AckNone:
		in.acked, in.ackedAt, in.ackedBy = true, at, ""
	default:
		in.acked, in.ackedAt, in.ackedBy = false, time.Time{}, ""
	}
	cause := e.describe(in, true)
	if in.overlaid() {
		cause += " (" + in.stateName() + ": not annunciated)"
	} else {
		e.stats.record(at, in.ID)
		e.activations++
	}
	e.pruneActs(in, at)
	in.acts = append(in.acts, at)
	e.emit(in, at, event, from.String(), in.state().String(), cause, "", "")
	if rule := e.chatterRule(in); !in.chattering && len(in.acts) >= rule.Count {
		in.chattering = true
		e.chatterTotal++
		e.emit(in, at, EventChattering, in.stateName(), in.stateName(),
			fmt.Sprintf("%d activations within %s", len(in.acts), rule.Window), "", "")
	}
}

// clear returns the alarm's condition to normal at at (its clear delay
// elapsed): a latching alarm not yet acknowledged stays active, latched.
func (e *Engine) clear(in *inst, at time.Time) {
	from := in.state()
	in.pendOff = time.Time{}
	if in.Def.Latching && !in.acked {
		if !in.latched {
			in.latched = true
			e.emit(in, at, EventLatch, from.String(), from.String(), e.describe(in, false)+"; latched until acknowledged", "", "")
		}
		return
	}
	in.active, in.activeSince, in.latched = false, time.Time{}, false
	if in.Def.AckMode == AckAuto && !in.acked {
		in.acked, in.ackedAt, in.ackedBy = true, at, ""
	}
	e.emit(in, at, EventClear, from.String(), in.state().String(), e.describe(in, false), "", "")
	if in.shelf != nil && in.shelf.OneShot {
		e.unshelve(in, at, "", "one-shot shelve ended: the alarm returned to normal")
	}
}

// describe says in words why the condition holds (on) or cleared.
func (e *Engine) describe(in *inst, on bool) string {
	d := in.Def
	v := formatValue(in.src.Value)
	sp, lo, hi := in.limits()
	num := func(f *float64) string {
		if f == nil {
			return "?"
		}
		return formatNumber(*f, -1)
	}
	dbs := func(base float64) string {
		if x := in.deadband(base); x > 0 {
			return " − deadband " + formatNumber(x, -1)
		}
		return ""
	}
	delay := func(x time.Duration) string {
		if x > 0 {
			return " for " + x.String()
		}
		return ""
	}
	switch d.Mode {
	case ModeAbove:
		if on {
			return fmt.Sprintf("value %s > setpoint %s%s", v, num(sp), delay(d.ActiveDelay))
		}
		return fmt.Sprintf("value %s ≤ setpoint %s%s%s", v, num(sp), dbs(deref(sp)), delay(d.ClearDelay))
	case ModeBelow:
		if on {
			return fmt.Sprintf("value %s < setpoint %s%s", v, num(sp), delay(d.ActiveDelay))
		}
		return fmt.Sprintf("value %s ≥ setpoint %s%s%s", v, num(sp), plus(dbs(deref(sp))), delay(d.ClearDelay))
	case ModeBetween, ModeOutside:
		if on {
			return fmt.Sprintf("value %s %s %s..%s%s", v, map[Mode]string{ModeBetween: "within", ModeOutside: "outside"}[d.Mode], num(lo), num(hi), delay(d.ActiveDelay))
		}
		return fmt.Sprintf("value %s back %s %s..%s%s", v, map[Mode]string{ModeBetween: "outside", ModeOutside: "within"}[d.Mode], num(lo), num(hi), delay(d.ClearDelay))
	case ModeRate:
		return fmt.Sprintf("rate %s/s (limit %s/s, %s)%s", formatNumber(in.rate, 3), formatNumber(d.Rate, -1), d.Direction, delay(map[bool]time.Duration{true: d.ActiveDelay, false: d.ClearDelay}[on]))
	case ModeBadQuality:
		return fmt.Sprintf("quality %s%s", in.src.Quality, delay(map[bool]time.Duration{true: d.ActiveDelay, false: d.ClearDelay}[on]))
	}
	if on {
		return fmt.Sprintf("value %s%s", v, delay(d.ActiveDelay))
	}
	return fmt.Sprintf("value %s, back to normal%s", v, delay(d.ClearDelay))
}

func plus(s string) string {
	if s == "" {
		return ""
	}
	return " + " + s[len(" − "):]
}

func deref(f *float64) float64 {
	if f == nil {
		return 0
	}
	return *f
}

func formatValue(v value.Value) string {
	if f, ok := value.ToFloat(v); ok && !isBool(v) {
		return formatNumber(f, -1)
	}
	return fmt.Sprint(v)
}

// ack acknowledges the alarm at now by who; a latched alarm whose
// condition returned is reset to normal. An acknowledged alarm (or one
// shelved, suppressed or out of service) has nothing to acknowledge.
func (e *Engine) ack(in *inst, now time.Time, by string) (value.Quality, string) {
	if in.acked {
		return value.Good, "nothing to acknowledge (" + in.stateName() + ")"
	}
	from := in.state()
	in.acked, in.ackedAt, in.ackedBy = true, now, by
	if in.latched {
		in.active, in.latched, in.activeSince, in.pendOff = false, false, time.Time{}, time.Time{}
	}
	e.emit(in, now, EventAck, from.String(), in.state().String(), "acknowledged", by, "")
	return value.Good, ""
}

// enterOverlay hides the alarm from operators (shelved, suppressed or out
// of service): nothing stays to acknowledge; a latched alarm is released.
func (in *inst) enterOverlay() {
	in.acked = true
	if in.latched {
		in.active, in.latched, in.activeSince = false, false, time.Time{}
	}
}

// leaveOverlay annunciates the alarm again (ISA-18.2: it returns to
// normal and is re-evaluated): still active, it is unacknowledged anew.
func (e *Engine) leaveOverlay(in *inst, now time.Time) {
	if !in.active {
		return
	}
	if in.Def.AckMode != AckNone {
		in.acked, in.ackedAt, in.ackedBy = false, time.Time{}, ""
	}
	e.stats.record(now, in.ID)
	e.activations++
}

// shelve shelves the alarm at now until until (one-shot: also until it
// next returns to normal).
func (e *Engine) shelve(in *inst, now, until time.Time, oneShot bool, by string) {
	from := in.stateName()
	was := in.overlaid()
	in.shelf = &Shelf{By: by, At: now, Until: until, OneShot: oneShot}
	if !was {
		in.enterOverlay()
	}
	cause := "shelved until " + until.UTC().Format(time.RFC3339)
	if oneShot {
		cause = "shelved until it returns to normal, at most until " + until.UTC().Format(time.RFC3339)
	}
	e.emit(in, now, EventShelve, from, StateShelved, cause, by, "")
}

// unshelve ends the alarm's shelving at at.
func (e *Engine) unshelve(in *inst, at time.Time, by, cause string) {
	if in.shelf == nil {
		return
	}
	in.shelf = nil
	if !in.overlaid() {
		e.leaveOverlay(in, at)
	}
	e.emit(in, at, EventUnshelve, StateShelved, in.stateName(), cause, by, "")
}

// setSuppressed starts or ends suppression by design at now.
func (e *Engine) setSuppressed(in *inst, sup bool, now time.Time) {
	from := in.stateName()
	if sup {
		was := in.overlaid()
		in.suppressed = true
		if !was {
			in.enterOverlay()
		}
		e.emit(in, now, EventSuppress, from, in.stateName(), "suppressed by design: "+in.Def.SuppressedBy+" is "+formatValue(in.supv().Value), "", "")
		return
	}
	in.suppressed = false
	if !in.overlaid() {
		e.leaveOverlay(in, now)
	}
	e.emit(in, now, EventUnsuppress, StateSuppressed, in.stateName(), "no longer suppressed: "+in.Def.SuppressedBy+" is "+formatValue(in.supv().Value), "", "")
}

// setOutOfService takes the alarm out of service or returns it, at now,
// as the project says.
func (e *Engine) setOutOfService(in *inst, oos bool, now time.Time) {
	if oos == in.oos {
		return
	}
	from := in.stateName()
	if oos {
		was := in.overlaid()
		in.oos = true
		if !was {
			in.enterOverlay()
		}
		e.emit(in, now, EventOutOfService, from, StateOutOfService, "taken out of service by the project", "project", "")
		return
	}
	in.oos = false
	if !in.overlaid() {
		e.leaveOverlay(in, now)
	}
	e.emit(in, now, EventInService, StateOutOfService, in.stateName(), "returned to service by the project", "project", "")
}

// addNote adds an operator's note at now.
func (e *Engine) addNote(in *inst, now time.Time, by, text string) {
	in.notes = append(in.notes, Note{By: by, At: now, Text: text})
	if len(in.notes) > MaxNotes {
		in.notes = append(in.notes[:0], in.notes[len(in.notes)-MaxNotes:]...)
	}
	e.emit(in, now, EventNote, in.stateName(), in.stateName(), "note", by, text)
}
