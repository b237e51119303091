package alarm

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"

	"gopkg.in/yaml.v3"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/value"
)

// Priority is an alarm's priority, lowest first (docs/alarms.md,
// "Priorities"; ISA-18.2-2016 §11.3 asks for few, distinct priorities).
type Priority uint8

// The priorities.
const (
	PriorityDiagnostic Priority = iota + 1
	PriorityLow
	PriorityMedium
	PriorityHigh
	PriorityCritical
)

var priorityNames = [...]string{"", "diagnostic", "low", "medium", "high", "critical"}

// String returns the priority's name ("high").
func (p Priority) String() string {
	if int(p) < len(priorityNames) && p > 0 {
		return priorityNames[p]
	}
	return ""
}

// ParsePriority returns the priority named s; the error names s and the
// valid names.
func ParsePriority(s string) (Priority, error) {
	for i, n := range priorityNames {
		if i > 0 && n == s {
			return Priority(i), nil
		}
	}
	return 0, fmt.Errorf("unknown priority %q (want diagnostic, low, medium, high or critical)", s)
}

// Mode is what an alarm watches in its source tag.
type Mode uint8

// The modes (docs/alarms.md, "Modes").
const (
	ModeAbove      Mode = iota + 1 // value above the setpoint
	ModeBelow                      // value below the setpoint
	ModeBetween                    // value between low and high (inclusive)
	ModeOutside                    // value below low or above high
	ModeState                      // a bool tag (or a bit of an integer tag) in the given state
	ModeEquals                     // value equal to a constant
	ModeBadQuality                 // the tag's quality is Bad
	ModeRate                       // rate of change above a limit (units per second)
)

var modeNames = [...]string{"", "above", "below", "between", "outside", "state", "equals", "bad_quality", "rate"}

// String returns the mode's name ("above").
func (m Mode) String() string {
	if int(m) < len(modeNames) && m > 0 {
		return modeNames[m]
	}
	return ""
}

// numeric reports whether the mode compares numbers.
func (m Mode) numeric() bool {
	return m == ModeAbove || m == ModeBelow || m == ModeBetween || m == ModeOutside || m == ModeRate
}

// AckMode says how an alarm is acknowledged (docs/alarms.md, "Acknowledge").
type AckMode uint8

// The acknowledgement modes: manual (an operator acknowledges), auto
// (acknowledged when it returns to normal), none (acknowledged as it
// activates: nothing to acknowledge).
const (
	AckManual AckMode = iota + 1
	AckAuto
	AckNone
)

var ackModeNames = [...]string{"", "manual", "auto", "none"}

// String returns the mode's name ("manual").
func (a AckMode) String() string {
	if int(a) < len(ackModeNames) && a > 0 {
		return ackModeNames[a]
	}
	return ""
}

// Direction is what a rate-of-change alarm watches: both, rising or
// falling.
type Direction uint8

// The directions of a rate alarm.
const (
	DirBoth Direction = iota
	DirRising
	DirFalling
)

var directionNames = [...]string{"both", "rising", "falling"}

// String returns the direction's name.
func (d Direction) String() string { return directionNames[d] }

// Operand is a setpoint, low or high limit: a constant (Value) or the
// value of another tag (Tag non-empty).
type Operand struct {
	Value float64
	Tag   string
	set   bool
}

// Deadband is applied when an active alarm clears (ISA-18.2-2016 §11.5):
// Value in the tag's units, or, with Percent, in percent of the setpoint's
// magnitude (above, below), of high − low (between, outside) or of the
// rate limit (rate).
type Deadband struct {
	Value   float64
	Percent bool
}

// Chattering is the chattering rule: an alarm that activates Count times
// within Window is flagged (ISA-18.2-2016 §16.5: 3 in 60 s). Zero fields
// take the daemon's defaults (Settings).
type Chattering struct {
	Count  int
	Window time.Duration
}

