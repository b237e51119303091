package liveview

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"qubiq.dev/edge/api/apitypes"
	"qubiq.dev/edge/internal/yamlnode"
)

// yamlWidget is the YAML shape of one widget (docs/liveview.md). Step is a
// node: a number on a numeric control (the increment), a bool on a trend
// (draw in steps).
type yamlWidget struct {
	Type     string      `yaml:"type"`
	Label    string      `yaml:"label"`
	Tag      string      `yaml:"tag"`
	Tags     []yaml.Node `yaml:"tags"`
	Units    string      `yaml:"units"`
	Decimals *int        `yaml:"decimals"`
	Min      *float64    `yaml:"min"`
	Max      *float64    `yaml:"max"`
	Step     yaml.Node   `yaml:"step"`
	OnLabel  string      `yaml:"on_label"`
	OffLabel string      `yaml:"off_label"`
	Entry    string      `yaml:"entry"`
	Args     yaml.Node   `yaml:"args"`
	Confirm  string      `yaml:"confirm"`
	Buttons  []yaml.Node `yaml:"buttons"`
	Window   string      `yaml:"window"`
	Prefix   string      `yaml:"prefix"`
	Limit    *int        `yaml:"limit"`
}

// yamlButton is one button of a bar or a card; yamlSeries one tag of a
// trend written as a mapping.
type yamlButton struct {
	Label   string    `yaml:"label"`
	Entry   string    `yaml:"entry"`
	Args    yaml.Node `yaml:"args"`
	Confirm string    `yaml:"confirm"`
}

type yamlSeries struct {
	Tag   string `yaml:"tag"`
	Label string `yaml:"label"`
	Step  *bool  `yaml:"step"`
}

var (
	widgetKeys = map[string][]string{
		apitypes.WidgetValue:   {"type", "label", "tag", "units", "decimals", "on_label", "off_label", "buttons"},
		apitypes.WidgetNumeric: {"type", "label", "tag", "units", "decimals", "min", "max", "step", "buttons"},
		apitypes.WidgetBoolean: {"type", "label", "tag", "on_label", "off_label", "confirm", "buttons"},
		apitypes.WidgetButton:  {"type", "label", "entry", "args", "confirm"},
		apitypes.WidgetButtons: {"type", "label", "buttons"},
		apitypes.WidgetTrend:   {"type", "label", "tags", "window", "step", "min", "max", "units", "decimals"},
		apitypes.WidgetAlarms:  {"type", "label", "prefix", "limit"},
	}
	buttonKeys = []string{"label", "entry", "args", "confirm"}
	seriesKeys = []string{"tag", "label", "step"}
)

// defaultLabel is a tag's label when the view gives none: its short
// description, else its name (the last segment of its path).
func defaultLabel(path string, t Tag) string {
	if d := strings.TrimSpace(t.Description); d != "" && utf8.RuneCountInString(d) <= MaxDefaultLabel && !strings.Contains(d, "\n") {
		return d
	}
	return path[strings.LastIndexByte(path, '/')+1:]
}

// discrete reports whether a tag type changes in steps (bool and the
// integer types): its trend is drawn as steps, never as slopes between
// samples.
func discrete(typ string) bool {
	return typ == "bool" || strings.HasPrefix(typ, "int") || strings.HasPrefix(typ, "uint")
}

