package flow

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/gateway"
	"qubiq.dev/edge/tagpath"
	"qubiq.dev/edge/value"
)

// The flows: section of the project file, and one flow pushed on its own
// (docs/flows.md, "The flows: section"). Parse checks everything that can
// be checked without running anything; each problem names the file, the
// line, the flow and the node.

// Limits of a flow definition.
const (
	// MaxNodes is the most nodes one flow may have.
	MaxNodes = 64
	// MaxQueue is the largest queue a flow may have.
	MaxQueue = 100_000
	// DefaultQueue is the queue of a flow that names none.
	DefaultQueue = 100
	// MaxCode is the largest Python node, in bytes.
	MaxCode = 256 << 10
	// MaxDoc is the largest flow definition, in bytes.
	MaxDoc = 1 << 20
)

// Node types.
const (
	TypePython      = "python"
	TypeFilter      = "filter"
	TypeTagWrite    = "tag_write"
	TypeMQTTPublish = "mqtt_publish"
	TypeLog         = "log"
	TypeMessage     = "message"
	TypeEnd         = "end"
)

var nodeTypes = []string{TypePython, TypeFilter, TypeTagWrite, TypeMQTTPublish, TypeLog, TypeMessage, TypeEnd}

// Error policies of a node (on_error).
const (
	OnErrorDrop  = "drop"  // count and log the failure; the message goes no further
	OnErrorRoute = "route" // the message, with the error attached, goes to the node's error output
	OnErrorFail  = "fail"  // the node stops (failed, in health) until an engineer resets it
)

// Queue overflow policies (overflow).
const (
	DropOldest = "drop_oldest"
	DropNewest = "drop_newest"
)

// Trigger kinds.
const (
	TriggerTag     = "tag"
	TriggerTimer   = "timer"
	TriggerMessage = "message"
	TriggerMQTT    = "mqtt"
	TriggerAlarm   = "alarm"
)