// Definition is one entry of the project's alarms: section, on one tag
// (Tag) or on every fitting tag under a folder (Prefix). See
// docs/alarms.md, "Definitions", for every key.
type Definition struct {
	Name   string
	Tag    string
	Prefix string
	Mode   Mode
	// Setpoint is the limit of above/below; Low and High those of
	// between/outside.
	Setpoint, Low, High Operand
	// State is what a state alarm alarms on (default true); Bit, when 0 or
	// more, picks a bit of an integer tag (0 = least significant), else -1.
	State bool
	Bit   int
	// Equals is the value an equals alarm alarms on (value.Normalize form).
	Equals value.Value
	// Rate is the limit of a rate alarm in units per second, in Direction.
	Rate        float64
	Direction   Direction
	Deadband    Deadband
	ActiveDelay time.Duration
	ClearDelay  time.Duration
	Priority    Priority
	AckMode     AckMode
	// Latching keeps an alarm active after its condition returned to
	// normal until it is acknowledged.
	Latching    bool
	DisplayPath string
	// Message is the text shown, with {value}, {units} ... interpolated
	// (docs/alarms.md, "Messages").
	Message     string
	AckLevel    auth.Level
	ShelveLevel auth.Level
	// SuppressedBy is the condition tag of suppression by design: while it
	// is Good and true (non-zero), the alarm is not annunciated.
	SuppressedBy string
	// OutOfService takes the alarm out of service (maintenance).
	OutOfService bool
	Chattering   Chattering
	// Line is the definition's line in the project file.
	Line int

	msg []msgPart
}

// Instance is one definition applied to one tag: an alarm. ID is
// "<source>:<name>", stable across restarts.
type Instance struct {
	ID     string
	Source string
	Units  string
	Def    *Definition
}

// TagInfo is what the parser needs to know of a project tag: its value
// type and engineering units.
type TagInfo struct {
	Type  value.Type
	Units string
}

// validName is the rule for alarm names: letters, digits, _ - . and space, no
// ':' or '/' (they delimit the id), at most 64 characters.
func validName(s string) bool {
	n := 0
	for _, r := range s {
		ok := unicode.In(r, unicode.L, unicode.N) || r == '_' || r == '.' || r == '-' || (r == ' ' && n > 0)
		if !ok || n == 64 {
			return false
		}
		n++
	}
	return n > 0
}

