package liveview

import (
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"qubiq.dev/edge/api/apitypes"
	"qubiq.dev/edge/auth"
)

var project = Project{
	Tags:    map[string]string{"Line1/Speed": "rpm", "Line1/Setpoint": "rpm", "Line1/Run": ""},
	Entries: map[string][]string{"pumps": {"start", "stop"}},
}

func parse(t *testing.T, src string) ([]apitypes.View, error) {
	t.Helper()
	var doc struct {
		Views []yaml.Node `yaml:"views"`
	}
	if err := yaml.Unmarshal([]byte(src), &doc); err != nil {
		t.Fatal(err)
	}
	return Parse(doc.Views, project)
}

func TestParse_FullView(t *testing.T) {
	vs, err := parse(t, `
views:
  - name: pump1
    title: Pump 1
    min_level: operate
    events: 7
    widgets:
      - {type: value, tag: Line1/Speed, decimals: 1}
      - {type: numeric, tag: Line1/Setpoint, label: Setpoint, min: 0, max: 1500, step: 10}
      - {type: boolean, tag: Line1/Run, label: Run}
      - {type: button, label: Start, entry: pumps.start, args: {line: 1, fast: true}, confirm: "Start pump 1?"}
      - {type: trend, tags: [Line1/Speed, Line1/Setpoint], window: 5m}
  - name: small
    widgets: [{type: value, tag: Line1/Run}]
`)
	if err != nil {
		t.Fatal(err)
	}
	v := vs[0]
	if v.Name != "pump1" || v.Title != "Pump 1" || v.MinLevel != "operate" || v.Events != 7 || len(v.Widgets) != 5 {
		t.Fatalf("view %+v", v)
	}
	w := v.Widgets
	if w[0].Label != "Line1/Speed" || w[0].Units != "rpm" || *w[0].Decimals != 1 {
		t.Errorf("value widget %+v", w[0])
	}
	if *w[1].Min != 0 || *w[1].Max != 1500 || *w[1].Step != 10 {
		t.Errorf("numeric widget %+v", w[1])
	}
	if w[3].Entry != "pumps.start" || string(w[3].Args) != `{"fast":true,"line":1}` || w[3].Confirm != "Start pump 1?" {
		t.Errorf("button %+v args %s", w[3], w[3].Args)
	}
	if w[4].WindowS != 300 || len(w[4].Tags) != 2 {
		t.Errorf("trend %+v", w[4])
	}
	if s := vs[1]; s.Title != "small" || s.MinLevel != "view" || s.Events != DefaultEvents {
		t.Errorf("defaults %+v", s)
	}
	if got := Paths(v); strings.Join(got, ",") != "Line1/Speed,Line1/Setpoint,Line1/Run" {
		t.Errorf("Paths = %v", got)
	}
	if _, ok := Button(v, "pumps", "start"); !ok {
		t.Error("Button(pumps.start) not found")
	}
	if _, ok := Button(v, "pumps", "stop"); ok {
		t.Error("Button(pumps.stop) found; the view has none")
	}
}

func TestParse_Errors(t *testing.T) {
	cases := []struct{ name, src, want string }{
		{"unknown view key", "views: [{name: a, colour: red, widgets: [{type: value, tag: Line1/Run}]}]", `unknown key "colour"`},
		{"unknown widget key", "views: [{name: a, widgets: [{type: value, tag: Line1/Run, min: 1}]}]", `unknown key "min"`},
		{"unknown tag", "views: [{name: a, widgets: [{type: value, tag: Line9/X}]}]", `tag "Line9/X" is not a tag of the project`},
		{"entry not exposed", "views: [{name: a, widgets: [{type: button, entry: pumps.purge}]}]", `not in the liveview list of script "pumps"`},
		{"unknown module", "views: [{name: a, widgets: [{type: button, entry: valves.open}]}]", `no script module "valves"`},
		{"bad entry", "views: [{name: a, widgets: [{type: button, entry: start}]}]", `want module.entry`},
		{"widget type", "views: [{name: a, widgets: [{type: gauge, tag: Line1/Run}]}]", `type "gauge"`},
		{"min level", "views: [{name: a, min_level: design, widgets: [{type: value, tag: Line1/Run}]}]", `min_level "design"`},
		{"duplicate", "views: [{name: a, widgets: [{type: value, tag: Line1/Run}]}, {name: a, widgets: [{type: value, tag: Line1/Run}]}]", "already used"},
		{"bad name", "views: [{name: 'a b', widgets: [{type: value, tag: Line1/Run}]}]", `name "a b"`},
		{"no widgets", "views: [{name: a}]", "no widgets"},
		{"min above max", "views: [{name: a, widgets: [{type: numeric, tag: Line1/Setpoint, min: 5, max: 1}]}]", "not below max"},
		{"trend window", "views: [{name: a, widgets: [{type: trend, tags: [Line1/Speed], window: 2d}]}]", `window "2d"`},
		{"events", "views: [{name: a, events: 500, widgets: [{type: value, tag: Line1/Run}]}]", "events 500"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(t, tc.src)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "line 1") {
				t.Fatalf("err = %v, want one naming %q and the line", err, tc.want)
			}
		})
	}
}

func TestMayOpen_Table(t *testing.T) {
	v := apitypes.View{MinLevel: "operate"}
	cases := []struct {
		realm auth.Realm
		level auth.Level
		want  bool
	}{
		{auth.RealmPlatform, auth.LevelNone, true},
		{auth.RealmOperator, auth.LevelView, false},
		{auth.RealmOperator, auth.LevelOperate, true},
		{auth.RealmOperator, auth.LevelSupervise, true},
		{auth.RealmAnonymous, auth.LevelNone, false},
		{"partner", auth.LevelSupervise, false},
	}
	for _, c := range cases {
		if got := MayOpen(v, c.realm, c.level); got != c.want {
			t.Errorf("MayOpen(%s, %s) = %v, want %v", c.realm, c.level, got, c.want)
		}
	}
}
