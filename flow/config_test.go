package flow

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"qubiq.dev/edge/auth"
)

func testEnv() Env {
	return Env{
		Tags: map[string]TagFacts{
			"Line1/In": {WriteLevel: auth.LevelOperate}, "Line1/Out": {WriteLevel: auth.LevelOperate},
			"Line1/Guarded": {WriteLevel: auth.LevelSupervise}, "Line1/ReadOnly": {ReadOnly: true},
			"Line2/Other": {WriteLevel: auth.LevelOperate},
		},
		Scripts:  map[string][]string{"pumps": {"transform", "start"}},
		Handlers: []string{"batch_done"},
	}
}

func parseSection(t *testing.T, src string, env Env) ([]*Def, error) {
	t.Helper()
	var nodes []yaml.Node
	if err := yaml.Unmarshal([]byte(src), &nodes); err != nil {
		t.Fatalf("YAML: %v", err)
	}
	return ParseSection("project.yaml", nodes, env)
}

const goodFlows = `
- name: scale
  description: raw counts to rpm
  trigger: {tag: Line1/In, deadband: 0.5}
  only_good: true
  queue: 10
  overflow: drop_newest
  grant: {scopes: [tag:read, tag:write], write_level: operate, prefixes: [Line1]}
  nodes:
    - id: good
      type: filter
      quality: Good
      next: scale
    - id: scale
      type: python
      timeout: 2s
      on_error: route
      error: alert
      next: write
      code: |
        def transform(msg):
            msg["payload"] = msg["value"] * 0.1
            return msg
    - {id: write, type: tag_write, path: Line1/Out, next: done}
    - {id: alert, type: log, level: warning, message: "scale failed: {error.message}"}
    - {id: done, type: end}
- name: tick
  trigger: {cron: "*/5 * * * *"}
  nodes:
    - {id: n, type: python, entry: pumps.transform}
- name: on-batch
  trigger: {message: batch_finished}
  nodes:
    - {id: high, type: filter, field: payload.count, above: 10, else: low}
    - {id: low, type: log}
`

func TestParse_GoodFlows(t *testing.T) {
	defs, err := parseSection(t, goodFlows, testEnv())
	if err != nil {
		t.Fatal(err)
	}
	if len(defs) != 3 {
		t.Fatalf("%d flows", len(defs))
	}
	d := defs[0]
	if d.Name != "scale" || d.Line != 2 || d.QueueSize != 10 || d.Overflow != DropNewest || !d.OnlyGood {
		t.Errorf("flow %+v", d)
	}
	if d.Trigger.Kind != TriggerTag || d.Trigger.Deadband != 0.5 || d.Trigger.String() != "tag Line1/In (deadband 0.5)" {
		t.Errorf("trigger %+v %q", d.Trigger, d.Trigger.String())
	}
	if !d.Grant.HasScope(auth.TagWrite) || d.Grant.WriteLevel != auth.LevelOperate || d.Grant.Prefixes[0] != "Line1" {
		t.Errorf("grant %+v", d.Grant)
	}
	py := d.ByID["scale"]
	if py.Timeout != 2*time.Second || py.OnError != OnErrorRoute || py.Error != "alert" || !strings.Contains(py.Code, "def transform") {
		t.Errorf("python node %+v", py)
	}
	var order []string
	for _, n := range d.Order {
		order = append(order, n.ID)
	}
	if order[0] != "good" || order[len(order)-1] == "good" {
		t.Errorf("order %v: the first node must come first", order)
	}
	pos := map[string]int{}
	for i, id := range order {
		pos[id] = i
	}
	if !(pos["scale"] < pos["write"] && pos["write"] < pos["done"] && pos["scale"] < pos["alert"]) {
		t.Errorf("order %v is not topological", order)
	}
	if defs[1].Trigger.Cron == nil || defs[1].Trigger.String() != "timer cron */5 * * * *" {
		t.Errorf("cron trigger %+v", defs[1].Trigger)
	}
	if g := defs[1].Grant; len(g.Scopes) != 1 || g.Scopes[0] != auth.TagRead || g.WriteLevel != auth.LevelView {
		t.Errorf("default grant %+v, want tag:read at view", g)
	}
	if c := defs[2].ByID["high"]; c.Field != "payload.count" || c.Cond == nil || *c.Cond.Above != 10 || c.Else != "low" {
		t.Errorf("filter %+v", c)
	}
	if !strings.Contains(string(d.Doc), "name: scale") {
		t.Errorf("doc %s", d.Doc)
	}
}

