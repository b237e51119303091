package config

import (
	"strings"
	"testing"
)

// TestParseProject_NotImplementedSectionsRefused: a project with flows or
// alarms is refused naming the section and its line, with the other
// problems of the same document; an empty section is accepted.
func TestParseProject_NotImplementedSectionsRefused(t *testing.T) {
	p, err := ParseProject([]byte("devices: []\nflows:\n  - {name: f1}\nalarms: [{tag: A}]\ncolour: red\n"))
	if p == nil || err == nil {
		t.Fatalf("project %v, err %v", p, err)
	}
	for _, want := range []string{`line 2: section "flows": flows`, `line 4: section "alarms": alarms`, "colour"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if len(p.Flows) != 0 || len(p.Alarms) != 0 {
		t.Errorf("refused sections kept: %v %v", p.Flows, p.Alarms)
	}
	if _, err := ParseProject([]byte("devices: []\nflows: []\n")); err != nil {
		t.Errorf("an empty flows section: %v", err)
	}
}
