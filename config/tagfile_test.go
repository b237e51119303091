package config

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

func ptr(f float64) *float64 { return &f }
func iptr(i int) *int        { return &i }

func TestParseScale_Forms(t *testing.T) {
	tests := []struct {
		in      string
		want    *ScaleConf
		wantErr string
	}{
		{in: "0.1", want: &ScaleConf{Factor: ptr(0.1)}},
		{in: "0.1:-40", want: &ScaleConf{Factor: ptr(0.1), Offset: ptr(-40)}},
		{in: " 2 : 5 ", want: &ScaleConf{Factor: ptr(2), Offset: ptr(5)}},
		{in: "0:27648:0:100", want: &ScaleConf{Raw: []float64{0, 27648}, Eng: []float64{0, 100}}},
		{in: "1e3:4:-1:1", want: &ScaleConf{Raw: []float64{1000, 4}, Eng: []float64{-1, 1}}},
		{in: "x", wantErr: `scale "x": want factor, factor:offset or rawlo:rawhi:englo:enghi`},
		{in: "1:2:3", wantErr: "(3 numbers given)"},
		{in: "1::2", wantErr: `scale "1::2"`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseScale(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseScale(%q) = %v, %v; want error containing %q", tt.in, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("ParseScale(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
			}
			if back, err := ParseScale(FormatScale(got)); err != nil || !reflect.DeepEqual(back, got) {
				t.Fatalf("FormatScale round trip: %q -> %+v, %v", FormatScale(got), back, err)
			}
		})
	}
}