// TestParse_Problems: each problem names the file, its line, the flow and
// the node, and says what is wrong.
func TestParse_Problems(t *testing.T) {
	env := testEnv()
	tests := []struct {
		name, src, want string
	}{
		{"unknown key", `
- name: f
  trigger: {tag: Line1/In}
  colour: red
  nodes: [{id: a, type: end}]`, `project.yaml:4: flow "f": unknown key "colour" (valid keys: name, description`},
		{"no trigger", `
- name: f
  nodes: [{id: a, type: end}]`, `project.yaml:2: flow "f": needs a trigger`},
		{"two triggers", `
- name: f
  trigger: {tag: Line1/In, every: 1s}
  nodes: [{id: a, type: end}]`, `want exactly one of tag (or tags), every, cron, message, mqtt, alarm; have tag and every`},
		{"unknown tag", `
- name: f
  trigger: {tag: Line1/Nope}
  nodes: [{id: a, type: end}]`, `project.yaml:3: flow "f": trigger: tag "Line1/Nope" is not a tag of the project`},
		{"tag outside prefixes", `
- name: f
  trigger: {tag: Line2/Other}
  grant: {scopes: [tag:read], prefixes: [Line1]}
  nodes: [{id: a, type: end}]`, `tag "Line2/Other" is outside the flow's grant prefixes ["Line1"]`},
		{"alarm trigger without alarm:read", `
- name: f
  trigger: {alarm: Line1}
  nodes: [{id: a, type: end}]`, `project.yaml:3: flow "f": an alarm trigger needs the alarm:read scope in the flow's grant`},
		{"bad cron", `
- name: f
  trigger: {cron: "61 * * * *"}
  nodes: [{id: a, type: end}]`, `minute field "61"`},
		{"bad name", `
- name: 9lives
  trigger: {every: 1s}
  nodes: [{id: a, type: end}]`, `project.yaml:2: flow "9lives": name "9lives": want a letter`},
		{"route without error", `
- name: f
  trigger: {every: 1s}
  nodes:
    - id: p
      type: python
      on_error: route
      code: "def transform(msg):\n    return msg\n"`, `project.yaml:7: flow "f": node "p": on_error: route needs an error output`},
		{"error without route", `
- name: f
  trigger: {every: 1s}
  nodes:
    - {id: p, type: python, error: q, code: "def transform(msg):\n    return msg\n"}
    - {id: q, type: end}`, `node "p": error: "q" is used only with on_error: route (this node's on_error is drop)`},
		{"bad on_error", `
- name: f
  trigger: {every: 1s}
  nodes:
    - {id: p, type: python, on_error: retry, code: "def transform(msg):\n    return msg\n"}`, `on_error "retry": want drop, route or fail`},
		{"no transform", `
- name: f
  trigger: {every: 1s}
  nodes:
    - {id: p, type: python, code: "def other(msg):\n    return msg\n"}`, `node "p": the code defines no transform(msg) at top level`},
		{"two sources", `
- name: f
  trigger: {every: 1s}
  nodes:
    - {id: p, type: python, entry: pumps.transform, code: "x"}`, `needs exactly one of code, file, entry; has code and entry`},
		{"unknown entry", `
- name: f
  trigger: {every: 1s}
  nodes:
    - {id: p, type: python, entry: pumps.nope}`, `script "pumps" has no top-level function nope(msg)`},
		{"next to nowhere", `
- name: f
  trigger: {every: 1s}
  nodes:
    - {id: a, type: log, next: b}`, `node "a": next: no node "b" in this flow (have: a)`},
		{"loop", `
- name: f
  trigger: {every: 1s}
  nodes:
    - {id: a, type: log, next: b}
    - {id: b, type: log, next: a}`, `is part of a loop`},
		{"unreachable", `
- name: f
  trigger: {every: 1s}
  nodes:
    - {id: a, type: end}
    - {id: b, type: end}`, `node "b": no message can reach it`},
		{"write without tag:write", `
- name: f
  trigger: {every: 1s}
  nodes:
    - {id: w, type: tag_write, path: Line1/Out}`, `node "w": writes tag "Line1/Out", but the flow's grant has no tag:write`},
		{"write above level", `
- name: f
  trigger: {every: 1s}
  grant: {scopes: [tag:write], write_level: operate}
  nodes:
    - {id: w, type: tag_write, path: Line1/Guarded}`, `tag "Line1/Guarded" needs write level supervise; the flow's grant has operate`},
		{"write read-only", `
- name: f
  trigger: {every: 1s}
  grant: {scopes: [tag:write], write_level: design}
  nodes:
    - {id: w, type: tag_write, path: Line1/ReadOnly}`, `tag "Line1/ReadOnly" is read-only`},
		{"mqtt publish with the link off", `
- name: f
  trigger: {every: 1s}
  nodes:
    - {id: p, type: mqtt_publish, topic: alerts/pump}`, `project.yaml:5: flow "f": node "p": mqtt_publish needs the supervisor link, which is off`},
		{"mqtt trigger with the link off", `
- name: f
  trigger: {mqtt: plant/+/cmd}
  nodes: [{id: a, type: end}]`, `an mqtt trigger needs the supervisor link, which is off`},
		{"alarm trigger without alarms", `
- name: f
  trigger: {alarm: Line1}
  nodes: [{id: a, type: end}]`, `an alarm trigger needs alarm transitions`},
		{"message shadowed by a handler", `
- name: f
  trigger: {message: batch_done}
  nodes: [{id: a, type: end}]`, `message "batch_done" is one of the project's message_handlers`},
		{"only_good on a timer", `
- name: f
  trigger: {every: 1s}
  only_good: true
  nodes: [{id: a, type: end}]`, `only_good applies to tag and alarm triggers`},
		{"queue too big", `
- name: f
  trigger: {every: 1s}
  queue: 1000000
  nodes: [{id: a, type: end}]`, `queue "1000000": want a whole number from 1 to 100000`},
		{"bad scope", `
- name: f
  trigger: {every: 1s}
  grant: {scopes: [tag:all]}
  nodes: [{id: a, type: end}]`, `grant: unknown scope "tag:all"`},
		{"permissions refused", `
- name: f
  trigger: {every: 1s}
  grant: {permissions: [designer]}
  nodes: [{id: a, type: end}]`, `grant: unknown key "permissions"`},
		{"filter without a test", `
- name: f
  trigger: {every: 1s}
  nodes: [{id: a, type: filter}]`, `a filter needs quality, or a condition`},
		{"duplicate", `
- name: f
  trigger: {every: 1s}
  nodes: [{id: a, type: end}]
- name: f
  trigger: {every: 2s}
  nodes: [{id: a, type: end}]`, `project.yaml:5: flow "f" defined twice (first at line 2)`},
		{"unknown node type", `
- name: f
  trigger: {every: 1s}
  nodes: [{id: a, type: switch}]`, `node "a": type "switch": want one of python, filter, tag_write`},
		{"publish with wildcard", `
- name: f
  trigger: {every: 1s}
  nodes: [{id: a, type: mqtt_publish, topic: "a/+"}]`, `+ and # are for subscriptions`},
		// MQTT 3.1.1 §1.5.3; the broker would close the link's connection
		// at each attempt (tagpath.CheckTopicText).
		{"publish topic with a tab", `
- name: f
  trigger: {every: 1s}
  nodes: [{id: a, type: mqtt_publish, topic: "out/op\t1"}]`, `topic "out/op\t1": byte 6: control character U+0009 cannot be in an MQTT topic`},
		{"trigger filter with a DEL", `
- name: f
  trigger: {mqtt: "in/set\x7f"}
  nodes: [{id: a, type: end}]`, `byte 6: control character U+007F cannot be in an MQTT topic`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseSection(t, tt.src, env)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v\nwant one containing %q", err, tt.want)
			}
		})
	}
}

