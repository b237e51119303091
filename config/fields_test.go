package config

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"qubiq.dev/edge/device"
	"qubiq.dev/edge/value"
)

// everyKey is one tag of each kind with every key of a tag set, zeros
// included where a zero means something (unit_id: 0, offset: 0, deadband
// 0, history deadband 0).
var everyKey = []TagConfig{
	{Path: "Halle 1/Kühlung/Vorlauf", Device: "plc1", Address: "HR100", Type: "float32", ByteOrder: "CDAB", Scan: "500ms",
		Deadband: &DeadbandConf{Absolute: ptr(0), Percent: ptr(2.5)}, Scale: &ScaleConf{Factor: ptr(0.1), Offset: ptr(0)},
		Units: "°C", WriteLevel: "supervise", ReadOnly: true, UnitID: iptr(0), Description: `quoted "x", comma`,
		History: &HistoryConf{Enabled: true, Deadband: ptr(0), MaxInterval: "60s"}, NonFinite: "pass"},
	{Path: "Line1/Name", Device: "plc1", Address: "HR10:8", Type: "string", StringByteOrder: "low", Encoding: "latin1",
		History: &HistoryConf{Enabled: false}, UnitID: iptr(255)},
	{Path: "Line1/Offset only", Device: "plc1", Address: "HR20", Type: "int16", Scale: &ScaleConf{Offset: ptr(-40)},
		Deadband: &DeadbandConf{Absolute: ptr(0)}, Min: ptr(0), Max: ptr(120.5)},
	{Path: "Line1/Range", Device: "plc1", Address: "IR7", Type: "int16", Scale: &ScaleConf{Raw: []float64{0, 27648}, Eng: []float64{0, 100}},
		Deadband: &DeadbandConf{Percent: ptr(0)}, NonFinite: "bad", Max: ptr(-3)},
	{Path: "Line1/Plain", Device: "sim", Address: "memory"},
}

func stripLines(tags []TagConfig) []TagConfig {
	out := append([]TagConfig(nil), tags...)
	for i := range out {
		out[i].Line = 0
	}
	return out
}

// The CSV format round-trips every key of a tag, zeros included.
func TestTagsCSV_RoundTripsEveryKey(t *testing.T) {
	var buf bytes.Buffer
	if err := FormatTagsCSV(&buf, everyKey); err != nil {
		t.Fatal(err)
	}
	got, err := ParseTagsCSV(buf.Bytes())
	if err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
	}
	if !reflect.DeepEqual(stripLines(got), everyKey) {
		t.Fatalf("round trip:\n%+v\nwant\n%+v\ncsv:\n%s", stripLines(got), everyKey, buf.String())
	}
	// And the YAML tag file and the project export do too.
	y, err := FormatTagsYAML(everyKey)
	if err != nil {
		t.Fatal(err)
	}
	gy, err := ParseTagsYAML(y)
	if err != nil || !reflect.DeepEqual(stripLines(gy), everyKey) {
		t.Fatalf("YAML round trip: %v\n%+v\n%s", err, stripLines(gy), y)
	}
	doc, err := UpsertTags([]byte("devices: [{name: plc1, driver: modbus, url: \"tcp://1.2.3.4\"}]\n"), everyKey)
	if err != nil {
		t.Fatal(err)
	}
	p, err := ParseProject(doc)
	if err != nil || !reflect.DeepEqual(stripLines(p.Tags), everyKey) {
		t.Fatalf("project export round trip: %v\n%+v\n%s", err, stripLines(p.Tags), doc)
	}
	for _, want := range []string{"unit_id: 0", "offset: 0", "absolute: 0", "deadband: 0", "min: 0", "max: 120.5"} {
		if !strings.Contains(string(doc), want) {
			t.Errorf("the export lost %q:\n%s", want, doc)
		}
	}
}

