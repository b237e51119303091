package config

import (
	"strings"
	"testing"
)

// min and max reach the engine's tag; every problem with them is named,
// with the tag's line.
func TestEngineTags_Limits(t *testing.T) {
	p, err := ParseProject([]byte(`devices: [{name: sim, driver: sim}]
tags:
  - {path: A/Setpoint, device: sim, address: memory, type: float64, min: -10, max: 10}
  - {path: A/Floor, device: sim, address: memory, type: int32, min: 0}
`))
	if err != nil {
		t.Fatal(err)
	}
	tags, err := p.EngineTags()
	if err != nil {
		t.Fatal(err)
	}
	if tags[0].Min == nil || *tags[0].Min != -10 || tags[0].Max == nil || *tags[0].Max != 10 {
		t.Errorf("A/Setpoint limits %v %v, want -10 and 10", tags[0].Min, tags[0].Max)
	}
	if tags[1].Min == nil || *tags[1].Min != 0 || tags[1].Max != nil {
		t.Errorf("A/Floor limits %v %v, want min 0 and no max", tags[1].Min, tags[1].Max)
	}
	p, err = ParseProject([]byte(`devices: [{name: sim, driver: sim}]
tags:
  - {path: A/Inverted, device: sim, address: memory, type: float64, min: 10, max: 5}
  - {path: A/Flag, device: sim, address: memory, type: bool, max: 1}
`))
	if err == nil {
		_, err = p.EngineTags()
	}
	for _, want := range []string{`:3: tag "A/Inverted": min 10 is above max 5`, `:4: tag "A/Flag": min and max apply to numbers, not to a bool tag`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, want %q", err, want)
		}
	}
	if _, err := ParseProject([]byte("tags:\n  - {path: A/T, device: sim, address: memory, max: high}\n")); err == nil ||
		!strings.Contains(err.Error(), `line 2: tag key "max": want a number, got the text "high"`) {
		t.Errorf("max: high: err = %v", err)
	}
}

func TestTagsCSV_Limits(t *testing.T) {
	tags, err := ParseTagsCSV([]byte("path,device,address,type,min,max\nA/B,sim,memory,float64,-1.5,99\nA/C,sim,memory,float64,,7\n"))
	if err != nil {
		t.Fatal(err)
	}
	if *tags[0].Min != -1.5 || *tags[0].Max != 99 || tags[1].Min != nil || *tags[1].Max != 7 {
		t.Errorf("limits %+v %+v", tags[0], tags[1])
	}
	_, err = ParseTagsCSV([]byte("path,device,address,type,min\nA/B,sim,memory,float64,low\n"))
	if err == nil || !strings.Contains(err.Error(), `line 2: tag "A/B": min "low": want a number`) {
		t.Errorf("err = %v", err)
	}
}
