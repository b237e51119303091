package config

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzParseProject: any document is parsed without a panic, and the
// one-tag-at-a-time parse of a block document gives the same project and
// the same problems as the whole-document parse (forced by a trailing
// comment holding '&'). Seeds: testdata/fuzz/FuzzParseProject.
func FuzzParseProject(f *testing.F) {
	for _, s := range []string{
		"devices:\n  - {name: plc1, driver: modbus, url: \"tcp://10.0.0.5:502\", unit_id: 0}\ntags:\n  - {path: Line1/Speed, device: plc1, address: HR100, type: float32, deadband: {absolute: 0}, scale: {factor: 0.1, offset: 0}}\n  - path: Line1/Run\n    device: plc1\n    address: CO1\n    type: bool\n",
		"tags:\n- {path: A, device: d, address: HR1}\n# c\n- {path: B, device: d, address: HR2, colour: red}\nviews: []\n",
		"tags: [{path: A, device: d, address: HR1}]\n",
		"tags:\n  - {path: A\n",
		"python: {memory_max: unlimited}\n",
		"tags:\n  - {path: \"Halle 1/Ku\u0308hlung\", device: d, address: HR1, description: |\n      x}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		if len(doc) > 1<<16 {
			return
		}
		if bytes.ContainsAny(doc, "&*") || !plainText(doc) {
			_, _ = ParseProject(doc) // those go through the whole-document parse anyway: no panic
			return
		}
		split, serr := ParseProject(doc)
		whole, werr := ParseProject(append(append([]byte(nil), doc...), "\n# & (whole-document parse)\n"...))
		if (serr == nil) != (werr == nil) {
			t.Fatalf("split error %v, whole error %v", serr, werr)
		}
		if serr != nil {
			return // both refused: the lines of syntax errors may be worded differently
		}
		if !reflect.DeepEqual(split, whole) {
			t.Fatalf("split %+v\nwhole %+v", split, whole)
		}
		if split != nil {
			_, _ = split.EngineTags()
		}
	})
}

// FuzzReadTagsCSV: any CSV is read without a panic; the tags of a file
// that reads cleanly write back (FormatTagsCSV) and read again to the same
// tags, every key kept. Seeds: testdata/fuzz/FuzzReadTagsCSV.
func FuzzReadTagsCSV(f *testing.F) {
	for _, s := range []string{
		"path,device,address,type,scale,unit_id,deadband,history,history_deadband\nA,plc,HR1,int16,0.1:0,0,0 2%,on,0\n",
		"\ufeffpath,device,address\n# c\nLine1/Set point,sim,memory\n",
		"path,device,address,type\nB//x,sim,memory,floatish\n",
		"path,device,address,scale\nA,s,m,:5\nB,s,m,:\n",
		"path,device,address\n\"a\nb\",s,m\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		tags, err := ReadTagsCSV(bytes.NewReader(in), TagImport{MaxTags: 1000})
		if err != nil {
			return
		}
		var buf bytes.Buffer
		if err := FormatTagsCSV(&buf, tags); err != nil {
			t.Fatal(err)
		}
		back, err := ParseTagsCSV(buf.Bytes())
		if err != nil {
			t.Fatalf("written file does not read back: %v\n%s", err, buf.String())
		}
		if !reflect.DeepEqual(stripLines(back), stripLines(tags)) {
			t.Fatalf("round trip\n%+v\nwant\n%+v", stripLines(back), stripLines(tags))
		}
	})
}

// FuzzTagScalars: any text in a tag's keys survives the project file's
// rendering (renderItem writes YAML itself) and reads back the same.
func FuzzTagScalars(f *testing.F) {
	for _, s := range []string{"plain", "yes", "1s", "40001", "a: b", "- x", "#c", "quoted \"x\", comma", "multi\nline", "ü 温度", "", " lead", "~", "null", "0x10", "{a}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) || strings.ContainsRune(s, '\uFEFF') {
			return
		}
		tc := TagConfig{Path: "A", Device: "d", Address: s, Units: s, Description: s, Scan: s, Type: s}
		b, err := FormatTagsYAML([]TagConfig{tc})
		if err != nil {
			t.Fatal(err)
		}
		var f tagsFile
		if _, err := decodeDoc(b, &f, "a tag file", 0); err != nil || len(f.Tags) != 1 {
			t.Fatalf("%q renders as unreadable YAML: %v\n%s", s, err, b)
		}
		got := f.Tags[0]
		if got.Address != s || got.Units != s || got.Description != s || got.Scan != s || got.Type != s {
			t.Fatalf("%q read back as %+v\n%s", s, got, b)
		}
	})
}