// Parse reads the project's alarms: section (nodes, one per entry, as the
// project file holds them) against the project's tags, and returns the
// alarms it defines, sorted by id. Every problem is reported in one error,
// each as "FILE:LINE: alarm NAME: what is wrong" (qubiqd --check-config
// and project import): unknown keys, modes, priorities or levels, a
// deadband on a bool or state alarm, a delay below zero, an unknown tag,
// setpoint tag or condition tag, a limit missing for the mode, latching
// without manual acknowledgement, a message placeholder that does not
// exist, an id defined twice.
func Parse(file string, nodes []yaml.Node, tags map[string]TagInfo) ([]Instance, error) {
	var errs []error
	var out []Instance
	seen := map[string]int{}
	for i := range nodes {
		n := &nodes[i]
		d, derrs := decode(n)
		label := func() string {
			if d != nil && d.Name != "" {
				return fmt.Sprintf("alarm %q", d.Name)
			}
			return fmt.Sprintf("alarm #%d", i+1)
		}
		for _, e := range derrs {
			errs = append(errs, fmt.Errorf("%s:%d: %s: %s", file, e.line, label(), e.msg))
		}
		if d == nil || len(derrs) > 0 {
			continue
		}
		insts, verrs := d.expand(tags)
		for _, e := range verrs {
			errs = append(errs, fmt.Errorf("%s:%d: %s: %s", file, e.line, label(), e.msg))
		}
		if len(verrs) > 0 {
			continue
		}
		for _, in := range insts {
			if first, dup := seen[in.ID]; dup {
				errs = append(errs, fmt.Errorf("%s:%d: %s: alarm %q is defined twice (first at line %d)", file, d.Line, label(), in.ID, first))
				continue
			}
			seen[in.ID] = d.Line
			out = append(out, in)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// lineErr is a problem at a line of the project file.
type lineErr struct {
	line int
	msg  string
}

// decode reads one entry strictly: every key known, every value of the
// right shape. Problems name the line of their key.
func decode(n *yaml.Node) (*Definition, []lineErr) {
	if n.Kind != yaml.MappingNode {
		return nil, []lineErr{{n.Line, "want a mapping such as {name: HighLevel, tag: Line1/Tank/Level, mode: above, setpoint: 90}"}}
	}
	d := &Definition{Line: n.Line, Bit: -1, State: true, Priority: PriorityMedium, AckMode: AckManual,
		AckLevel: auth.LevelOperate, ShelveLevel: auth.LevelSupervise}
	var errs []lineErr
	bad := func(k *yaml.Node, format string, args ...any) {
		errs = append(errs, lineErr{k.Line, k.Value + ": " + fmt.Sprintf(format, args...)})
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if seen[k.Value] {
			bad(k, "given twice")
			continue
		}
		seen[k.Value] = true
		str := func(dst *string) {
			if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
				bad(k, "want a string")
				return
			}
			*dst = v.Value
		}
		dur := func(dst *time.Duration) {
			x, err := parseDuration(v)
			if err != nil {
				bad(k, "%v", err)
				return
			}
			*dst = x
		}
		boolean := func(dst *bool) {
			if v.Kind != yaml.ScalarNode || v.Decode(dst) != nil {
				bad(k, "want true or false")
			}
		}
		level := func(dst *auth.Level) {
			l, err := auth.ParseLevel(v.Value)
			if err != nil || v.Kind != yaml.ScalarNode {
				bad(k, "unknown level %q (want view, operate, supervise or design)", v.Value)
				return
			}
			*dst = l
		}
		switch k.Value {
		case "name":
			str(&d.Name)
		case "tag":
			str(&d.Tag)
		case "prefix":
			str(&d.Prefix)
			d.Prefix = strings.Trim(d.Prefix, "/")
		case "mode":
			var s string
			str(&s)
			d.Mode = 0
			for m, name := range modeNames {
				if m > 0 && name == s {
					d.Mode = Mode(m)
				}
			}
			if d.Mode == 0 && s != "" {
				bad(k, "unknown mode %q (want above, below, between, outside, state, equals, bad_quality or rate)", s)
			}
		case "setpoint", "low", "high":
			op, err := parseOperand(v)
			if err != nil {
				bad(k, "%v", err)
				break
			}
			switch k.Value {
			case "setpoint":
				d.Setpoint = op
			case "low":
				d.Low = op
			default:
				d.High = op
			}
		case "state":
			boolean(&d.State)
		case "bit":
			if v.Kind != yaml.ScalarNode || v.Decode(&d.Bit) != nil || d.Bit < 0 || d.Bit > 63 {
				bad(k, "want a bit number from 0 (least significant) to 63")
				d.Bit = -1
			}
		case "equals":
			var x any
			if v.Kind != yaml.ScalarNode || v.Decode(&x) != nil || x == nil {
				bad(k, "want a number, true/false or a string")
				break
			}
			d.Equals = value.Normalize(x)
		case "rate":
			if v.Kind != yaml.ScalarNode || v.Decode(&d.Rate) != nil || !(d.Rate > 0) || math.IsInf(d.Rate, 0) {
				bad(k, "want a positive number of units per second")
			}
		case "direction":
			var s string
			str(&s)
			switch s {
			case "both":
				d.Direction = DirBoth
			case "rising":
				d.Direction = DirRising
			case "falling":
				d.Direction = DirFalling
			default:
				bad(k, "unknown direction %q (want both, rising or falling)", s)
			}
		case "deadband":
			db, err := parseDeadband(v)
			if err != nil {
				bad(k, "%v", err)
				break
			}
			d.Deadband = db
		case "active_delay":
			dur(&d.ActiveDelay)
		case "clear_delay":
			dur(&d.ClearDelay)
		case "priority":
			p, err := ParsePriority(v.Value)
			if err != nil || v.Kind != yaml.ScalarNode {
				bad(k, "unknown priority %q (want diagnostic, low, medium, high or critical)", v.Value)
				break
			}
			d.Priority = p
		case "ack_mode":
			switch v.Value {
			case "manual":
				d.AckMode = AckManual
			case "auto":
				d.AckMode = AckAuto
			case "none":
				d.AckMode = AckNone
			default:
				bad(k, "unknown ack mode %q (want manual, auto or none)", v.Value)
			}
		case "latching":
			boolean(&d.Latching)
		case "display_path", "message":
			dst := &d.DisplayPath
			if k.Value == "message" {
				dst = &d.Message
			}
			str(dst)
			if err := checkText(*dst); err != nil {
				bad(k, "%v", err)
			}
		case "ack_level":
			level(&d.AckLevel)
		case "shelve_level":
			level(&d.ShelveLevel)
		case "suppressed_by":
			str(&d.SuppressedBy)
		case "out_of_service":
			boolean(&d.OutOfService)
		case "chattering":
			c, err := parseChattering(v)
			if err != nil {
				bad(k, "%v", err)
				break
			}
			d.Chattering = c
		default:
			bad(k, "unknown key (an alarm takes name, tag or prefix, mode, setpoint, low, high, state, bit, equals, rate, direction, "+
				"deadband, active_delay, clear_delay, priority, ack_mode, latching, display_path, message, ack_level, shelve_level, "+
				"suppressed_by, out_of_service, chattering)")
		}
	}
	return d, errs
}

// parseDuration reads "2s", "500ms", "1m", "1d", or a number of seconds.
// A negative one is refused ("below zero").
func parseDuration(v *yaml.Node) (time.Duration, error) {
	s := strings.TrimSpace(v.Value)
	if v.Kind != yaml.ScalarNode || s == "" {
		return 0, errors.New("want a duration such as 2s or 500ms")
	}
	var d time.Duration
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		d = time.Duration(f * float64(time.Second))
	} else if days, ok := strings.CutSuffix(s, "d"); ok {
		f, err := strconv.ParseFloat(days, 64)
		if err != nil {
			return 0, fmt.Errorf("%q is not a duration (want e.g. 2s, 500ms, 1m, 1d)", s)
		}
		d = time.Duration(f * float64(24*time.Hour))
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, fmt.Errorf("%q is not a duration (want e.g. 2s, 500ms, 1m, 1d)", s)
		}
	}
	if d < 0 {
		return 0, fmt.Errorf("%s is below zero", s)
	}
	return d, nil
}

