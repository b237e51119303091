package alarm

import (
	"strings"
	"testing"
	"time"

	"qubiq.dev/edge/auth"
)

func TestParse_Defaults(t *testing.T) {
	insts, err := parseDefs(t, "- {name: High, tag: Line1/Tank/Level, mode: above, setpoint: 90}\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(insts) != 1 || insts[0].ID != "Line1/Tank/Level:High" || insts[0].Units != "%" {
		t.Fatalf("instances %+v", insts)
	}
	d := insts[0].Def
	if d.Priority != PriorityMedium || d.AckMode != AckManual || d.AckLevel != auth.LevelOperate ||
		d.ShelveLevel != auth.LevelSupervise || d.Latching || d.Line != 2 {
		t.Errorf("defaults %+v", d)
	}
}

func TestParse_AllKeys(t *testing.T) {
	insts, err := parseDefs(t, `- name: High
  tag: Line1/Tank/Level
  mode: above
  setpoint: {tag: Line1/Tank/HighSP}
  deadband: {percent: 5}
  active_delay: 2s
  clear_delay: 500ms
  priority: critical
  ack_mode: manual
  latching: true
  display_path: Tank 1 / High level
  message: "Tank level high: {value:.1f} {units}"
  ack_level: supervise
  shelve_level: design
  suppressed_by: Line1/Unit/Stopped
  out_of_service: false
  chattering: {count: 5, window: 2m}
`)
	if err != nil {
		t.Fatal(err)
	}
	d := insts[0].Def
	if d.Setpoint.Tag != "Line1/Tank/HighSP" || !d.Deadband.Percent || d.Deadband.Value != 5 || d.ActiveDelay != 2*time.Second ||
		d.ClearDelay != 500*time.Millisecond || d.Priority != PriorityCritical || !d.Latching || d.DisplayPath != "Tank 1 / High level" ||
		d.AckLevel != auth.LevelSupervise || d.ShelveLevel != auth.LevelDesign || d.SuppressedBy != "Line1/Unit/Stopped" ||
		d.Chattering != (Chattering{5, 2 * time.Minute}) {
		t.Errorf("parsed %+v", d)
	}
	if got := render(d.msg, msgArgs{value: 93.25, units: "%"}); got != "Tank level high: 93.2 %" {
		t.Errorf("message %q", got)
	}
}

func TestParse_Prefix(t *testing.T) {
	insts, err := parseDefs(t, "- {name: Hot, prefix: Line1/Tank, mode: above, setpoint: 80}\n")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, in := range insts {
		ids = append(ids, in.ID)
	}
	// Numeric tags under Line1/Tank, whole segments; a tag the alarm reads
	// as a limit is not a source.
	if strings.Join(ids, " ") != "Line1/Tank/HighSP:Hot Line1/Tank/Level:Hot Line1/Tank/Temp:Hot" {
		t.Errorf("prefix gave %v", ids)
	}
	if _, err := parseDefs(t, "- {name: Hot, prefix: Line1/Ta, mode: above, setpoint: 80}\n"); err == nil ||
		!strings.Contains(err.Error(), `prefix "Line1/Ta" matches no tag mode above can watch (it needs a numeric tag)`) {
		t.Errorf("partial segment: %v", err)
	}
}