// Zero is not unset: unit_id 0 reaches the driver as unit 0, an absent one
// as "the device's".
func TestEngineTags_ZeroIsNotUnset(t *testing.T) {
	p, err := ParseProject([]byte(`devices: [{name: sim, driver: sim}]
tags:
  - {path: A, device: sim, address: HR1, type: int16, unit_id: 0, scale: {factor: 2, offset: 0}, deadband: {absolute: 0}}
  - {path: B, device: sim, address: HR1, type: int16}
`))
	if err != nil {
		t.Fatal(err)
	}
	tags, err := p.EngineTags()
	if err != nil {
		t.Fatal(err)
	}
	if u, set := tags[0].Point.Unit(); !set || u != 0 {
		t.Errorf("unit_id: 0 = (%d, %v), want unit 0 set", u, set)
	}
	if _, set := tags[1].Point.Unit(); set {
		t.Error("an absent unit_id is set")
	}
	if tags[0].Scale.Factor != 2 || tags[0].Scale.Offset != 0 {
		t.Errorf("scale %+v", tags[0].Scale)
	}
}

func TestEngineTags_NewKeys(t *testing.T) {
	p, err := ParseProject([]byte(`tags:
  - {path: A, device: d, address: HR1, type: float32, non_finite: pass, history: {enabled: true, deadband: 0.5, max_interval: 1m}}
  - {path: S, device: d, address: "HR1:4", type: string, encoding: ascii, string_byte_order: low}
`))
	if err != nil {
		t.Fatal(err)
	}
	tags, err := p.EngineTags()
	if err != nil {
		t.Fatal(err)
	}
	if !tags[0].PassNonFinite || tags[0].History == nil || tags[0].History.Deadband != 0.5 || tags[0].History.MaxInterval.Minutes() != 1 {
		t.Errorf("tag A %+v", tags[0])
	}
	if pt := tags[1].Point; pt.Encoding != "ascii" || pt.StringByteOrder != "low" {
		t.Errorf("tag S point %+v", pt)
	}
}

// A deadband on a bool or string tag would swallow state changes: it is
// refused, with a message, in the project file and in tag files alike.
func TestDeadband_RefusedOnBoolAndString(t *testing.T) {
	p, err := ParseProject([]byte(`tags:
  - {path: B, device: d, address: CO1, type: bool, deadband: {absolute: 1}}
  - {path: S, device: d, address: "HR1:4", type: string, history: {enabled: true, deadband: 2}}
  - {path: N, device: d, address: HR1, type: int16, deadband: {absolute: 1}, history: {enabled: true, deadband: 2}}
`))
	if err != nil {
		t.Fatal(err)
	}
	p.File = "p.yaml"
	_, err = p.EngineTags()
	for _, want := range []string{`p.yaml:2: tag "B": deadband on a bool tag`, `p.yaml:3: tag "S": history deadband on a string tag`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, want %q", err, want)
		}
	}
	if err != nil && strings.Contains(err.Error(), `"N"`) {
		t.Errorf("a numeric tag's deadband was refused: %v", err)
	}
	_, err = ParseTagsCSV([]byte("path,device,address,type,deadband\nB,d,CO1,bool,1\n"))
	if err == nil || !strings.Contains(err.Error(), `line 2: tag "B": deadband on a bool tag`) {
		t.Errorf("CSV: %v", err)
	}
}

type fakeChecker struct{}

func (fakeChecker) CheckPoint(p device.Point) error {
	if p.Type == value.TypeUnknown {
		return errors.New("type unknown is not supported")
	}
	return fakeChecker{}.CheckAddress(p.Address)
}

func (fakeChecker) CheckAddress(a string) error {
	if !strings.HasPrefix(a, "HR") {
		return errors.New("address " + a + ": want HRn")
	}
	return nil
}

// A tag file's problems are all reported in one pass: a bad type and a bad
// address of one row, an unknown device, a row error elsewhere.
func TestReadTagsCSV_EveryProblemInOnePass(t *testing.T) {
	in := "path,device,address,type,unit_id\n" +
		"A,plc,XX1,floatish,\n" +
		"B,nope,HR1,int16,\n" +
		"C,plc,HR2,int16,300\n" +
		"D,plc,HR3,int16,0\n"
	_, err := ReadTagsCSV(strings.NewReader(in), TagImport{Devices: &TagDevices{Names: []string{"plc"}, Drivers: map[string]PointChecker{"plc": fakeChecker{}}}})
	for _, want := range []string{
		`line 2: tag "A": unknown type "floatish"`,
		`line 2: tag "A": device "plc": address XX1: want HRn`,
		`line 3: tag "B": unknown device "nope" (the project has: plc)`,
		`line 4: tag "C": unit_id 300: want 0..255`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err lacks %q:\n%v", want, err)
		}
	}
	if err != nil && (strings.Contains(err.Error(), `"D"`) || strings.Contains(err.Error(), "type unknown")) {
		t.Errorf("a good row or a second type message is reported:\n%v", err)
	}
}

