package config

import (
	"strings"
	"testing"
)

// TestParseProject_PartSectionsKeptWithLines: the flows and alarms sections
// are kept, with their lines, for the parts that check them (package flow,
// package alarm); an unknown key beside them is still an error; empty
// sections are accepted.
func TestParseProject_PartSectionsKeptWithLines(t *testing.T) {
	p, err := ParseProject([]byte("devices: []\nflows:\n  - {name: f1}\nalarms: [{tag: A}]\ncolour: red\n"))
	if p == nil || err == nil {
		t.Fatalf("project %v, err %v", p, err)
	}
	for _, want := range []string{"colour"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if strings.Contains(err.Error(), `section "flows"`) || strings.Contains(err.Error(), `section "alarms"`) {
		t.Errorf("an implemented section refused: %v", err)
	}
	if len(p.Alarms) != 1 || p.Alarms[0].Line != 4 {
		t.Errorf("alarms section not kept with its lines: %v", p.Alarms)
	}
	if len(p.Flows) != 1 || p.Flows[0].Line != 3 {
		t.Errorf("flows %v (want the entry, with its line), alarms %v", p.Flows, p.Alarms)
	}
	if _, err := ParseProject([]byte("devices: []\nflows: []\nalarms: []\n")); err != nil {
		t.Errorf("empty sections: %v", err)
	}
}