// nameRe is a flow name or a node id: a letter, then letters, digits, _
// or -, at most 64.
var nameRe = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]{0,63}$`)

// CheckName returns nil when s is a valid flow name or node id (what
// names which), else an error wrapping gateway.ErrInvalid.
func CheckName(what, s string) error {
	if !nameRe.MatchString(s) {
		return fmt.Errorf("%w: %s %q: want a letter, then letters, digits, _ or - (at most 64)", gateway.ErrInvalid, what, s)
	}
	return nil
}

// Def is one parsed flow.
type Def struct {
	Name        string
	Description string
	Line        int
	Trigger     Trigger
	OnlyGood    bool
	QueueSize   int
	Overflow    string
	// Grant is what the flow may do (scopes, write level, prefixes);
	// Principal, Realm and Origin are set when it runs.
	Grant auth.Grant
	// Nodes in the order written; the first receives the trigger's
	// messages.
	Nodes []*NodeDef
	// Order is the nodes in topological order (every node after those
	// that feed it).
	Order []*NodeDef
	ByID  map[string]*NodeDef
	// Doc is the flow's definition as stored (YAML).
	Doc []byte
}

// Trigger is what starts a flow's messages.
type Trigger struct {
	Kind     string
	Line     int
	Tags     []string      // tag
	Deadband float64       // tag: the change of a number that counts (0: every change)
	Every    time.Duration // timer
	Cron     *Cron         // timer
	Message  string        // message: the handler name
	Topic    string        // mqtt: the topic filter
	Alarm    AlarmFilter   // alarm
}

// AlarmFilter selects alarm transitions: alarms of source tags under
// Source (whole segments; empty: every alarm), of these priorities (none:
// every priority), into these states (none: every transition).
type AlarmFilter struct {
	Source     string
	Priorities []string
	To         []string
}

// Alarm priorities and states of the alarm API.
var (
	alarmPriorities = []string{"diagnostic", "low", "medium", "high", "critical"}
	alarmStates     = []string{"normal", "active_unacked", "active_acked", "rtn_unacked"}
)

// String says the trigger in words, for GET /flows.
func (t Trigger) String() string {
	switch t.Kind {
	case TriggerTag:
		s := "tag " + strings.Join(t.Tags, ", ")
		if t.Deadband > 0 {
			s += fmt.Sprintf(" (deadband %g)", t.Deadband)
		}
		return s
	case TriggerTimer:
		if t.Cron != nil {
			return "timer cron " + t.Cron.String()
		}
		return "timer every " + t.Every.String()
	case TriggerMessage:
		return "message " + t.Message
	case TriggerMQTT:
		return "mqtt " + t.Topic
	case TriggerAlarm:
		s := "alarm"
		if t.Alarm.Source != "" {
			s += " " + t.Alarm.Source
		}
		if len(t.Alarm.Priorities) > 0 {
			s += " priority " + strings.Join(t.Alarm.Priorities, "|")
		}
		if len(t.Alarm.To) > 0 {
			s += " to " + strings.Join(t.Alarm.To, "|")
		}
		return s
	}
	return t.Kind
}

// NodeDef is one node of a flow.
type NodeDef struct {
	ID      string
	Type    string
	Line    int
	Next    string // the next node ("": the message has reached the end)
	Error   string // the error output (on_error: route)
	Else    string // filter: where messages that do not pass go ("": nowhere)
	OnError string

	// python
	Code    string
	File    string // where Code was read from, when from a file
	Entry   string // a stored script's module.entry instead of Code
	Timeout time.Duration

	// filter
	Quality []string   // quality names, or Good, Uncertain, Bad for the category
	Field   string     // filter, tag_write, mqtt_publish: the message field (dotted; default payload)
	Cond    *Condition // filter

	// tag_write
	Path     string
	AllowBad bool

	// mqtt_publish
	Topic  string
	Retain bool

	// log
	Level   string
	Message string
	Audit   bool

	// message
	Handler string
}

// Condition is a filter's test of a field's value: every bound given must
// hold (numbers), and Equals / NotEquals compare the JSON value.
type Condition struct {
	Above, Below, AtLeast, AtMost *float64
	Equals, NotEquals             any
	HasEquals, HasNotEquals       bool
}

// Env is what Parse checks a flow against. A nil map is not checked.
type Env struct {
	// Dir is the directory a Python node's file: resolves against (the
	// project file's); empty refuses file: (a flow pushed on its own has
	// its code inline).
	Dir string
	// Tags are the project's tags by path.
	Tags map[string]TagFacts
	// Scripts are the script modules by name, with their entries.
	Scripts map[string][]string
	// Handlers are the project's message handlers, which a message
	// trigger must not shadow.
	Handlers []string
	// MQTT reports whether the supervisor link is on and wired; MQTTWhy
	// says why not.
	MQTT    bool
	MQTTWhy string
	// Alarms reports whether alarm transitions can reach flows; AlarmsWhy
	// says why not.
	Alarms    bool
	AlarmsWhy string
}

// TagFacts is what Parse needs of a tag: whether it is read-only, its
// write level.
type TagFacts struct {
	ReadOnly   bool
	WriteLevel auth.Level
}

// problems collects a flow's problems, each prefixed with where.
type problems struct {
	file string
	flow string
	errs []error
}

func (p *problems) add(line int, node, format string, args ...any) {
	at := fmt.Sprintf("%s:%d: flow %q", p.file, line, p.flow)
	if p.file == "" {
		at = fmt.Sprintf("line %d: flow %q", line, p.flow)
	}
	if node != "" {
		at += fmt.Sprintf(": node %q", node)
	}
	p.errs = append(p.errs, fmt.Errorf("%s: %s", at, fmt.Sprintf(format, args...)))
}

// fields walks a mapping node: its keys and values by name, each key's
// line, and the keys it does not know reported.
type fields struct {
	n     *yaml.Node
	vals  map[string]*yaml.Node
	lines map[string]int
}

func mapping(n *yaml.Node, known []string, report func(line int, format string, args ...any)) (*fields, bool) {
	if n.Kind != yaml.MappingNode {
		report(n.Line, "want a mapping, have %s", kindWord(n))
		return nil, false
	}
	f := &fields{n: n, vals: map[string]*yaml.Node{}, lines: map[string]int{}}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if !slices.Contains(known, k.Value) {
			report(k.Line, "unknown key %q (valid keys: %s)", k.Value, strings.Join(known, ", "))
			continue
		}
		if _, dup := f.vals[k.Value]; dup {
			report(k.Line, "key %q given twice", k.Value)
			continue
		}
		f.vals[k.Value] = v
		f.lines[k.Value] = k.Line
	}
	return f, true
}

func kindWord(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	case yaml.ScalarNode:
		return fmt.Sprintf("%q", n.Value)
	}
	return "nothing"
}

func (f *fields) has(k string) bool { _, ok := f.vals[k]; return ok }

func (f *fields) line(k string) int {
	if l, ok := f.lines[k]; ok {
		return l
	}
	return f.n.Line
}

// str returns a scalar string key ("" when absent); a non-scalar is
// reported.
func (f *fields) str(k string, report func(int, string, ...any)) string {
	v := f.vals[k]
	if v == nil {
		return ""
	}
	if v.Kind != yaml.ScalarNode {
		report(v.Line, "%s: want a text, have %s", k, kindWord(v))
		return ""
	}
	return v.Value
}

func (f *fields) boolean(k string, report func(int, string, ...any)) bool {
	v := f.vals[k]
	if v == nil {
		return false
	}
	var b bool
	if v.Kind != yaml.ScalarNode || v.Decode(&b) != nil {
		report(v.Line, "%s: want true or false, have %s", k, kindWord(v))
	}
	return b
}

func (f *fields) strs(k string, report func(int, string, ...any)) []string {
	v := f.vals[k]
	if v == nil {
		return nil
	}
	if v.Kind == yaml.ScalarNode {
		return []string{v.Value}
	}
	if v.Kind != yaml.SequenceNode {
		report(v.Line, "%s: want a list of texts, have %s", k, kindWord(v))
		return nil
	}
	out := []string{}
	for _, e := range v.Content {
		if e.Kind != yaml.ScalarNode {
			report(e.Line, "%s: want a text, have %s", k, kindWord(e))
			continue
		}
		out = append(out, e.Value)
	}
	return out
}

func (f *fields) duration(k string, report func(int, string, ...any)) time.Duration {
	s := f.str(k, report)
	if s == "" {
		return 0
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		if n, nerr := strconv.ParseFloat(s, 64); nerr == nil {
			d, err = time.Duration(n*float64(time.Second)), nil
		}
	}
	if err != nil || d <= 0 {
		report(f.line(k), "%s %q: want a positive duration such as 500ms or 2s", k, s)
		return 0
	}
	return d
}

func (f *fields) number(k string, report func(int, string, ...any)) (*float64, bool) {
	v := f.vals[k]
	if v == nil {
		return nil, false
	}
	var x float64
	if v.Kind != yaml.ScalarNode || v.Decode(&x) != nil || math.IsNaN(x) || math.IsInf(x, 0) {
		report(v.Line, "%s: want a number, have %s", k, kindWord(v))
		return nil, true
	}
	return &x, true
}

var flowKeys = []string{"name", "description", "trigger", "only_good", "queue", "overflow", "grant", "nodes"}

// ParseSection parses the project's flows: entries (file names the project
// file in messages). Every problem of every flow is reported; the flows
// without problems are returned.
func ParseSection(file string, nodes []yaml.Node, env Env) ([]*Def, error) {
	var out []*Def
	var errs []error
	seen := map[string]int{}
	for i := range nodes {
		d, err := Parse(file, &nodes[i], env)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if first, dup := seen[d.Name]; dup {
			errs = append(errs, fmt.Errorf("%s:%d: flow %q defined twice (first at line %d)", file, d.Line, d.Name, first))
			continue
		}
		seen[d.Name] = d.Line
		out = append(out, d)
	}
	return out, errors.Join(errs...)
}

// ParseDoc parses one flow sent on its own (YAML or JSON: the shape of one
// entry of the flows: section). name, when not empty, is the name the
// caller expects (the route's {name}).
func ParseDoc(name string, doc []byte, env Env) (*Def, error) {
	if len(doc) > MaxDoc {
		return nil, fmt.Errorf("%w: the flow definition is %d bytes; the limit is %d", gateway.ErrInvalid, len(doc), MaxDoc)
	}
	var root yaml.Node
	if err := yaml.Unmarshal(doc, &root); err != nil {
		return nil, fmt.Errorf("%w: flow %q: %s", gateway.ErrInvalid, name, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	if len(root.Content) == 0 {
		return nil, fmt.Errorf("%w: flow %q: the definition is empty", gateway.ErrInvalid, name)
	}
	n := root.Content[0]
	if name != "" && n.Kind == yaml.MappingNode {
		got := ""
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == "name" {
				got = n.Content[i+1].Value
			}
		}
		if got == "" {
			// The route names the flow: the definition may leave it out.
			n.Content = append([]*yaml.Node{{Kind: yaml.ScalarNode, Value: "name", Tag: "!!str"},
				{Kind: yaml.ScalarNode, Value: name, Tag: "!!str"}}, n.Content...)
		} else if got != name {
			return nil, fmt.Errorf("%w: the definition names flow %q, the request %q", gateway.ErrInvalid, got, name)
		}
	}
	return Parse("", n, env)
}

// Parse parses one flow from its YAML node.
func Parse(file string, n *yaml.Node, env Env) (*Def, error) {
	p := &problems{file: file}
	d := &Def{Line: n.Line, QueueSize: DefaultQueue, Overflow: DropOldest, ByID: map[string]*NodeDef{}}
	top := func(line int, format string, args ...any) { p.add(line, "", format, args...) }
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == "name" {
				p.flow = n.Content[i+1].Value
			}
		}
	}
	f, ok := mapping(n, flowKeys, top)
	if !ok {
		return nil, errors.Join(p.errs...)
	}
	d.Name = f.str("name", top)
	if d.Name == "" {
		top(n.Line, "needs a name")
	} else if err := CheckName("name", d.Name); err != nil {
		top(f.line("name"), "%s", strings.TrimPrefix(err.Error(), gateway.ErrInvalid.Error()+": "))
	}
	d.Description = f.str("description", top)
	d.OnlyGood = f.boolean("only_good", top)
	if f.has("queue") {
		q := f.str("queue", top)
		size, err := strconv.Atoi(q)
		if err != nil || size < 1 || size > MaxQueue {
			top(f.line("queue"), "queue %q: want a whole number from 1 to %d", q, MaxQueue)
		} else {
			d.QueueSize = size
		}
	}
	if f.has("overflow") {
		switch o := f.str("overflow", top); o {
		case DropOldest, DropNewest:
			d.Overflow = o
		default:
			top(f.line("overflow"), "overflow %q: want drop_oldest or drop_newest", o)
		}
	}
	d.Grant = parseGrant(f, top)
	if tn := f.vals["trigger"]; tn != nil {
		d.Trigger = parseTrigger(tn, f.line("trigger"), env, d, top)
	} else {
		top(n.Line, "needs a trigger (tag, every, cron, message, mqtt or alarm)")
	}
	if nn := f.vals["nodes"]; nn != nil {
		parseNodes(nn, env, d, p)
	} else {
		top(n.Line, "needs nodes (a list, the first receives the trigger's messages)")
	}
	if d.OnlyGood && d.Trigger.Kind != "" && d.Trigger.Kind != TriggerTag && d.Trigger.Kind != TriggerAlarm {
		top(f.line("only_good"), "only_good applies to tag and alarm triggers, which carry a quality")
	}
	if len(p.errs) > 0 {
		return nil, errors.Join(p.errs...)
	}
	doc, err := yaml.Marshal(n)
	if err != nil {
		return nil, fmt.Errorf("flow %q: %w", d.Name, err)
	}
	d.Doc = doc
	return d, nil
}

var grantKeys = []string{"scopes", "write_level", "prefixes"}

// parseGrant reads grant: {scopes, write_level, prefixes}; without one the
// flow may read tags only.
func parseGrant(f *fields, report func(int, string, ...any)) auth.Grant {
	g := auth.Grant{Scopes: []auth.Scope{auth.TagRead}, WriteLevel: auth.LevelView}
	gn := f.vals["grant"]
	if gn == nil {
		return g
	}
	gf, ok := mapping(gn, grantKeys, func(line int, format string, args ...any) {
		report(line, "grant: "+format, args...)
	})
	if !ok {
		return g
	}
	if gf.has("scopes") {
		g.Scopes = nil
		for _, s := range gf.strs("scopes", report) {
			sc, err := auth.ParseScope(s)
			if err != nil {
				report(gf.line("scopes"), "grant: %v", err)
				continue
			}
			g.Scopes = append(g.Scopes, sc)
		}
	}
	if gf.has("write_level") {
		l, err := auth.ParseLevel(gf.str("write_level", report))
		if err != nil {
			report(gf.line("write_level"), "grant: %v", err)
		}
		g.WriteLevel = l
	}
	for _, raw := range gf.strs("prefixes", report) {
		pre, err := tagpath.CleanPrefix(raw)
		if err != nil {
			report(gf.line("prefixes"), "grant: prefix %q: %v (want a tag path prefix such as Line1 or Line1/Pump)", raw, err)
			continue
		}
		g.Prefixes = append(g.Prefixes, strings.TrimSuffix(pre, "/"))
	}
	return g
}

var triggerKeys = []string{"tag", "tags", "deadband", "every", "cron", "message", "mqtt", "alarm"}

func parseTrigger(n *yaml.Node, line int, env Env, d *Def, top func(int, string, ...any)) Trigger {
	report := func(l int, format string, args ...any) { top(l, "trigger: "+format, args...) }
	t := Trigger{Line: line}
	f, ok := mapping(n, triggerKeys, report)
	if !ok {
		return t
	}
	var kinds []string
	for _, k := range []string{"tag", "tags", "every", "cron", "message", "mqtt", "alarm"} {
		if f.has(k) {
			kinds = append(kinds, k)
		}
	}
	if len(kinds) != 1 {
		report(line, "want exactly one of tag (or tags), every, cron, message, mqtt, alarm; have %s", orNone(kinds))
		return t
	}
	g := d.Grant
	switch k := kinds[0]; k {
	case "tag", "tags":
		t.Kind = TriggerTag
		for _, raw := range f.strs(k, report) {
			path, err := tagpath.Clean(raw)
			if err != nil {
				report(f.line(k), "%v", err)
				continue
			}
			t.Tags = append(t.Tags, path)
		}
		if len(t.Tags) == 0 {
			report(f.line(k), "%s: name at least one tag path", k)
		}
		for _, path := range t.Tags {
			if env.Tags != nil {
				if _, known := env.Tags[path]; !known {
					report(f.line(k), "tag %q is not a tag of the project", path)
					continue
				}
			}
			if !g.HasScope(auth.TagRead) {
				report(f.line(k), "tag %q: the flow's grant needs tag:read to see its changes", path)
			} else if !g.AllowsPath(path) {
				report(f.line(k), "tag %q is outside the flow's grant prefixes %q", path, g.Prefixes)
			}
		}
		if db, set := f.number("deadband", report); set && db != nil {
			if *db < 0 {
				report(f.line("deadband"), "deadband %g must not be negative", *db)
			} else {
				t.Deadband = *db
			}
		}
	case "every":
		t.Kind = TriggerTimer
		t.Every = f.duration("every", report)
		if t.Every > 0 && t.Every < 10*time.Millisecond {
			report(f.line("every"), "every %s: at least 10ms", t.Every)
		}
	case "cron":
		t.Kind = TriggerTimer
		c, err := ParseCron(f.str("cron", report))
		if err != nil {
			report(f.line("cron"), "%v", err)
		}
		t.Cron = c
	case "message":
		t.Kind = TriggerMessage
		t.Message = f.str("message", report)
		if err := gateway.CheckName("message handler", t.Message); err != nil {
			report(f.line("message"), "%s", strings.TrimPrefix(err.Error(), gateway.ErrInvalid.Error()+": "))
		} else if slices.Contains(env.Handlers, t.Message) {
			report(f.line("message"), "message %q is one of the project's message_handlers, which would receive it instead", t.Message)
		}
	case "mqtt":
		t.Kind = TriggerMQTT
		t.Topic = f.str("mqtt", report)
		if err := checkTopic(t.Topic, true); err != nil {
			report(f.line("mqtt"), "%v", err)
		}
		if !env.MQTT {
			report(f.line("mqtt"), "an mqtt trigger needs the supervisor link, which %s", linkWhy(env.MQTTWhy, "is off"))
		}
	case "alarm":
		t.Kind = TriggerAlarm
		an := f.vals["alarm"]
		if an.Kind == yaml.ScalarNode { // alarm: Line1/Tank: every transition of those alarms
			t.Alarm.Source = strings.TrimSuffix(tagpath.Normalize(an.Value), "/")
		} else if af, ok := mapping(an, []string{"source", "priority", "to"}, report); ok {
			t.Alarm.Source = strings.TrimSuffix(tagpath.Normalize(af.str("source", report)), "/")
			for _, pr := range af.strs("priority", report) {
				if !slices.Contains(alarmPriorities, pr) {
					report(af.line("priority"), "alarm priority %q: want one of %s", pr, strings.Join(alarmPriorities, ", "))
				}
				t.Alarm.Priorities = append(t.Alarm.Priorities, pr)
			}
			for _, st := range af.strs("to", report) {
				if !slices.Contains(alarmStates, st) {
					report(af.line("to"), "alarm state %q: want one of %s", st, strings.Join(alarmStates, ", "))
				}
				t.Alarm.To = append(t.Alarm.To, st)
			}
		}
		if !env.Alarms {
			report(f.line("alarm"), "an alarm trigger needs alarm transitions, which %s", linkWhy(env.AlarmsWhy, "this qubiqd does not deliver"))
		}
	}
	if f.has("deadband") && t.Kind != TriggerTag {
		report(f.line("deadband"), "deadband applies to tag triggers only")
	}
	return t
}

func linkWhy(why, dflt string) string {
	if why != "" {
		return why
	}
	return dflt
}

func orNone(ks []string) string {
	if len(ks) == 0 {
		return "none"
	}
	return strings.Join(ks, " and ")
}

// checkTopic checks an MQTT topic (filter: + and # allowed) below the
// appliance's base topic.
func checkTopic(t string, filter bool) error {
	switch {
	case t == "":
		return errors.New("topic: empty")
	case len(t) > 1024:
		return fmt.Errorf("topic of %d bytes: at most 1024", len(t))
	case strings.HasPrefix(t, "/"), strings.Contains(t, "\x00"):
		return fmt.Errorf("topic %q: relative to the appliance's topics, without a leading /", t)
	}
	levels := strings.Split(t, "/")
	for i, l := range levels {
		if !filter && strings.ContainsAny(l, "+#") {
			return fmt.Errorf("topic %q: + and # are for subscriptions, not for publishing", t)
		}
		if strings.Contains(l, "#") && (l != "#" || i != len(levels)-1) {
			return fmt.Errorf("topic %q: # must be a whole last level", t)
		}
		if strings.Contains(l, "+") && l != "+" {
			return fmt.Errorf("topic %q: + must be a whole level", t)
		}
	}
	return nil
}

// nodeKeys are the keys every node takes, and those of each type.
var (
	commonNodeKeys = []string{"id", "type", "next"}
	nodeTypeKeys   = map[string][]string{
		TypePython:      {"code", "file", "entry", "timeout", "on_error", "error"},
		TypeFilter:      {"quality", "field", "above", "below", "at_least", "at_most", "equals", "not_equals", "else"},
		TypeTagWrite:    {"path", "field", "allow_bad_quality", "on_error", "error"},
		TypeMQTTPublish: {"topic", "field", "retain", "on_error", "error"},
		TypeLog:         {"level", "message", "audit"},
		TypeMessage:     {"handler", "on_error", "error"},
		TypeEnd:         {},
	}
	topDefRe = regexp.MustCompile(`(?m)^def\s+transform\s*\(`)
)

func parseNodes(n *yaml.Node, env Env, d *Def, p *problems) {
	top := func(line int, format string, args ...any) { p.add(line, "", format, args...) }
	if n.Kind != yaml.SequenceNode || len(n.Content) == 0 {
		top(n.Line, "nodes: want a list of at least one node, have %s", kindWord(n))
		return
	}
	if len(n.Content) > MaxNodes {
		top(n.Line, "nodes: %d nodes; at most %d", len(n.Content), MaxNodes)
		return
	}
	for _, nn := range n.Content {
		id := ""
		if nn.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(nn.Content); i += 2 {
				if nn.Content[i].Value == "id" {
					id = nn.Content[i+1].Value
				}
			}
		}
		nd := parseNode(nn, id, env, d, p)
		if nd == nil {
			continue
		}
		if _, dup := d.ByID[nd.ID]; dup {
			p.add(nd.Line, nd.ID, "node id given twice")
			continue
		}
		d.ByID[nd.ID] = nd
		d.Nodes = append(d.Nodes, nd)
	}
	if len(p.errs) > 0 {
		return
	}
	// The graph: every output names a node; no cycle; every node reachable.
	for _, nd := range d.Nodes {
		for _, out := range []struct{ key, to string }{{"next", nd.Next}, {"error", nd.Error}, {"else", nd.Else}} {
			if out.to == "" {
				continue
			}
			if _, ok := d.ByID[out.to]; !ok {
				p.add(nd.Line, nd.ID, "%s: no node %q in this flow (have: %s)", out.key, out.to, strings.Join(nodeIDs(d), ", "))
			} else if out.to == nd.ID {
				p.add(nd.Line, nd.ID, "%s: a node cannot feed itself", out.key)
			}
		}
	}
	if len(p.errs) > 0 {
		return
	}
	order, cycle := topoSort(d)
	if cycle != "" {
		p.add(d.ByID[cycle].Line, cycle, "is part of a loop (next, error and else must not lead back to a node)")
		return
	}
	d.Order = order
	reach := map[string]bool{}
	var walk func(id string)
	walk = func(id string) {
		if id == "" || reach[id] {
			return
		}
		reach[id] = true
		nd := d.ByID[id]
		walk(nd.Next)
		walk(nd.Error)
		walk(nd.Else)
	}
	walk(d.Nodes[0].ID)
	for _, nd := range d.Nodes {
		if !reach[nd.ID] {
			p.add(nd.Line, nd.ID, "no message can reach it (no next, error or else leads to it from the first node, %q)", d.Nodes[0].ID)
		}
	}
}

func nodeIDs(d *Def) []string {
	out := make([]string, len(d.Nodes))
	for i, nd := range d.Nodes {
		out[i] = nd.ID
	}
	return out
}

// topoSort orders the nodes so each comes after every node feeding it; it
// returns a node of a cycle when there is one.
func topoSort(d *Def) ([]*NodeDef, string) {
	state := map[string]int{} // 1 visiting, 2 done
	var out []*NodeDef
	var cycle string
	var visit func(id string) bool
	visit = func(id string) bool {
		if id == "" {
			return true
		}
		switch state[id] {
		case 1:
			cycle = id
			return false
		case 2:
			return true
		}
		state[id] = 1
		nd := d.ByID[id]
		for _, to := range []string{nd.Next, nd.Error, nd.Else} {
			if !visit(to) {
				return false
			}
		}
		state[id] = 2
		out = append(out, nd)
		return true
	}
	for _, nd := range d.Nodes {
		if !visit(nd.ID) {
			return nil, cycle
		}
	}
	slices.Reverse(out)
	return out, ""
}

func parseNode(n *yaml.Node, id string, env Env, d *Def, p *problems) *NodeDef {
	report := func(line int, format string, args ...any) { p.add(line, id, format, args...) }
	if n.Kind != yaml.MappingNode {
		report(n.Line, "want a mapping {id, type, ...}, have %s", kindWord(n))
		return nil
	}
	typ := ""
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == "type" {
			typ = n.Content[i+1].Value
		}
	}
	extra, ok := nodeTypeKeys[typ]
	if !ok {
		report(n.Line, "type %q: want one of %s", typ, strings.Join(nodeTypes, ", "))
		return nil
	}
	f, ok := mapping(n, append(slices.Clone(commonNodeKeys), extra...), func(line int, format string, args ...any) {
		report(line, "%s node: "+format, append([]any{typ}, args...)...)
	})
	if !ok {
		return nil
	}
	nd := &NodeDef{ID: id, Type: typ, Line: n.Line, OnError: OnErrorDrop}
	if id == "" {
		report(n.Line, "needs an id")
	} else if err := CheckName("node id", id); err != nil {
		report(f.line("id"), "%s", strings.TrimPrefix(err.Error(), gateway.ErrInvalid.Error()+": "))
	}
	nd.Next = f.str("next", report)
	nd.Error = f.str("error", report)
	nd.Else = f.str("else", report)
	if f.has("on_error") {
		switch oe := f.str("on_error", report); oe {
		case OnErrorDrop, OnErrorRoute, OnErrorFail:
			nd.OnError = oe
		default:
			report(f.line("on_error"), "on_error %q: want drop, route or fail", oe)
		}
	}
	if nd.OnError == OnErrorRoute && nd.Error == "" {
		report(f.line("on_error"), "on_error: route needs an error output (error: NODE), where the failed messages go")
	}
	if nd.Error != "" && nd.OnError != OnErrorRoute {
		report(f.line("error"), "error: %q is used only with on_error: route (this node's on_error is %s)", nd.Error, nd.OnError)
	}
	nd.Field = "payload"
	if f.has("field") {
		nd.Field = f.str("field", report)
		if nd.Field == "" || strings.HasPrefix(nd.Field, ".") || strings.HasSuffix(nd.Field, ".") || strings.Contains(nd.Field, "..") {
			report(f.line("field"), "field %q: want a message field such as payload or value (dotted for nested: data.speed)", nd.Field)
		}
	}
	g := d.Grant
	switch typ {
	case TypePython:
		parsePython(f, env, d, nd, report)
	case TypeFilter:
		for _, q := range f.strs("quality", report) {
			if q != "Good" && q != "Uncertain" && q != "Bad" {
				if _, err := value.ParseQuality(q); err != nil {
					report(f.line("quality"), "quality %q: want Good, Uncertain, Bad or a quality name (Bad_NotConnected, ...)", q)
					continue
				}
			}
			nd.Quality = append(nd.Quality, q)
		}
		c := &Condition{}
		hasCond := false
		for _, k := range []struct {
			key string
			dst **float64
		}{{"above", &c.Above}, {"below", &c.Below}, {"at_least", &c.AtLeast}, {"at_most", &c.AtMost}} {
			if v, set := f.number(k.key, report); set {
				*k.dst, hasCond = v, true
			}
		}
		for _, k := range []struct {
			key string
			dst *any
			has *bool
		}{{"equals", &c.Equals, &c.HasEquals}, {"not_equals", &c.NotEquals, &c.HasNotEquals}} {
			if v := f.vals[k.key]; v != nil {
				var x any
				if err := v.Decode(&x); err != nil || x == nil {
					report(v.Line, "%s: want a value (a number, text or true/false)", k.key)
					continue
				}
				*k.dst, *k.has, hasCond = x, true, true
			}
		}
		if hasCond {
			nd.Cond = c
		}
		if nd.Cond == nil && len(nd.Quality) == 0 {
			report(n.Line, "a filter needs quality, or a condition on field (above, below, at_least, at_most, equals, not_equals)")
		}
	case TypeTagWrite:
		nd.Path = f.str("path", report)
		if nd.Path != "" {
			if p, err := tagpath.Clean(nd.Path); err != nil {
				report(f.line("path"), "%v", err)
			} else {
				nd.Path = p
			}
		}
		nd.AllowBad = f.boolean("allow_bad_quality", report)
		switch {
		case nd.Path == "":
			report(n.Line, "a tag_write needs the path of the tag it writes")
		case env.Tags != nil && !hasTag(env, nd.Path):
			report(f.line("path"), "tag %q is not a tag of the project", nd.Path)
		case !g.HasScope(auth.TagWrite):
			report(f.line("path"), "writes tag %q, but the flow's grant has no tag:write (grant: {scopes: [tag:read, tag:write], ...})", nd.Path)
		case !g.AllowsPath(nd.Path):
			report(f.line("path"), "tag %q is outside the flow's grant prefixes %q", nd.Path, g.Prefixes)
		case env.Tags != nil && env.Tags[nd.Path].ReadOnly:
			report(f.line("path"), "tag %q is read-only", nd.Path)
		case env.Tags != nil && !g.AllowsLevel(env.Tags[nd.Path].WriteLevel):
			report(f.line("path"), "tag %q needs write level %s; the flow's grant has %s", nd.Path, env.Tags[nd.Path].WriteLevel, g.WriteLevel)
		}
	case TypeMQTTPublish:
		nd.Topic = f.str("topic", report)
		nd.Retain = f.boolean("retain", report)
		if err := checkTopic(nd.Topic, false); err != nil {
			report(f.line("topic"), "%v", err)
		}
		if !env.MQTT {
			report(n.Line, "mqtt_publish needs the supervisor link, which %s", linkWhy(env.MQTTWhy, "is off"))
		}
	case TypeLog:
		nd.Level = "info"
		if f.has("level") {
			nd.Level = f.str("level", report)
			if !slices.Contains([]string{"debug", "info", "warning", "error"}, nd.Level) {
				report(f.line("level"), "level %q: want debug, info, warning or error", nd.Level)
			}
		}
		nd.Message = f.str("message", report)
		nd.Audit = f.boolean("audit", report)
	case TypeMessage:
		nd.Handler = f.str("handler", report)
		if err := gateway.CheckName("message handler", nd.Handler); err != nil {
			report(f.line("handler"), "%s", strings.TrimPrefix(err.Error(), gateway.ErrInvalid.Error()+": "))
		} else if !g.HasScope(auth.ScriptExecute) {
			report(f.line("handler"), "sends message %q, but the flow's grant has no script:execute", nd.Handler)
		}
		if d.Trigger.Kind == TriggerMessage && d.Trigger.Message == nd.Handler {
			report(f.line("handler"), "sends to its own trigger %q (a loop)", nd.Handler)
		}
	case TypeEnd:
		if nd.Next != "" {
			report(f.line("next"), "an end node has no next")
		}
	}
	return nd
}

func hasTag(env Env, path string) bool { _, ok := env.Tags[path]; return ok }

func parsePython(f *fields, env Env, d *Def, nd *NodeDef, report func(int, string, ...any)) {
	var srcs []string
	for _, k := range []string{"code", "file", "entry"} {
		if f.has(k) {
			srcs = append(srcs, k)
		}
	}
	if len(srcs) != 1 {
		report(nd.Line, "a python node needs exactly one of code, file, entry; has %s", orNone(srcs))
		return
	}
	nd.Timeout = f.duration("timeout", report)
	switch srcs[0] {
	case "code":
		nd.Code = f.str("code", report)
	case "file":
		nd.File = f.str("file", report)
		if env.Dir == "" {
			report(f.line("file"), "file: is for flows of the project file; a flow pushed on its own carries its code (code: |)")
			return
		}
		path := nd.File
		if !filepath.IsAbs(path) {
			path = filepath.Join(env.Dir, path)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			report(f.line("file"), "%v", err)
			return
		}
		nd.Code = string(b)
	case "entry":
		nd.Entry = f.str("entry", report)
		module, entry, err := gateway.ParseEntry(nd.Entry)
		if err != nil {
			report(f.line("entry"), "entry %q: want module.function of a saved script", nd.Entry)
			return
		}
		if env.Scripts != nil {
			entries, ok := env.Scripts[module]
			if ok && !slices.Contains(entries, entry) {
				report(f.line("entry"), "script %q has no top-level function %s(msg)", module, entry)
			}
		}
		return
	}
	if len(nd.Code) > MaxCode {
		report(nd.Line, "code of %d bytes: at most %d", len(nd.Code), MaxCode)
	} else if !topDefRe.MatchString(nd.Code) {
		report(nd.Line, "the code defines no transform(msg) at top level (def transform(msg): ... returning a message, a list of messages or None)")
	}
}
