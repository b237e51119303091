package flow

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/gateway"
	"qubiq.dev/edge/tagpath"
	"qubiq.dev/edge/value"
)

// The nodes of a flow definition: each type's keys, the graph's checks
// (every output names a node, no loop, every node reachable) and the
// topological order the engine runs them in.

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