// parseOperand reads a constant (90) or a tag ({tag: Line1/Tank/HighSP}).
func parseOperand(v *yaml.Node) (Operand, error) {
	switch v.Kind {
	case yaml.ScalarNode:
		var f float64
		if err := v.Decode(&f); err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return Operand{}, fmt.Errorf("%q is not a number (want a number or {tag: PATH})", v.Value)
		}
		return Operand{Value: f, set: true}, nil
	case yaml.MappingNode:
		if len(v.Content) != 2 || v.Content[0].Value != "tag" || v.Content[1].Kind != yaml.ScalarNode || v.Content[1].Value == "" {
			return Operand{}, errors.New("want a number or {tag: PATH}")
		}
		return Operand{Tag: v.Content[1].Value, set: true}, nil
	}
	return Operand{}, errors.New("want a number or {tag: PATH}")
}

// parseDeadband reads 2, {absolute: 2} or {percent: 5}.
func parseDeadband(v *yaml.Node) (Deadband, error) {
	var db Deadband
	switch v.Kind {
	case yaml.ScalarNode:
		if err := v.Decode(&db.Value); err != nil {
			return db, fmt.Errorf("%q is not a number (want a number, {absolute: x} or {percent: x})", v.Value)
		}
	case yaml.MappingNode:
		if len(v.Content) != 2 || (v.Content[0].Value != "absolute" && v.Content[0].Value != "percent") {
			return db, errors.New("want a number, {absolute: x} or {percent: x}")
		}
		if err := v.Content[1].Decode(&db.Value); err != nil {
			return db, fmt.Errorf("%s: %q is not a number", v.Content[0].Value, v.Content[1].Value)
		}
		db.Percent = v.Content[0].Value == "percent"
	default:
		return db, errors.New("want a number, {absolute: x} or {percent: x}")
	}
	switch {
	case db.Value < 0 || math.IsNaN(db.Value) || math.IsInf(db.Value, 0):
		return db, fmt.Errorf("%v must not be negative", db.Value)
	case db.Percent && db.Value >= 100:
		return db, fmt.Errorf("%v%% must be below 100", db.Value)
	}
	return db, nil
}