func TestParseTagsCSV_Rows(t *testing.T) {
	in := "\ufeffPath,device,address,type,scale,read_only,description,scan\n" +
		"# a comment line\n" +
		"Line1/Speed,plc1,HR100,float32,0.1:-40,false,\"spindle, main\",500ms\n" +
		"\n" +
		"Line1/Run,plc1,CO1,bool,,true,\"two\nlines\",\n" +
		"Line1/Temp,plc1,IR3,int16,0:27648:0:100,,,\n"
	tags, err := ParseTagsCSV([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []TagConfig{
		{Path: "Line1/Speed", Device: "plc1", Address: "HR100", Type: "float32", Scale: &ScaleConf{Factor: ptr(0.1), Offset: ptr(-40)},
			Description: "spindle, main", Scan: "500ms", Line: 3},
		{Path: "Line1/Run", Device: "plc1", Address: "CO1", Type: "bool", ReadOnly: true, Description: "two\nlines", Line: 5},
		{Path: "Line1/Temp", Device: "plc1", Address: "IR3", Type: "int16", Scale: &ScaleConf{Raw: []float64{0, 27648}, Eng: []float64{0, 100}}, Line: 7},
	}
	if !reflect.DeepEqual(tags, want) {
		t.Fatalf("tags =\n%+v\nwant\n%+v", tags, want)
	}
}

// TestParseTagsCSV_OneBadRowRejectsFile: good rows around bad ones give no
// tags at all, and every bad row is named by its line.
func TestParseTagsCSV_OneBadRowRejectsFile(t *testing.T) {
	tests := []struct {
		name string
		rows string
		want []string
	}{
		{"bad scale", "B,sim,memory,float64,abc,false\n", []string{`line 3: tag "B": scale "abc"`}},
		{"bad bool", "B,sim,memory,float64,,maybe\n", []string{`line 3: tag "B": read_only "maybe": want true or false`}},
		{"bad type and path", "B//x,sim,memory,floatish,,\n", []string{`line 3: tag "B//x": invalid path`, `line 3: tag "B//x": unknown type "floatish"`}},
		{"duplicate", "A,sim,memory,int16,,\n", []string{`line 3: tag "A": defined twice in the file (first at line 2)`}},
		{"field count", "B,sim,memory\n", []string{`line 3: tag "B": 3 fields, the header has 6`}},
		{"missing device", "B,,memory,int16,,\n", []string{`line 3: tag "B": missing device`}},
		{"bad quoting", "B,sim,\"mem\"ory,int16,,\n", []string{`line 3: `}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := "path,device,address,type,scale,read_only\nA,sim,memory,int16,,\n" + tt.rows + "C,sim,memory,int16,2,true\n"
			tags, err := ParseTagsCSV([]byte(in))
			if tags != nil {
				t.Fatalf("tags = %+v, want none", tags)
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
			if strings.Contains(err.Error(), "line 2:") || strings.Contains(err.Error(), "line 4:") {
				t.Errorf("a good row is reported:\n%v", err)
			}
		})
	}
}

func TestParseTagsCSV_Header(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", "line 1: empty file"},
		{"path,device\n", `line 1: missing column "address"`},
		{"path,device,address,colour\n", `line 1: unknown column "colour"`},
		{"path,device,address,path\n", `line 1: column "path" twice`},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if _, err := ParseTagsCSV([]byte(tt.in)); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

var roundTripTags = []TagConfig{
	{Path: "Line1/Pump/Speed", Device: "plc1", Address: "HR100", Type: "float32", ByteOrder: "CDAB", Scan: "1s",
		Scale: &ScaleConf{Factor: ptr(0.1)}, Units: "rpm", WriteLevel: "supervise", Description: `quoted "x", comma`},
	{Path: "Line1/Pump/Run", Device: "plc1", Address: "CO3", Type: "bool", ReadOnly: true},
	{Path: "Line1/Level", Device: "plc1", Address: "IR7", Type: "int16", Scale: &ScaleConf{Raw: []float64{0, 27648}, Eng: []float64{0, 100}}},
	{Path: "Line1/Offset", Device: "plc1", Address: "HR9", Type: "int16", Scale: &ScaleConf{Factor: ptr(0.5), Offset: ptr(-3)}},
	{Path: "Line1/Set point", Device: "sim", Address: "memory", Type: "float64", Description: "multi\nline"},
}

func TestFormatTagsCSV_RoundTrip(t *testing.T) {
	var buf bytes.Buffer
	if err := FormatTagsCSV(&buf, roundTripTags); err != nil {
		t.Fatal(err)
	}
	got, err := ParseTagsCSV(buf.Bytes())
	if err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
	}
	for i := range got {
		got[i].Line = 0
	}
	if !reflect.DeepEqual(got, roundTripTags) {
		t.Fatalf("round trip:\n%+v\nwant\n%+v\ncsv:\n%s", got, roundTripTags, buf.String())
	}
}

func TestFormatTagsYAML_RoundTrip(t *testing.T) {
	tags := append([]TagConfig{}, roundTripTags...)
	tags = append(tags, TagConfig{Path: "Line1/H", Device: "plc1", Address: "HR1", Type: "int16", UnitID: iptr(3),
		Deadband: &DeadbandConf{Absolute: ptr(0.5)}, History: &HistoryConf{Enabled: true, MaxInterval: "60s"}})
	b, err := FormatTagsYAML(tags)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "  - {path: Line1/Pump/Run, device: plc1, address: CO3, type: bool, read_only: true}\n") {
		t.Errorf("tags are not one flow mapping per line:\n%s", b)
	}
	got, err := ParseTagsYAML(b)
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	for i := range got {
		if got[i].Line != i+2 {
			t.Errorf("tag %d at line %d, want %d", i, got[i].Line, i+2)
		}
		got[i].Line = 0
	}
	if !reflect.DeepEqual(got, tags) {
		t.Fatalf("round trip:\n%+v\nwant\n%+v\nyaml:\n%s", got, tags, b)
	}
	empty, err := FormatTagsYAML(nil)
	if err != nil || string(empty) != "tags: []\n" {
		t.Fatalf("no tags = %q, %v", empty, err)
	}
}

func TestParseTagsYAML_Errors(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string
	}{
		{"unknown key", "tags:\n  - {path: A, device: sim, address: memory}\n  - {path: B, device: sim, address: memory, colour: red}\n",
			[]string{`line 3: unknown key "colour" in a tag`}},
		{"bare list, bad scan", "- {path: A, device: sim, address: memory, scan: fast}\n", []string{`line 1: tag "A": scan "fast"`}},
		{"duplicate", "tags:\n- {path: A, device: sim, address: memory}\n- {path: A, device: sim, address: memory}\n",
			[]string{`line 3: tag "A": defined twice in the file (first at line 2)`}},
		{"other section", "devices: []\ntags: []\n", []string{`line 1: unknown key "devices" in a tag file (valid keys: tags)`}},
		{"empty", "", []string{"empty file"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tags, err := ParseTagsYAML([]byte(tt.in))
			if tags != nil || err == nil {
				t.Fatalf("= %+v, %v; want an error", tags, err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestUpsertTags_ReplacesInPlaceAndAppends(t *testing.T) {
	doc := `# plant project
devices:
  - {name: sim, driver: sim}
tags:
  # the speed
  - {path: A, device: sim, address: "ramp(0,10,1s)", history: {enabled: true}}
  - {path: B, device: sim, address: memory, type: int16} # setpoint
views: []
`
	out, err := UpsertTags([]byte(doc), []TagConfig{
		{Path: "B", Device: "sim", Address: "memory", Type: "int32", Units: "l"},
		{Path: "C", Device: "sim", Address: "random(0,1)"},
	})
	if err != nil {
		t.Fatal(err)
	}
	p, err := ParseProject(out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var paths []string
	for _, tc := range p.Tags {
		paths = append(paths, tc.Path)
	}
	if strings.Join(paths, ",") != "A,B,C" {
		t.Fatalf("tags %v, want A,B,C\n%s", paths, out)
	}
	if p.Tags[1].Type != "int32" || p.Tags[1].Units != "l" || p.Tags[0].History == nil || len(p.Devices) != 1 {
		t.Fatalf("project after upsert: %+v\n%s", p, out)
	}
	for _, want := range []string{"# plant project", "# the speed", "# setpoint", "views: []"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("upsert lost %q:\n%s", want, out)
		}
	}
	// An empty project gets a tags section.
	out, err = UpsertTags(nil, []TagConfig{{Path: "X", Device: "sim", Address: "memory"}})
	if err != nil || string(out) != "tags:\n  - {path: X, device: sim, address: memory}\n" {
		t.Fatalf("upsert into nothing = %q, %v", out, err)
	}
	out, err = UpsertTags([]byte(`{"devices": [{"name": "sim", "driver": "sim"}], "tags": [{"path": "A", "device": "sim", "address": "memory"}]}`),
		[]TagConfig{{Path: "X", Device: "sim", Address: "memory"}})
	if p, perr := ParseProject(out); err != nil || perr != nil || len(p.Tags) != 2 || len(p.Devices) != 1 {
		t.Fatalf("upsert into a JSON project = %q, %v, %v", out, err, perr)
	}
	out, err = UpsertTags([]byte("devices: []\ntags:\n"), []TagConfig{{Path: "X", Device: "sim", Address: "memory"}})
	if err != nil || !strings.Contains(string(out), "tags:\n  - {path: X") {
		t.Fatalf("upsert into tags: null = %q, %v", out, err)
	}
}

func TestDiffProjects_Names(t *testing.T) {
	old, err := ParseProject([]byte(`devices:
  - {name: a, driver: sim}
  - {name: b, driver: sim}
  - {name: c, driver: modbus, url: "tcp://1.2.3.4:502"}
tags:
  - {path: T1, device: a, address: memory}
  - {path: T2, device: a, address: memory}
  - {path: T3, device: a, address: memory}
views: [{name: v}]
`))
	if err != nil {
		t.Fatal(err)
	}
	next, err := ParseProject([]byte(`# moved lines
devices:
  - {name: a, driver: sim}
  - {name: c, driver: modbus, url: "tcp://1.2.3.5:502"}
  - {name: d, driver: sim}
tags:
  - {path: T1, device: a, address: memory}
  - {path: T3, device: a, address: memory, units: m}
  - {path: T4, device: d, address: memory}
views:
  - name: v
`))
	if err != nil {
		t.Fatal(err)
	}
	got := DiffProjects(old, next)
	want := ProjectDiff{DevicesAdded: []string{"d"}, DevicesChanged: []string{"c"}, DevicesRemoved: []string{"b"},
		TagsAdded: []string{"T4"}, TagsChanged: []string{"T3"}, TagsRemoved: []string{"T2"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("diff = %+v\nwant %+v", got, want)
	}
	if d := DiffProjects(&Project{}, old); !reflect.DeepEqual(d.Sections, []string{"views"}) || len(d.TagsAdded) != 3 {
		t.Fatalf("diff from nothing = %+v", d)
	}
}