func TestParse_Errors(t *testing.T) {
	tests := []struct {
		name, section, want string
	}{
		{"deadband on a bool", "- {name: S, tag: Line1/Pump/Running, mode: state, deadband: 1}\n",
			`project.yaml:2: alarm "S": a deadband applies to numeric limits; mode state (a bool, state or quality) takes none`},
		{"delay below zero", "- name: H\n  tag: Line1/Tank/Level\n  mode: above\n  setpoint: 90\n  active_delay: -1s\n",
			`project.yaml:6: alarm "H": active_delay: -1s is below zero`},
		{"unknown setpoint tag", "- {name: H, tag: Line1/Tank/Level, mode: above, setpoint: {tag: Line1/Tank/Nope}}\n",
			`project.yaml:2: alarm "H": unknown setpoint tag "Line1/Tank/Nope"`},
		{"unknown tag", "- {name: H, tag: Line9/X, mode: above, setpoint: 1}\n", `unknown tag "Line9/X"`},
		{"unknown key", "- name: H\n  tag: Line1/Tank/Level\n  mode: above\n  setpoint: 1\n  setpiont: 2\n",
			`project.yaml:6: alarm "H": setpiont: unknown key`},
		{"unknown mode", "- {name: H, tag: Line1/Tank/Level, mode: higher}\n", `unknown mode "higher"`},
		{"unknown priority", "- {name: H, tag: Line1/Tank/Level, mode: above, setpoint: 1, priority: urgent}\n", `unknown priority "urgent"`},
		{"unknown level", "- {name: H, tag: Line1/Tank/Level, mode: above, setpoint: 1, ack_level: boss}\n", `ack_level: unknown level "boss"`},
		{"missing setpoint", "- {name: H, tag: Line1/Tank/Level, mode: above}\n", "mode above needs setpoint"},
		{"setpoint on a state", "- {name: H, tag: Line1/Pump/Running, mode: state, setpoint: 1}\n", "mode state takes no setpoint"},
		{"low above high", "- {name: B, tag: Line1/Tank/Level, mode: between, low: 5, high: 1}\n", "low 5 must be below high 1"},
		{"outside band eaten", "- {name: B, tag: Line1/Tank/Level, mode: outside, low: 0, high: 10, deadband: 5}\n", "leaves no normal band"},
		{"numeric mode on a bool", "- {name: H, tag: Line1/Pump/Running, mode: above, setpoint: 1}\n", `mode above needs a numeric tag; "Line1/Pump/Running" is bool`},
		{"string setpoint tag", "- {name: H, tag: Line1/Tank/Level, mode: above, setpoint: {tag: Line1/Name}}\n", `setpoint tag "Line1/Name" is string, not a number`},
		{"bit on a float", "- {name: F, tag: Line1/Tank/Level, mode: state, bit: 2}\n", "mode state needs a bool or integer tag"},
		{"latching with auto", "- {name: H, tag: Line1/Tank/Level, mode: above, setpoint: 1, latching: true, ack_mode: auto}\n", "latching needs ack_mode manual"},
		{"unknown placeholder", "- {name: H, tag: Line1/Tank/Level, mode: above, setpoint: 1, message: 'high {valeu}'}\n", "unknown placeholder {valeu}"},
		{"unknown suppressor", "- {name: H, tag: Line1/Tank/Level, mode: above, setpoint: 1, suppressed_by: Line1/X}\n", `unknown suppressed_by tag "Line1/X"`},
		{"rate without rate", "- {name: R, tag: Line1/Tank/Level, mode: rate}\n", "mode rate needs rate"},
		{"equals without value", "- {name: E, tag: Line1/Pump/Mode, mode: equals}\n", "mode equals needs equals"},
		{"bad name", "- {name: 'a:b', tag: Line1/Tank/Level, mode: above, setpoint: 1}\n", `name "a:b"`},
		{"tag and prefix", "- {name: H, tag: Line1/Tank/Level, prefix: Line1, mode: above, setpoint: 1}\n", "give tag or prefix, not both"},
		{"defined twice", "- {name: H, tag: Line1/Tank/Level, mode: above, setpoint: 1}\n- {name: H, tag: Line1/Tank/Level, mode: below, setpoint: 0}\n",
			`project.yaml:3: alarm "H": alarm "Line1/Tank/Level:H" is defined twice (first at line 2)`},
		{"negative deadband", "- {name: H, tag: Line1/Tank/Level, mode: above, setpoint: 1, deadband: -2}\n", "deadband: -2 must not be negative"},
		{"chattering count", "- {name: H, tag: Line1/Tank/Level, mode: above, setpoint: 1, chattering: {count: 1}}\n", "count: want a whole number"},
		{"not a mapping", "- just a string\n", "project.yaml:2: alarm #1: want a mapping"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseDefs(t, tt.section)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v\nwant it to contain %q", err, tt.want)
			}
		})
	}
}

func TestParse_EveryProblemReported(t *testing.T) {
	_, err := parseDefs(t, `- {name: A, tag: Line9/X, mode: above, setpoint: 1}
- {name: B, tag: Line1/Tank/Level, mode: above, setpoint: 1, clear_delay: -3s}
`)
	if err == nil || !strings.Contains(err.Error(), "project.yaml:2:") || !strings.Contains(err.Error(), "project.yaml:3:") {
		t.Errorf("want both problems: %v", err)
	}
}

func TestParseSettings(t *testing.T) {
	s, err := ParseSettings(nil)
	if err != nil || s.MaxShelve != 24*time.Hour || s.Chattering != (Chattering{3, time.Minute}) {
		t.Fatalf("defaults %+v %v", s, err)
	}
	n := yamlNode(t, "journal: {max_age: 7d, max_bytes: 16MiB}\nchattering: {count: 4, window: 30s}\nmax_shelve: 8h\n")
	s, err = ParseSettings(n)
	if err != nil || s.JournalMaxAge != 7*24*time.Hour || s.JournalMaxBytes != 16<<20 || s.Chattering != (Chattering{4, 30 * time.Second}) || s.MaxShelve != 8*time.Hour {
		t.Errorf("parsed %+v %v", s, err)
	}
	n = yamlNode(t, "journal: {max_age: unlimited}\n")
	if s, err := ParseSettings(n); err != nil || s.JournalMaxAge != 0 || s.JournalMaxBytes != 256<<20 {
		t.Errorf("unlimited age: %+v %v", s, err)
	}
	n = yamlNode(t, "max_shelf: 8h\n")
	if _, err := ParseSettings(n); err == nil || !strings.Contains(err.Error(), "line 1: alarms.max_shelf: unknown key") {
		t.Errorf("unknown key: %v", err)
	}
}

// TestValidName_TheRule: letters and digits of any script, _ . - and
// inner spaces, at most 64 characters; no ':' or '/', no leading space.
func TestValidName_TheRule(t *testing.T) {
	long := strings.Repeat("é", 64)
	for name, want := range map[string]bool{
		"High": true, "Tank 1 high": true, "Füllstand_hoch-2.a": true, "水位": true, "٣": true, long: true,
		"": false, " High": false, "a:b": false, "a/b": false, long + "x": false, "a\tb": false, "a\xffb": false,
		"-x": true, ".x": true, "_": true,
	} {
		if got := validName(name); got != want {
			t.Errorf("validName(%q) = %v, want %v", name, got, want)
		}
	}
}