// parseChattering reads {count: 3, window: 60s}.
func parseChattering(v *yaml.Node) (Chattering, error) {
	var c Chattering
	if v.Kind != yaml.MappingNode {
		return c, errors.New("want {count: N, window: DURATION}")
	}
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, x := v.Content[i], v.Content[i+1]
		switch k.Value {
		case "count":
			if x.Decode(&c.Count) != nil || c.Count < 2 {
				return c, errors.New("count: want a whole number of activations, 2 or more")
			}
		case "window":
			d, err := parseDuration(x)
			if err != nil || d <= 0 {
				return c, errors.New("window: want a positive duration such as 60s")
			}
			c.Window = d
		default:
			return c, fmt.Errorf("unknown key %q (want count, window)", k.Value)
		}
	}
	return c, nil
}

// fits reports whether a tag of type t can be the source of mode m.
func fits(m Mode, t value.Type) bool {
	switch {
	case m.numeric():
		return isNumber(t)
	case m == ModeState:
		return t == value.Bool || isInteger(t) || t == value.Auto
	case m == ModeEquals:
		return true
	}
	return true // bad_quality: any tag
}

func isNumber(t value.Type) bool {
	return t != value.Bool && t != value.String && t != value.TypeUnknown
}

func isInteger(t value.Type) bool {
	switch t {
	case value.Int16, value.Uint16, value.Int32, value.Uint32, value.Int64, value.Uint64:
		return true
	}
	return false
}