func parseWidget(n *yaml.Node, where string, p Project) (apitypes.Widget, []error) {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("line %d: %s: %s", n.Line, where, fmt.Sprintf(format, args...)))
	}
	typ := keyOf(n, "type")
	allowed, ok := widgetKeys[typ]
	if !ok {
		bad("type %q: want value, numeric, boolean, button, buttons, trend or alarms", typ)
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
		Min: yw.Min, Max: yw.Max, Confirm: yw.Confirm, OnLabel: yw.OnLabel, OffLabel: yw.OffLabel}
	lookup := func(path string) (Tag, bool) {
		t, ok := p.Tags[path]
		switch {
		case path == "":
			bad("missing tag")
		case !ok:
			bad("tag %q is not a tag of the project", path)
		}
		return t, ok
	}
	if w.Decimals != nil && (*w.Decimals < 0 || *w.Decimals > 9) {
		bad("decimals %d: want 0 to 9", *w.Decimals)
	}
	if w.Min != nil && w.Max != nil && *w.Min >= *w.Max {
		bad("min %v is not below max %v", *w.Min, *w.Max)
	}
	for i := range yw.Buttons {
		b, berrs := parseButton(&yw.Buttons[i], fmt.Sprintf("%s buttons[%d]", where, i), p, true)
		errs = append(errs, berrs...)
		w.Buttons = append(w.Buttons, b)
	}
	switch typ {
	case apitypes.WidgetValue, apitypes.WidgetNumeric, apitypes.WidgetBoolean:
		if t, ok := lookup(yw.Tag); ok {
			if w.Units == "" {
				w.Units = t.Units
			}
			if w.Label == "" {
				w.Label = defaultLabel(yw.Tag, t)
			}
			w.Device, w.TagType = t.Device, t.Type
			if typ == apitypes.WidgetBoolean && t.Type != "" && t.Type != "bool" && !discrete(t.Type) {
				bad("tag %q is a %s: a switch needs a bool or integer tag", yw.Tag, t.Type)
			}
		}
		if w.Label == "" {
			w.Label = yw.Tag
		}
		if typ == apitypes.WidgetNumeric && yw.Step.Kind != 0 {
			var st float64
			if err := yw.Step.Decode(&st); err != nil || st <= 0 {
				bad("step %s: want a number > 0", yw.Step.Value)
			} else {
				w.Step = &st
			}
		}
	case apitypes.WidgetButton:
		b, berrs := parseButton(n, where, p, false)
		errs = append(errs, berrs...)
		w.Label, w.Entry, w.Args = b.Label, b.Entry, b.Args
	case apitypes.WidgetButtons:
		if len(w.Buttons) == 0 {
			bad("a button bar needs buttons")
		}
	case apitypes.WidgetTrend:
		errs = append(errs, parseTrend(&w, yw, where, n.Line, p)...)
	case apitypes.WidgetAlarms:
		w.Prefix = strings.Trim(yw.Prefix, "/")
		if w.Prefix != "" && !underAny(p.Tags, w.Prefix) {
			bad("prefix %q: no tag of the project is at or under it", w.Prefix)
		}
		w.Limit = DefaultAlarmLimit
		if yw.Limit != nil {
			w.Limit = *yw.Limit
			if w.Limit < 1 || w.Limit > MaxAlarmLimit {
				bad("limit %d: want 1 to %d", w.Limit, MaxAlarmLimit)
			}
		}
		if w.Label == "" {
			w.Label = "Alarms"
			if w.Prefix != "" {
				w.Label = "Alarms of " + w.Prefix
			}
		}
	}
	return w, errs
}

// underAny reports whether a tag of tags is prefix or under it (whole
// segments: Line1 holds Line1/X, not Line10/X).
func underAny(tags map[string]Tag, prefix string) bool {
	for path := range tags {
		if path == prefix || strings.HasPrefix(path, prefix+"/") {
			return true
		}
	}
	return false
}

