// Package liveview holds the LiveView operator panel: the embedded browser
// assets (static/: HTML, CSS and JavaScript written by hand, no CDN, no
// build step, so a panel works air-gapped) and the project's `views:`
// section, parsed and checked against the project's tags and scripts.
//
// # The views section (project file)
//
//	views:
//	  - name: pump1                  # letters, digits, _ and -; in the URL (/liveview/#pump1) and the audit origin (liveview:pump1)
//	    title: Pump 1                # default: name
//	    min_level: view              # lowest operator level that may open it: view (default), operate, supervise; platform users always may
//	    events: 20                   # recent audit events of the panel listed (default 20, 0 = none, at most 200)
//	    widgets:
//	      - {type: value, tag: Line1/Pump/Speed, label: Speed, units: rpm, decimals: 1}
//	      - {type: numeric, tag: Line1/Pump/Setpoint, label: Setpoint, min: 0, max: 1500, step: 10}
//	      - {type: boolean, tag: Line1/Pump/Run, label: Run}
//	      - {type: button, label: Start, entry: pumps.start, args: {line: 1}, confirm: "Start pump 1?"}
//	      - {type: trend, tags: [Line1/Pump/Speed], label: Speed, window: 10m}
//
// Every tag must be a tag of the project; a button's entry must be listed
// in its script's `liveview` list (the script author's consent) and is then
// exposed to the sessions that may open the view. Unknown keys are errors
// naming the key and the line. label defaults to the tag path (or the
// entry); units to the tag's units; a trend's window to 10 min (at most
// 24 h).
//
// Package liveview imports api/apitypes, auth and yaml.v3 only; package api
// serves it and the daemon parses the project's views with it.
package liveview

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"qubiq.dev/edge/api/apitypes"
	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/internal/yamlnode"
)

// Project is what Parse checks views against: the project's tags (path →
// units) and, per script module, the entries its `liveview` list exposes.
type Project struct {
	Tags    map[string]string
	Entries map[string][]string
}

// Defaults and bounds of the views section.
const (
	DefaultEvents = 20
	MaxEvents     = 200
	DefaultWindow = 10 * time.Minute
	MaxWindow     = 24 * time.Hour
)

var viewName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)

// yamlView and yamlWidget are the YAML shapes (see the package doc).
type yamlView struct {
	Name     string      `yaml:"name"`
	Title    string      `yaml:"title"`
	MinLevel string      `yaml:"min_level"`
	Events   *int        `yaml:"events"`
	Widgets  []yaml.Node `yaml:"widgets"`
}

type yamlWidget struct {
	Type     string    `yaml:"type"`
	Label    string    `yaml:"label"`
	Tag      string    `yaml:"tag"`
	Tags     []string  `yaml:"tags"`
	Units    string    `yaml:"units"`
	Decimals *int      `yaml:"decimals"`
	Min      *float64  `yaml:"min"`
	Max      *float64  `yaml:"max"`
	Step     *float64  `yaml:"step"`
	Entry    string    `yaml:"entry"`
	Args     yaml.Node `yaml:"args"`
	Confirm  string    `yaml:"confirm"`
	Window   string    `yaml:"window"`
}

var (
	viewKeys   = []string{"name", "title", "min_level", "events", "widgets"}
	widgetKeys = map[string][]string{
		apitypes.WidgetValue:   {"type", "label", "tag", "units", "decimals"},
		apitypes.WidgetNumeric: {"type", "label", "tag", "units", "decimals", "min", "max", "step"},
		apitypes.WidgetBoolean: {"type", "label", "tag"},
		apitypes.WidgetButton:  {"type", "label", "entry", "args", "confirm"},
		apitypes.WidgetTrend:   {"type", "label", "tags", "window"},
	}
)

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
	for j := range yv.Widgets {
		w, werrs := parseWidget(&yv.Widgets[j], fmt.Sprintf("%s widgets[%d]", where, j), p)
		errs = append(errs, werrs...)
		v.Widgets = append(v.Widgets, w)
	}
	return v, errs
}