// expand checks d against the tags and returns its alarms.
func (d *Definition) expand(tags map[string]TagInfo) ([]Instance, []lineErr) {
	var errs []lineErr
	bad := func(format string, args ...any) { errs = append(errs, lineErr{d.Line, fmt.Sprintf(format, args...)}) }
	if d.Name == "" {
		bad("missing name")
	} else if !validName(d.Name) {
		bad("name %q: want letters, digits, _ - . and space (no ':' or '/'), at most 64", d.Name)
	}
	switch {
	case d.Tag == "" && d.Prefix == "":
		bad("missing tag (or prefix, for every fitting tag under a folder)")
	case d.Tag != "" && d.Prefix != "":
		bad("give tag or prefix, not both")
	case d.Tag != "":
		if _, ok := tags[d.Tag]; !ok {
			bad("unknown tag %q", d.Tag)
		}
	}
	if d.Mode == 0 {
		bad("missing mode (above, below, between, outside, state, equals, bad_quality or rate)")
		return nil, errs
	}
	needs := func(key string, op Operand, want bool) {
		switch {
		case want && !op.set:
			bad("mode %s needs %s", d.Mode, key)
		case !want && op.set:
			bad("mode %s takes no %s", d.Mode, key)
		}
	}
	needs("setpoint", d.Setpoint, d.Mode == ModeAbove || d.Mode == ModeBelow)
	needs("low", d.Low, d.Mode == ModeBetween || d.Mode == ModeOutside)
	needs("high", d.High, d.Mode == ModeBetween || d.Mode == ModeOutside)
	for _, op := range []struct {
		key string
		op  Operand
	}{{"setpoint", d.Setpoint}, {"low", d.Low}, {"high", d.High}} {
		if op.op.Tag == "" {
			continue
		}
		if ti, ok := tags[op.op.Tag]; !ok {
			bad("unknown %s tag %q", op.key, op.op.Tag)
		} else if !isNumber(ti.Type) {
			bad("%s tag %q is %s, not a number", op.key, op.op.Tag, ti.Type)
		}
	}
	if d.Low.set && d.High.set && d.Low.Tag == "" && d.High.Tag == "" {
		if d.Low.Value >= d.High.Value {
			bad("low %v must be below high %v", d.Low.Value, d.High.Value)
		} else if d.Mode == ModeOutside && !d.Deadband.Percent && 2*d.Deadband.Value >= d.High.Value-d.Low.Value {
			bad("deadband %v leaves no normal band between low %v and high %v", d.Deadband.Value, d.Low.Value, d.High.Value)
		}
	}
	if d.Mode == ModeOutside && d.Deadband.Percent && d.Deadband.Value >= 50 {
		bad("deadband %v%% of high − low leaves no normal band (want below 50%%)", d.Deadband.Value)
	}
	hasDeadband := d.Deadband.Value > 0 || d.Deadband.Percent
	switch d.Mode {
	case ModeState, ModeEquals, ModeBadQuality:
		if hasDeadband {
			bad("a deadband applies to numeric limits; mode %s (a bool, state or quality) takes none", d.Mode)
		}
	case ModeRate:
		if d.Rate == 0 {
			bad("mode rate needs rate (units per second)")
		}
		if !d.Deadband.Percent && d.Deadband.Value >= d.Rate && d.Rate > 0 {
			bad("deadband %v must be below rate %v", d.Deadband.Value, d.Rate)
		}
	}
	if d.Mode != ModeRate && d.Rate != 0 {
		bad("mode %s takes no rate", d.Mode)
	}
	if d.Mode != ModeEquals && d.Equals != nil {
		bad("mode %s takes no equals", d.Mode)
	}
	if d.Mode == ModeEquals && d.Equals == nil {
		bad("mode equals needs equals (the value to alarm on)")
	}
	if d.Latching && d.AckMode != AckManual {
		bad("latching needs ack_mode manual (a latched alarm is reset by its acknowledgement)")
	}
	if d.SuppressedBy != "" {
		if _, ok := tags[d.SuppressedBy]; !ok {
			bad("unknown suppressed_by tag %q", d.SuppressedBy)
		}
	}
	msg, err := compileMessage(d.Message)
	if err != nil {
		bad("message: %v", err)
	}
	d.msg = msg
	if len(errs) > 0 {
		return nil, errs
	}
	var paths []string
	if d.Tag != "" {
		ti := tags[d.Tag]
		if !fits(d.Mode, ti.Type) {
			return nil, []lineErr{{d.Line, fmt.Sprintf("mode %s needs %s tag; %q is %s", d.Mode, modeNeeds(d.Mode), d.Tag, ti.Type)}}
		}
		if d.Bit >= 0 && !isInteger(ti.Type) {
			return nil, []lineErr{{d.Line, fmt.Sprintf("bit needs an integer tag; %q is %s", d.Tag, ti.Type)}}
		}
		paths = []string{d.Tag}
	} else {
		for p, ti := range tags {
			if (p == d.Prefix || strings.HasPrefix(p, d.Prefix+"/")) && fits(d.Mode, ti.Type) && (d.Bit < 0 || isInteger(ti.Type)) &&
				p != d.SuppressedBy && p != d.Setpoint.Tag && p != d.Low.Tag && p != d.High.Tag {
				paths = append(paths, p)
			}
		}
		if len(paths) == 0 {
			return nil, []lineErr{{d.Line, fmt.Sprintf("prefix %q matches no tag mode %s can watch (it needs %s tag)", d.Prefix, d.Mode, modeNeeds(d.Mode))}}
		}
		sort.Strings(paths)
	}
	out := make([]Instance, len(paths))
	for i, p := range paths {
		out[i] = Instance{ID: p + ":" + d.Name, Source: p, Units: tags[p].Units, Def: d}
	}
	return out, nil
}

func modeNeeds(m Mode) string {
	switch {
	case m.numeric():
		return "a numeric"
	case m == ModeState:
		return "a bool or integer"
	}
	return "a"
}
