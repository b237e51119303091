// Package liveview holds the LiveView operator panel: the embedded browser
// assets (static/: HTML, CSS and JavaScript modules written by hand, no
// CDN, no build step, so a panel works air-gapped) and the project's
// `views:` section, parsed and checked against the project's tags and
// scripts. docs/liveview.md is the reference of the section (cards,
// button bars, switches, trends, alarm lists, the alarm banner); in short:
//
//	views:
//	  - name: pump1                  # letters, digits, _ and -; in the URL (/liveview/#pump1) and the audit origin (liveview:pump1)
//	    title: Pump 1                # default: name
//	    min_level: view              # lowest operator level that may open it: view (default), operate, supervise; platform users always may
//	    events: 20                   # recent audit events of the panel listed (default 20, 0 = none, at most 200)
//	    widgets:
//	      - {type: value, tag: Line1/Pump/Speed, label: Speed, units: rpm, decimals: 1}
//	      - {type: numeric, tag: Line1/Pump/Setpoint, label: Setpoint, min: 0, max: 1500, step: 10}
//	      - {type: boolean, tag: Line1/Pump/Run, label: Run, on_label: Running, off_label: Stopped,
//	         buttons: [{label: Reset, entry: pumps.reset}]}
//	      - {type: buttons, label: Pump, buttons: [{label: Start, entry: pumps.start, args: {line: 1}, confirm: "Start pump 1?"}]}
//	      - {type: trend, tags: [Line1/Pump/Speed, {tag: Line1/Pump/Run, label: Running}], label: Speed, window: 10m}
//	      - {type: alarms, prefix: Line1, label: Line 1 alarms, limit: 20}
//
// Every tag must be a tag of the project; a button's entry must be listed
// in its script's `liveview` list (the script author's consent) and is then
// exposed to the sessions that may open the view; one entry has one button
// per view (its args come from the view). Unknown keys are errors naming
// the key and the line. label defaults to the tag's description, else the
// tag's name (the last segment of its path); units to the tag's units; a
// trend's window to 10 min (at most 24 h).
//
// Package liveview imports api/apitypes, auth and yaml.v3 only; package api
// serves it and the daemon parses the project's views with it.
package liveview

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"qubiq.dev/edge/api/apitypes"
	"qubiq.dev/edge/auth"
)

// Tag is what a view needs of one tag of the project: its units, type
// (bool, int16, ... float64, string), description and device.
type Tag struct {
	Units       string
	Type        string
	Description string
	Device      string
}

// Project is what Parse checks views against: the project's tags (path →
// Tag) and, per script module, the entries its `liveview` list exposes.
type Project struct {
	Tags    map[string]Tag
	Entries map[string][]string
}

// Defaults and bounds of the views section.
const (
	DefaultEvents     = 20
	MaxEvents         = 200
	DefaultWindow     = 10 * time.Minute
	MinWindow         = 10 * time.Second
	MaxWindow         = 24 * time.Hour
	DefaultAlarmLimit = 20
	MaxAlarmLimit     = 200
	// MaxDefaultLabel is the longest tag description used as a default
	// label (in runes); a longer one gives the tag's name instead.
	MaxDefaultLabel = 48
)

// AlarmPage is the URL fragment of the panel's alarm list
// (/liveview/#alarms); no view may take it as its name.
const AlarmPage = "alarms"

var viewName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)

// yamlView is the YAML shape of one view (see the package doc).
type yamlView struct {
	Name     string      `yaml:"name"`
	Title    string      `yaml:"title"`
	MinLevel string      `yaml:"min_level"`
	Events   *int        `yaml:"events"`
	Widgets  []yaml.Node `yaml:"widgets"`
}

var viewKeys = []string{"name", "title", "min_level", "events", "widgets"}

// checkKeys refuses keys of the mapping n outside allowed, naming the key
// and its line.
func checkKeys(n *yaml.Node, what string, allowed []string) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: %s: want a mapping", n.Line, what)
	}
	var errs []error
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if !slices.Contains(allowed, k.Value) {
			errs = append(errs, fmt.Errorf("line %d: %s: unknown key %q (want one of %s)", k.Line, what, k.Value, strings.Join(allowed, ", ")))
		}
	}
	return errors.Join(errs...)
}

func keyOf(n *yaml.Node, key string) string {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1].Value
		}
	}
	return ""
}