func TestReadTagsCSV_KeepsKeysWithoutAColumn(t *testing.T) {
	old := TagConfig{Path: "A", Device: "plc", Address: "HR1", UnitID: iptr(0), History: &HistoryConf{Enabled: true},
		Deadband: &DeadbandConf{Absolute: ptr(1)}, Units: "m"}
	got, err := ReadTagsCSV(strings.NewReader("path,device,address,units\nA,plc,HR2,\n"), TagImport{Existing: map[string]TagConfig{"A": old}})
	if err != nil {
		t.Fatal(err)
	}
	want := old
	want.Address, want.Units, want.Line = "HR2", "", 2
	if !reflect.DeepEqual(got[0], want) {
		t.Fatalf("got %+v\nwant %+v", got[0], want)
	}
}

// Imports are capped: a file with more rows than the cap is refused,
// naming the cap, without reading the rest.
func TestTagImports_Capped(t *testing.T) {
	var b strings.Builder
	b.WriteString("path,device,address\n")
	for i := 0; i < 11; i++ {
		b.WriteString("T" + strings.Repeat("x", i) + ",sim,memory\n")
	}
	_, err := ReadTagsCSV(strings.NewReader(b.String()), TagImport{MaxTags: 10})
	if err == nil || !strings.Contains(err.Error(), "more than 10 tags in one import") {
		t.Fatalf("CSV: %v", err)
	}
	var y strings.Builder
	y.WriteString("tags:\n")
	for i := 0; i < 11; i++ {
		y.WriteString("  - {path: T" + strings.Repeat("x", i) + ", device: sim, address: memory}\n")
	}
	if _, err := ReadTagsYAML([]byte(y.String()), TagImport{MaxTags: 10}); err == nil || !strings.Contains(err.Error(), "11 entries, over the limit of 10") {
		t.Fatalf("YAML: %v", err)
	}
	if _, err := ParseProject(make([]byte, MaxProjectBytes+1)); err == nil || !strings.Contains(err.Error(), "over the limit") {
		t.Fatalf("project size: %v", err)
	}
}

// YAML problems are named in words, with the document's line and the key
// (never "cannot unmarshal !!seq into ..."), and a wrong key suggests the
// right one.
func TestParseProject_ErrorsInWords(t *testing.T) {
	doc := `devices:
  - {name: plc1, driver: modbus, url: "tcp://1.2.3.4"}
  - [a, list]
tags:
  - {path: A, device: plc1, address: HR1, scan: [1, 2]}
  - {path: B, device: plc1, adress: HR1}
  - {path: C, device: plc1, address: HR1, unit: 3}
  - {path: D, device: plc1, address: HR1, read_only: maybe}
  - {path: E, device: plc1, address: HR1, unit_id: two}
  - {path: F, device: plc1, address: HR1, deadband: [1]}
views: []
connections: {a: 1}
`
	p, err := ParseProject([]byte(doc))
	if p == nil || err == nil {
		t.Fatalf("= %v, %v", p, err)
	}
	for _, want := range []string{
		"line 3: devices: want a device mapping {name, driver, ...}, got a list",
		`line 5: tag key "scan": want text, got a list`,
		`line 6: unknown key "adress" in a tag`,
		`did you mean "address"?`,
		`line 7: unknown key "unit" in a tag`,
		`did you mean "units" (engineering units) or "unit_id" (the Modbus unit)?`,
		`line 8: tag key "read_only": want true or false, got the text "maybe"`,
		`line 9: tag key "unit_id": want a whole number, got the text "two"`,
		`line 10: tag key "deadband": want a mapping {key: value, ...}, got a list`,
		`line 12: connections: want a list [...], got a mapping`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "!!") || strings.Contains(err.Error(), "unmarshal") {
		t.Errorf("yaml.v3 jargon in:\n%v", err)
	}
	if len(p.Tags) != 6 {
		t.Errorf("the project is not decoded as far as it goes: %d tags", len(p.Tags))
	}
	// A syntax error names its line in the whole document, also inside a
	// tag parsed on its own.
	_, err = ParseProject([]byte("devices: []\ntags:\n  - {path: A, device: x\n  - {path: B}\n"))
	if err == nil || !strings.Contains(err.Error(), "line 3") || !strings.Contains(err.Error(), "not valid YAML") {
		t.Errorf("syntax error: %v", err)
	}
}

