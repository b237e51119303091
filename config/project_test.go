package config

import (
	"strings"
	"testing"
)

// TestParseProject_NotImplementedSectionsRefused: a project with alarms is
// refused naming the section and its line, with the other problems of the
// same document; an empty section is accepted. The flows section is kept
// for the flow engine, which checks it.
func TestParseProject_NotImplementedSectionsRefused(t *testing.T) {
	p, err := ParseProject([]byte("devices: []\nflows:\n  - {name: f1}\nalarms: [{tag: A}]\ncolour: red\n"))
	if p == nil || err == nil {
		t.Fatalf("project %v, err %v", p, err)
	}
	for _, want := range []string{`line 4: section "alarms": alarms`, "colour"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if strings.Contains(err.Error(), `section "flows"`) {
		t.Errorf("flows refused: %v", err)
	}
	if len(p.Flows) != 1 || p.Flows[0].Line != 3 || len(p.Alarms) != 0 {
		t.Errorf("flows %v (want the entry, with its line), alarms %v", p.Flows, p.Alarms)
	}
	if _, err := ParseProject([]byte("devices: []\nflows: []\nalarms: []\n")); err != nil {
		t.Errorf("empty sections: %v", err)
	}
}
