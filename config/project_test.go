package config

import (
	"strings"
	"testing"
)

// TestParseProject_NotImplementedSectionsRefused: a project with flows is
// refused naming the section and its line, with the other problems of
// the same document; an empty section is accepted. The alarms section is
// kept for package alarm, which checks it.
func TestParseProject_NotImplementedSectionsRefused(t *testing.T) {
	p, err := ParseProject([]byte("devices: []\nflows:\n  - {name: f1}\nalarms: [{tag: A}]\ncolour: red\n"))
	if p == nil || err == nil {
		t.Fatalf("project %v, err %v", p, err)
	}
	for _, want := range []string{`line 2: section "flows": flows`, "colour"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if strings.Contains(err.Error(), `section "alarms"`) {
		t.Errorf("the alarms section is refused: %v", err)
	}
	if len(p.Flows) != 0 {
		t.Errorf("refused section kept: %v", p.Flows)
	}
	if len(p.Alarms) != 1 || p.Alarms[0].Line != 4 {
		t.Errorf("alarms section not kept with its lines: %v", p.Alarms)
	}
	if _, err := ParseProject([]byte("devices: []\nflows: []\n")); err != nil {
		t.Errorf("an empty flows section: %v", err)
	}
}