func TestLoadDaemon_ErrorsInWords(t *testing.T) {
	p := write(t, t.TempDir(), "q.yaml", "http:\n  listen: [1, 2]\npython:\n  memory_max: [1]\nstore: 5\n")
	_, err := LoadDaemon(p)
	for _, want := range []string{"q.yaml", "line 2: http.listen: want text, got a list", "line 4: python.memory_max:", "line 5: store: want a mapping"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

// A block-style project is parsed one tag at a time; the result is the
// same as parsing the whole document.
func TestParseProject_SplitEqualsWhole(t *testing.T) {
	docs := []string{
		"# plant\ndevices:\n  - {name: plc1, driver: modbus, url: \"tcp://1.2.3.4\"}\ntags:\n  # first\n  - {path: A, device: plc1, address: HR1}\n\n  - path: B\n    device: plc1\n    address: HR2\n    description: |\n      two\n      lines\n  - {path: C, device: plc1, address: HR3, scale: {factor: 2}} # trailing\nviews: []\n",
		"tags:\n- {path: A, device: d, address: HR1}\n- {path: B, device: d, address: HR2, colour: red}\n",
		"tags: [{path: A, device: d, address: HR1}]\n",
		"devices: []\n",
		"",
	}
	for _, doc := range docs {
		split, serr := ParseProject([]byte(doc))
		whole, werr := ParseProject([]byte(doc + "# & forces the whole-document parse\n"))
		if (serr == nil) != (werr == nil) || (serr != nil && serr.Error() != werr.Error()) {
			t.Errorf("errors differ for %q:\nsplit: %v\nwhole: %v", doc, serr, werr)
		}
		if !reflect.DeepEqual(split, whole) {
			t.Errorf("results differ for %q:\nsplit: %+v\nwhole: %+v", doc, split, whole)
		}
	}
}

func TestDeviceConfig_LineOfKey(t *testing.T) {
	p, err := ParseProject([]byte("devices:\n  - name: plc1\n    driver: modbus\n    host: 10.0.0.5\n"))
	if err != nil {
		t.Fatal(err)
	}
	dc := p.Devices[0]
	if got := dc.LineOf(&device.KeyError{Key: "host", Msg: "x"}); got != 4 {
		t.Errorf("LineOf(host) = %d, want 4", got)
	}
	if got := dc.LineOf(errors.New("other")); got != 2 {
		t.Errorf("LineOf(other) = %d, want the device's line 2", got)
	}
}

func TestEngineTags_TextLimits(t *testing.T) {
	long := strings.Repeat("x", MaxTagText+1)
	p, err := ParseProject([]byte("tags:\n  - {path: A, device: d, address: " + long + ", description: " + strings.Repeat("y", MaxTagDescription+1) + "}\n"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.EngineTags()
	for _, want := range []string{"address of 257 bytes is over the limit of 256", "description of 4097 bytes is over the limit of 4096"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err %v, want %q", err, want)
		}
	}
	if _, err := ParseProject([]byte("devices: [{name: " + strings.Repeat("d", 65) + ", driver: sim}]\n")); err == nil || !strings.Contains(err.Error(), "over the limit of 64") {
		t.Errorf("device name: %v", err)
	}
	// A 40 KB tag path is refused at the door, naming the limit.
	p, err = ParseProject([]byte("tags:\n  - {path: " + strings.Repeat("abcdefgh/", 5000) + "x, device: d, address: HR1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.EngineTags(); err == nil || !strings.Contains(err.Error(), "over the limit of 1024") {
		t.Errorf("40 KB path: %v", err)
	}
	if _, err := ParseTagsCSV([]byte("path,device,address\n" + strings.Repeat("abcdefgh/", 5000) + "x,d,HR1\n")); err == nil ||
		!strings.Contains(err.Error(), "over the limit of 1024") || len(err.Error()) > 1000 {
		t.Errorf("40 KB path in CSV: %.300v", err)
	}
}
