package flow

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/gateway"
	"qubiq.dev/edge/tagpath"
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
	// MaxQueueBytes is the most a flow's waiting messages may hold, in
	// bytes (their texts and JSON), whatever its queue's size.
	MaxQueueBytes = 64 << 20
	// DefaultQueue is the queue of a flow that names none.
	DefaultQueue = 100
	// MaxCode is the largest Python node, in bytes.
	MaxCode = 256 << 10
	// MaxVersion is the highest version number a push may give a flow
	// (what the store numbers versions with).
	MaxVersion = 1<<31 - 1
	// MaxNesting is the deepest a message may nest (objects and arrays
	// within each other, the message itself the first level).
	MaxNesting = 100
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

var flowKeys = []string{"name", "description", "trigger", "only_good", "queue", "overflow", "grant", "nodes"}

// ParseSection parses the project's flows: entries (file names the project
// file in messages). Every problem of every flow is reported; the flows
// without problems are returned.
func ParseSection(file string, nodes []yaml.Node, env Env) ([]*Def, error) {
	var out []*Def
	var errs []error
	seen := map[string]int{}
	messages := map[string]*Def{} // message trigger → the flow taking it
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
		if d.Trigger.Kind == TriggerMessage {
			if other := messages[d.Trigger.Message]; other != nil {
				errs = append(errs, fmt.Errorf("%s:%d: flow %q: message %q is already the trigger of flow %q (line %d); a message goes to one flow",
					file, d.Trigger.Line, d.Name, d.Trigger.Message, other.Name, other.Line))
				continue
			}
			messages[d.Trigger.Message] = d
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
	if d.Trigger.Kind == TriggerAlarm && !d.Grant.HasScope(auth.AlarmRead) {
		top(f.line("trigger"), "an alarm trigger needs the %s scope in the flow's grant (grant: {scopes: [tag:read, %s]}): without it no transition reaches the flow", auth.AlarmRead, auth.AlarmRead)
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
	if err := tagpath.CheckTopicText(t); err != nil {
		return fmt.Errorf("topic %q: %w", t, err)
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

// CoverSection refuses (the *auth.DeniedError of auth.Grant.Covers) a
// project flows: section holding a flow whose grant is wider than g, the
// importer's (docs/flows.md, "Grants"). Each grant is read as Parse reads
// it, whatever else is wrong with its flow and whatever the environment:
// a flow that fails to parse here for a reason of its own (a link the
// checking side does not know, a tag not yet imported) is still checked,
// so it cannot carry a wider grant past the importer into the next start.
func CoverSection(g auth.Grant, nodes []yaml.Node) error {
	ignore := func(int, string, ...any) {}
	for i := range nodes {
		n := &nodes[i]
		f, ok := mapping(n, flowKeys, ignore)
		if !ok {
			continue // not a flow at all: Parse refuses it, nothing runs
		}
		name := "flow"
		if nn := f.vals["name"]; nn != nil && nn.Kind == yaml.ScalarNode {
			name = "flow " + nn.Value
		}
		if err := g.Covers(parseGrant(f, ignore), name); err != nil {
			return err
		}
	}
	return nil
}