// parseTrend fills the trend's tags, series and window.
func parseTrend(w *apitypes.Widget, yw yamlWidget, where string, line int, p Project) []error {
	var errs []error
	bad := func(l int, format string, args ...any) {
		errs = append(errs, fmt.Errorf("line %d: %s: %s", l, where, fmt.Sprintf(format, args...)))
	}
	var allStep bool
	if yw.Step.Kind != 0 {
		if err := yw.Step.Decode(&allStep); err != nil {
			bad(yw.Step.Line, "step %q: want true or false on a trend", yw.Step.Value)
		}
	}
	if len(yw.Tags) == 0 {
		bad(line, "missing tags")
	}
	for i := range yw.Tags {
		tn := &yw.Tags[i]
		var ys yamlSeries
		switch tn.Kind {
		case yaml.ScalarNode:
			ys.Tag = tn.Value
		case yaml.MappingNode:
			if err := checkKeys(tn, fmt.Sprintf("%s tags[%d]", where, i), seriesKeys); err != nil {
				errs = append(errs, err)
				continue
			}
			if err := tn.Decode(&ys); err != nil {
				bad(tn.Line, "tags[%d]: %v", i, err)
				continue
			}
		default:
			bad(tn.Line, "tags[%d]: want a tag path or {tag, label, step}", i)
			continue
		}
		t, ok := p.Tags[ys.Tag]
		switch {
		case ys.Tag == "":
			bad(tn.Line, "tags[%d]: missing tag", i)
			continue
		case !ok:
			bad(tn.Line, "tag %q is not a tag of the project", ys.Tag)
			continue
		case t.Type == "string":
			bad(tn.Line, "tag %q is a string: a trend draws numbers and bools", ys.Tag)
		case slices.Contains(w.Tags, ys.Tag):
			bad(tn.Line, "tag %q is on this trend twice", ys.Tag)
		}
		s := apitypes.TrendSeries{Tag: ys.Tag, Label: ys.Label, Units: t.Units, Device: t.Device, Step: allStep || discrete(t.Type)}
		if ys.Step != nil {
			s.Step = *ys.Step
		}
		if s.Label == "" {
			s.Label = defaultLabel(ys.Tag, t)
		}
		if w.Units != "" {
			s.Units = w.Units
		}
		w.Tags = append(w.Tags, ys.Tag)
		w.Series = append(w.Series, s)
	}
	if w.Label == "" {
		labels := make([]string, len(w.Series))
		for i, s := range w.Series {
			labels[i] = s.Label
		}
		w.Label = strings.Join(labels, ", ")
	}
	win := DefaultWindow
	if yw.Window != "" {
		d, err := time.ParseDuration(yw.Window)
		if err != nil || d < MinWindow || d > MaxWindow {
			bad(line, "window %q: want a duration from 10s to 24h", yw.Window)
		} else {
			win = d
		}
	}
	w.WindowS = int(win / time.Second)
	return errs
}

// parseButton checks one button (own: a button of a bar or card, whose
// keys are checked here; else a button widget, checked as a widget): its entry must be listed in its script's
// liveview list; its args are fixed JSON.
func parseButton(n *yaml.Node, where string, p Project, own bool) (apitypes.Button, []error) {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("line %d: %s: %s", n.Line, where, fmt.Sprintf(format, args...)))
	}
	var yb yamlButton
	if own {
		if err := checkKeys(n, where, buttonKeys); err != nil {
			return apitypes.Button{}, []error{err}
		}
	}
	if err := n.Decode(&yb); err != nil {
		bad("%v", err)
		return apitypes.Button{}, errs
	}
	module, entry, ok := strings.Cut(yb.Entry, ".")
	switch {
	case !ok || module == "" || entry == "":
		bad("entry %q: want module.entry", yb.Entry)
	case p.Entries[module] == nil:
		bad("entry %q: no script module %q in the project's scripts", yb.Entry, module)
	case !slices.Contains(p.Entries[module], entry):
		bad("entry %q: not in the liveview list of script %q (%s), so no panel may start it",
			yb.Entry, module, strings.Join(p.Entries[module], ", "))
	}
	b := apitypes.Button{Label: yb.Label, Entry: yb.Entry, Confirm: yb.Confirm}
	if b.Label == "" {
		b.Label = yb.Entry
	}
	if yb.Args.Kind != 0 {
		var a any
		if err := yb.Args.Decode(&a); err != nil {
			bad("args: %v", err)
		} else if raw, err := json.Marshal(yamlnode.JSONable(a)); err != nil {
			bad("args: %v", err)
		} else {
			b.Args = raw
		}
	}
	return b, errs
}