func TestParse_FileResolvesAgainstTheProject(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "scale.py"), []byte("def transform(msg):\n    return msg\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := testEnv()
	env.Dir = dir
	src := `
- name: f
  trigger: {every: 1s}
  nodes: [{id: p, type: python, file: scale.py}]`
	defs, err := parseSection(t, src, env)
	if err != nil || !strings.Contains(defs[0].Nodes[0].Code, "def transform") {
		t.Fatalf("%v %+v", err, defs)
	}
	env.Dir = ""
	if _, err := parseSection(t, src, env); err == nil || !strings.Contains(err.Error(), "carries its code") {
		t.Errorf("file: in a pushed flow: %v", err)
	}
}

func TestParseDoc_NameFromTheRoute(t *testing.T) {
	doc := `{"trigger": {"every": "1s"}, "nodes": [{"id": "a", "type": "end"}]}`
	d, err := ParseDoc("pushed", []byte(doc), testEnv())
	if err != nil || d.Name != "pushed" {
		t.Fatalf("%+v %v", d, err)
	}
	if _, err := ParseDoc("other", []byte(`{"name": "pushed", "trigger": {"every": "1s"}, "nodes": [{"id": "a", "type": "end"}]}`), testEnv()); err == nil ||
		!strings.Contains(err.Error(), `names flow "pushed", the request "other"`) {
		t.Errorf("name mismatch: %v", err)
	}
}
