package liveview

import (
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"qubiq.dev/edge/api/apitypes"
	"qubiq.dev/edge/auth"
)

var project = Project{
	Tags: map[string]Tag{
		"Line1/Speed":    {Units: "rpm", Type: "float32", Device: "plc1", Description: "Pump speed"},
		"Line1/Setpoint": {Units: "rpm", Type: "float64", Device: "sim"},
		"Line1/Run":      {Type: "bool", Device: "plc1"},
		"Line1/Mode":     {Type: "uint16", Device: "plc1"},
		"Line1/Name":     {Type: "string", Device: "sim"},
	},
	Entries: map[string][]string{"pumps": {"start", "stop", "reset"}},
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
	if w[0].Label != "Pump speed" || w[0].Units != "rpm" || *w[0].Decimals != 1 || w[0].Device != "plc1" || w[0].TagType != "float32" {
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

func TestParse_ButtonBarsAndCardButtons(t *testing.T) {
	vs, err := parse(t, `
views:
  - name: a
    widgets:
      - {type: boolean, tag: Line1/Run, on_label: Running, off_label: Stopped, confirm: "Change the pump?",
         buttons: [{label: Reset, entry: pumps.reset}]}
      - type: buttons
        label: Pump
        buttons:
          - {label: Start, entry: pumps.start, args: {line: 1}, confirm: "Start?"}
          - {entry: pumps.stop}
`)
	if err != nil {
		t.Fatal(err)
	}
	w := vs[0].Widgets
	if w[0].Label != "Run" || w[0].OnLabel != "Running" || w[0].OffLabel != "Stopped" || len(w[0].Buttons) != 1 || w[0].Buttons[0].Entry != "pumps.reset" {
		t.Errorf("switch card %+v", w[0])
	}
	bar := w[1]
	if bar.Type != "buttons" || bar.Label != "Pump" || len(bar.Buttons) != 2 || string(bar.Buttons[0].Args) != `{"line":1}` ||
		bar.Buttons[0].Confirm != "Start?" || bar.Buttons[1].Label != "pumps.stop" {
		t.Errorf("bar %+v", bar)
	}
	for _, e := range []string{"start", "stop", "reset"} {
		if _, ok := Button(vs[0], "pumps", e); !ok {
			t.Errorf("Button(pumps.%s) not found in a bar or a card", e)
		}
	}
	if b, _ := Button(vs[0], "pumps", "start"); string(b.Args) != `{"line":1}` {
		t.Errorf("Button(pumps.start) args %s", b.Args)
	}
}

func TestParse_TrendSeries(t *testing.T) {
	vs, err := parse(t, `
views:
  - name: a
    widgets:
      - {type: trend, tags: [Line1/Speed, Line1/Run, Line1/Mode, {tag: Line1/Setpoint, label: SP, step: true}], window: 8h, min: 0, max: 1500}
      - {type: trend, tags: [Line1/Setpoint], step: true}
`)
	if err != nil {
		t.Fatal(err)
	}
	tr := vs[0].Widgets[0]
	want := []apitypes.TrendSeries{
		{Tag: "Line1/Speed", Label: "Pump speed", Units: "rpm", Device: "plc1", Step: false},
		{Tag: "Line1/Run", Label: "Run", Device: "plc1", Step: true},
		{Tag: "Line1/Mode", Label: "Mode", Device: "plc1", Step: true},
		{Tag: "Line1/Setpoint", Label: "SP", Units: "rpm", Device: "sim", Step: true},
	}
	if len(tr.Series) != len(want) {
		t.Fatalf("series %+v", tr.Series)
	}
	for i := range want {
		if tr.Series[i] != want[i] {
			t.Errorf("series[%d] = %+v, want %+v", i, tr.Series[i], want[i])
		}
	}
	if tr.WindowS != 8*3600 || *tr.Min != 0 || *tr.Max != 1500 || strings.Join(tr.Tags, ",") != "Line1/Speed,Line1/Run,Line1/Mode,Line1/Setpoint" {
		t.Errorf("trend %+v", tr)
	}
	if tr.Label != "Pump speed, Run, Mode, SP" {
		t.Errorf("default label %q: want the series labels, never paths", tr.Label)
	}
	if s := vs[0].Widgets[1].Series[0]; !s.Step {
		t.Errorf("step: true on the trend does not step its float tag: %+v", s)
	}
}

func TestParse_AlarmList(t *testing.T) {
	vs, err := parse(t, `views: [{name: a, widgets: [{type: alarms, prefix: Line1}, {type: alarms, label: All, limit: 5}]}]`)
	if err != nil {
		t.Fatal(err)
	}
	if w := vs[0].Widgets[0]; w.Prefix != "Line1" || w.Limit != DefaultAlarmLimit || w.Label != "Alarms of Line1" {
		t.Errorf("alarm list %+v", w)
	}
	if w := vs[0].Widgets[1]; w.Prefix != "" || w.Limit != 5 || w.Label != "All" {
		t.Errorf("alarm list %+v", w)
	}
}

func TestParse_NewWidgetErrors(t *testing.T) {
	cases := []struct{ name, src, want string }{
		{"empty bar", "views: [{name: a, widgets: [{type: buttons, label: X}]}]", "needs buttons"},
		{"bar button key", "views: [{name: a, widgets: [{type: buttons, buttons: [{entry: pumps.start, colour: red}]}]}]", `unknown key "colour"`},
		{"bar entry not exposed", "views: [{name: a, widgets: [{type: buttons, buttons: [{entry: pumps.purge}]}]}]", `not in the liveview list`},
		{"card entry not exposed", "views: [{name: a, widgets: [{type: value, tag: Line1/Run, buttons: [{entry: pumps.purge}]}]}]", `not in the liveview list`},
		{"entry twice", "views: [{name: a, widgets: [{type: button, entry: pumps.start}, {type: buttons, buttons: [{entry: pumps.start, args: {x: 1}}]}]}]", "already has a button"},
		{"switch on a float", "views: [{name: a, widgets: [{type: boolean, tag: Line1/Speed}]}]", "needs a bool or integer tag"},
		{"trend string tag", "views: [{name: a, widgets: [{type: trend, tags: [Line1/Name]}]}]", "is a string"},
		{"trend tag twice", "views: [{name: a, widgets: [{type: trend, tags: [Line1/Run, Line1/Run]}]}]", "twice"},
		{"trend series key", "views: [{name: a, widgets: [{type: trend, tags: [{tag: Line1/Run, colour: red}]}]}]", `unknown key "colour"`},
		{"trend step", "views: [{name: a, widgets: [{type: trend, tags: [Line1/Run], step: 5}]}]", "want true or false"},
		{"numeric step", "views: [{name: a, widgets: [{type: numeric, tag: Line1/Setpoint, step: -1}]}]", "want a number > 0"},
		{"alarm prefix", "views: [{name: a, widgets: [{type: alarms, prefix: Line9}]}]", `prefix "Line9"`},
		{"alarm prefix segment", "views: [{name: a, widgets: [{type: alarms, prefix: Line}]}]", `prefix "Line"`},
		{"alarm limit", "views: [{name: a, widgets: [{type: alarms, limit: 0}]}]", "limit 0"},
		{"reserved name", "views: [{name: alarms, widgets: [{type: alarms}]}]", "alarm list"},
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