// Parse decodes and checks the project's views. Every error found is
// returned, each naming the view, the widget and the line.
func Parse(nodes []yaml.Node, p Project) ([]apitypes.View, error) {
	var errs []error
	var out []apitypes.View
	seen := map[string]int{}
	for i := range nodes {
		n := &nodes[i]
		where := fmt.Sprintf("views[%d]", i)
		if name := keyOf(n, "name"); name != "" {
			where = fmt.Sprintf("view %q", name)
		}
		if err := checkKeys(n, where, viewKeys); err != nil {
			errs = append(errs, err)
			continue
		}
		var yv yamlView
		if err := n.Decode(&yv); err != nil {
			errs = append(errs, fmt.Errorf("line %d: %s: %w", n.Line, where, err))
			continue
		}
		v, verrs := parseView(n, where, yv, p)
		if line, dup := seen[v.Name]; dup && v.Name != "" {
			verrs = append(verrs, fmt.Errorf("line %d: %s: name already used by the view at line %d", n.Line, where, line))
		}
		seen[v.Name] = n.Line
		errs = append(errs, verrs...)
		out = append(out, v)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

func parseView(n *yaml.Node, where string, yv yamlView, p Project) (apitypes.View, []error) {
	var errs []error
	bad := func(line int, format string, args ...any) {
		errs = append(errs, fmt.Errorf("line %d: %s: %s", line, where, fmt.Sprintf(format, args...)))
	}
	v := apitypes.View{Name: yv.Name, Title: yv.Title, MinLevel: yv.MinLevel, Events: DefaultEvents}
	if !viewName.MatchString(yv.Name) {
		bad(n.Line, "name %q: want letters, digits, _ or - (at most 64, starting with a letter or digit)", yv.Name)
	}
	if yv.Name == AlarmPage {
		bad(n.Line, "name %q is the panel's alarm list (/liveview/#%s): choose another", yv.Name, AlarmPage)
	}
	if v.Title == "" {
		v.Title = v.Name
	}
	if v.MinLevel == "" {
		v.MinLevel = auth.LevelView.String()
	}
	if l, err := auth.ParseLevel(v.MinLevel); err != nil || l > auth.LevelSupervise {
		bad(n.Line, "min_level %q: want view, operate or supervise", yv.MinLevel)
	}
	if yv.Events != nil {
		v.Events = *yv.Events
		if v.Events < 0 || v.Events > MaxEvents {
			bad(n.Line, "events %d: want 0 to %d", v.Events, MaxEvents)
		}
	}
	if len(yv.Widgets) == 0 {
		bad(n.Line, "no widgets")
	}
	entries := map[string]int{} // entry → line of its button
	for j := range yv.Widgets {
		wn := &yv.Widgets[j]
		w, werrs := parseWidget(wn, fmt.Sprintf("%s widgets[%d]", where, j), p)
		errs = append(errs, werrs...)
		for _, b := range widgetButtons(w) {
			if line, dup := entries[b.Entry]; dup {
				bad(wn.Line, "entry %s already has a button in this view (line %d): a press runs with the args of its view's button, so each entry has one", b.Entry, line)
			}
			entries[b.Entry] = wn.Line
		}
		v.Widgets = append(v.Widgets, w)
	}
	return v, errs
}

// widgetButtons returns the buttons of w: itself for a button widget, else
// its own.
func widgetButtons(w apitypes.Widget) []apitypes.Button {
	if w.Type == apitypes.WidgetButton {
		return []apitypes.Button{{Label: w.Label, Entry: w.Entry, Args: w.Args, Confirm: w.Confirm}}
	}
	return w.Buttons
}

// MayOpen reports whether a session of realm at level may open v: the
// platform realm always; an operator at v.MinLevel or above; nobody else
// (anonymous sessions are not offered by this build).
func MayOpen(v apitypes.View, realm auth.Realm, level auth.Level) bool {
	switch realm {
	case auth.RealmPlatform:
		return true
	case auth.RealmOperator:
		min, err := auth.ParseLevel(v.MinLevel)
		return err == nil && level >= min
	}
	return false
}

// Button returns the button of v bound to module.entry, if any: a button
// widget, or a button of a bar or a card.
func Button(v apitypes.View, module, entry string) (apitypes.Button, bool) {
	for _, w := range v.Widgets {
		for _, b := range widgetButtons(w) {
			if b.Entry == module+"."+entry {
				return b, true
			}
		}
	}
	return apitypes.Button{}, false
}

// Paths returns every tag path v shows, once each, in order.
func Paths(v apitypes.View) []string {
	var out []string
	add := func(p string) {
		if p != "" && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	for _, w := range v.Widgets {
		add(w.Tag)
		for _, t := range w.Tags {
			add(t)
		}
	}
	return out
}
