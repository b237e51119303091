package config

import (
	"slices"
	"testing"
)

// TestDiffProjects_MQTTPublishChangeIsASection: a changed mqtt_publish
// section is reported (it applies at the next start), an unchanged one not.
func TestDiffProjects_MQTTPublishChangeIsASection(t *testing.T) {
	parse := func(s string) *Project {
		p, err := ParseProject([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	a := parse("mqtt_publish:\n  rules:\n    - {prefix: Line1, mode: change}\n")
	b := parse("mqtt_publish:\n  rules:\n    - {prefix: Line1, mode: off}\n")
	if d := DiffProjects(a, b); !slices.Contains(d.Sections, "mqtt_publish") {
		t.Errorf("sections %v; want mqtt_publish", d.Sections)
	}
	if d := DiffProjects(a, parse("mqtt_publish:\n  rules: [{prefix: Line1, mode: change}]\n")); slices.Contains(d.Sections, "mqtt_publish") {
		t.Errorf("the same rules in another style reported as changed: %v", d.Sections)
	}
}