func parseWidget(n *yaml.Node, where string, p Project) (apitypes.Widget, []error) {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("line %d: %s: %s", n.Line, where, fmt.Sprintf(format, args...)))
	}
	typ := keyOf(n, "type")
	allowed, ok := widgetKeys[typ]
	if !ok {
		bad("type %q: want value, numeric, boolean, button or trend", typ)
		return apitypes.Widget{}, errs
	}
	if err := checkKeys(n, where, allowed); err != nil {
		return apitypes.Widget{}, []error{err}
	}
	var yw yamlWidget
	if err := n.Decode(&yw); err != nil {
		bad("%v", err)
		return apitypes.Widget{}, errs
	}
	w := apitypes.Widget{Type: typ, Label: yw.Label, Tag: yw.Tag, Units: yw.Units, Decimals: yw.Decimals,
		Min: yw.Min, Max: yw.Max, Step: yw.Step, Confirm: yw.Confirm}
	checkTag := func(path string) {
		units, ok := p.Tags[path]
		switch {
		case path == "":
			bad("missing tag")
		case !ok:
			bad("tag %q is not a tag of the project", path)
		case w.Units == "" && w.Type != apitypes.WidgetTrend:
			w.Units = units
		}
	}
	switch typ {
	case apitypes.WidgetValue, apitypes.WidgetNumeric, apitypes.WidgetBoolean:
		checkTag(yw.Tag)
		if w.Label == "" {
			w.Label = yw.Tag
		}
		if w.Decimals != nil && (*w.Decimals < 0 || *w.Decimals > 9) {
			bad("decimals %d: want 0 to 9", *w.Decimals)
		}
		if w.Min != nil && w.Max != nil && *w.Min >= *w.Max {
			bad("min %v is not below max %v", *w.Min, *w.Max)
		}
		if w.Step != nil && *w.Step <= 0 {
			bad("step %v: want > 0", *w.Step)
		}
	case apitypes.WidgetButton:
		module, entry, ok := strings.Cut(yw.Entry, ".")
		switch {
		case !ok || module == "" || entry == "":
			bad("entry %q: want module.entry", yw.Entry)
		case p.Entries[module] == nil:
			bad("entry %q: no script module %q in the project's scripts", yw.Entry, module)
		case !slices.Contains(p.Entries[module], entry):
			bad("entry %q: not in the liveview list of script %q (%s), so no panel may start it",
				yw.Entry, module, strings.Join(p.Entries[module], ", "))
		}
		w.Entry = yw.Entry
		if w.Label == "" {
			w.Label = yw.Entry
		}
		if yw.Args.Kind != 0 {
			var a any
			if err := yw.Args.Decode(&a); err != nil {
				bad("args: %v", err)
			} else if b, err := json.Marshal(yamlnode.JSONable(a)); err != nil {
				bad("args: %v", err)
			} else {
				w.Args = b
			}
		}
	case apitypes.WidgetTrend:
		if len(yw.Tags) == 0 {
			bad("missing tags")
		}
		for _, t := range yw.Tags {
			checkTag(t)
		}
		w.Tags = yw.Tags
		if w.Label == "" {
			w.Label = strings.Join(yw.Tags, ", ")
		}
		win := DefaultWindow
		if yw.Window != "" {
			d, err := time.ParseDuration(yw.Window)
			if err != nil || d < 10*time.Second || d > MaxWindow {
				bad("window %q: want a duration from 10s to 24h", yw.Window)
			} else {
				win = d
			}
		}
		w.WindowS = int(win / time.Second)
	}
	return w, errs
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

// Button returns the button widget of v bound to module.entry, if any.
func Button(v apitypes.View, module, entry string) (apitypes.Widget, bool) {
	for _, w := range v.Widgets {
		if w.Type == apitypes.WidgetButton && w.Entry == module+"."+entry {
			return w, true
		}
	}
	return apitypes.Widget{}, false
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
