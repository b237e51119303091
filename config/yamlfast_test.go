package config

import (
	"fmt"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// sameNode reports how a differs from b, field for field, or "".
func sameNode(a, b *yaml.Node, at string) string {
	if a == nil || b == nil {
		if a != b {
			return at + ": one node is nil"
		}
		return ""
	}
	if a.Kind != b.Kind || a.Style != b.Style || a.Tag != b.Tag || a.Value != b.Value || a.Anchor != b.Anchor ||
		a.Alias != nil || b.Alias != nil || a.HeadComment != b.HeadComment || a.LineComment != b.LineComment ||
		a.FootComment != b.FootComment || a.Line != b.Line || a.Column != b.Column || len(a.Content) != len(b.Content) {
		return fmt.Sprintf("%s: fast {kind %d style %d tag %q value %q line %d col %d, %d children}, yaml.v3 {kind %d style %d tag %q value %q line %d col %d, %d children}",
			at, a.Kind, a.Style, a.Tag, a.Value, a.Line, a.Column, len(a.Content), b.Kind, b.Style, b.Tag, b.Value, b.Line, b.Column, len(b.Content))
	}
	for i := range a.Content {
		if d := sameNode(a.Content[i], b.Content[i], fmt.Sprintf("%s/%d", at, i)); d != "" {
			return d
		}
	}
	return ""
}

// yamlItem is yaml.v3's node of the one entry of the block sequence line.
func yamlItem(line string) (*yaml.Node, error) {
	var root yaml.Node
	if err := yaml.Unmarshal([]byte(line), &root); err != nil {
		return nil, err
	}
	if len(root.Content) != 1 || root.Content[0].Kind != yaml.SequenceNode || len(root.Content[0].Content) != 1 {
		return nil, fmt.Errorf("not a one-entry sequence")
	}
	return root.Content[0].Content[0], nil
}

// fastAgainstYAML reads l with the fast path and, when it takes it,
// compares the node with yaml.v3's: read reports whether the fast path
// took l, problem how the two differ ("" when they agree).
func fastAgainstYAML(l string) (read bool, problem string) {
	fast, ok := fastFlowItem([]byte(l), 1)
	if !ok {
		return false, ""
	}
	want, err := yamlItem(l)
	if err != nil {
		return true, fmt.Sprintf("%q: read by the fast path, refused by yaml.v3: %v", l, err)
	}
	if d := sameNode(fast, want, "item"); d != "" {
		return true, fmt.Sprintf("%q: %s", l, d)
	}
	return true, ""
}

// TestFastFlowItem_SameNodesAsYAMLv3: the lines of a generated project
// and of the docs' examples are read by the fast path, each to the very
// node yaml.v3 builds (kind, style, tag, value, line, column, children);
// lines outside its form are left to yaml.v3.
func TestFastFlowItem_SameNodesAsYAMLv3(t *testing.T) {
	accepted := []string{
		`- {path: A, device: d, deadband: { absolute: 1 }, history: {enabled: true}}`,
		`- {path: Plant/D000/P0000, device: dev000, address: HR0, type: float32, scan: 1s}`,
		`  - {path: F/T001, device: sim, address: "ramp(0,100000,100000s)", type: float64, scan: 1s}`,
		`    -   {  path: A ,device: d,address: HR1 }   `,
		`- {path: A, device: d, address: HR1, scale: 0.1, offset: -4.5, deadband: 1e-3, read_only: true}`,
		`- {path: A, device: d, address: HR1, history: on, units: "deg C"}`,
		`- {path: A, device: d, address: CO1, type: bool, description: "Pump, main (P-101)"}`,
		`- {path: A, device: d, address: memory, type: int16, initial: 0x1F}`,
		`- {path: A, device: d, address: memory, type: float64, initial: .inf}`,
		`- {path: A, device: d, address: memory, type: float64, initial: -.5}`,
		`- {path: A, device: d, address: memory, type: string, initial: null}`,
		`- {path: A, device: d, address: memory, type: bool, initial: False}`,
		`- {path: A, device: d, address: memory, type: int64, initial: 1_000}`,
		`- {path: A, device: d, address: "", type: string}`,
		`- {path: A/B.c/(d), device: d_1, address: "ns=2;s=Motor.Speed"}`,
		`- {true: 1, null: 2, y: 3}`,
	}
	for _, l := range accepted {
		read, problem := fastAgainstYAML(l)
		if !read {
			t.Errorf("%q: not read by the fast path", l)
		} else if problem != "" {
			t.Error(problem)
		}
	}
	refused := []string{
		`- {path: A, device: d, address: HR1} # comment`,
		`- {path: A, device: d, description: Tank level}`,
		`- {path: A, device: d, address: "a\"b"}`,
		`- {path: A, device: d, address: 'HR1'}`,
		`- {path: A, device: d, address: HR1`,
		`- {path: A, device: d, address: [1, 2]}`,
		`- {path: A, device: d, deadband: {absolute: {x: 1}}}`,
		`- {path: A, device: d, deadband: {}}`,
		`- {path: A, device: d, deadband: {absolute: 1}`,
		`- {path: A, device: d, address:HR1}`,
		`- {path: A, device: d, address: }`,
		`- {path: A, device: d, address: &x HR1}`,
		`- {path: A, device: d, address: !!str 1}`,
		`- {path: A, device: d, address: -}`,
		`- {path: A, device: d, address: HR1} x`,
		`- {}`,
		`-{path: A}`,
		`- path: A`,
		`- {path: Kühlung, device: d}`,
		`- {path: A, device: d, address: memory, type: string, initial: ~}`,
	}
	for _, l := range refused {
		if _, ok := fastFlowItem([]byte(l), 1); ok {
			t.Errorf("%q: read by the fast path, want it left to yaml.v3", l)
		}
	}
}

// TestParseProject_FastPathSameProject: a project whose tag chunks go
// through the fast path, through yaml.v3 (a chunk with a comment, a chunk
// with a block entry) or both decodes to the same project, problems and
// line numbers included, as the whole-document parse.
func TestParseProject_FastPathSameProject(t *testing.T) {
	var b strings.Builder
	b.WriteString("devices:\n  - {name: d, driver: sim}\ntags:\n")
	for i := range 2500 {
		switch {
		case i == 1500:
			b.WriteString("  # a comment: this chunk goes to yaml.v3\n")
		case i == 2200:
			fmt.Fprintf(&b, "  - path: T/%04d\n    device: d\n    address: memory\n", i)
			continue
		}
		fmt.Fprintf(&b, "  - {path: T/%04d, device: d, address: \"sine(0,100,%ds)\", type: float64, scan: 1s}\n", i, 10+i%50)
	}
	b.WriteString("  - {path: T/bad, device: d, address: memory, colour: red}\n")
	doc := []byte(b.String())
	fast, ferr := ParseProject(doc)
	whole, werr := ParseProject(append(append([]byte(nil), doc...), "# & (whole-document parse)\n"...))
	if fmt.Sprint(ferr) != fmt.Sprint(werr) {
		t.Fatalf("errors differ:\nsplit %v\nwhole %v", ferr, werr)
	}
	if ferr == nil {
		t.Fatalf("the bad tag was not refused")
	}
	if len(fast.Tags) != 2501 || fmt.Sprintf("%+v", fast) != fmt.Sprintf("%+v", whole) {
		t.Fatalf("projects differ: %d tags against %d", len(fast.Tags), len(whole.Tags))
	}
	if !strings.Contains(ferr.Error(), "line 2507") {
		t.Errorf("error %v: want the bad tag's line, 2507", ferr)
	}
}

// BenchmarkParseProject10k: a 10,000-tag project of one-line entries,
// every tenth with history (bench-footprint's simulator project).
func BenchmarkParseProject10k(b *testing.B) {
	var s strings.Builder
	s.WriteString("devices:\n  - {name: sim, driver: sim}\ntags:\n")
	for i := range 10000 {
		hist := ""
		if i%10 == 0 {
			hist = ", history: {enabled: true}"
		}
		fmt.Fprintf(&s, "  - {path: Bench/T%05d/Level, device: sim, address: \"sine(0,100,%ds)\", type: float64, scan: 1s%s}\n", i, 20+i%41, hist)
	}
	doc := []byte(s.String())
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseProject(doc); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzFastFlowItem: a line the fast path reads is the one-entry sequence
// yaml.v3 reads, node for node.
func FuzzFastFlowItem(f *testing.F) {
	for _, s := range []string{
		`- {path: Plant/D000/P0000, device: dev000, address: HR0, type: float32, scan: 1s}`,
		`  - {path: F/T001, device: sim, address: "ramp(0,100000,100000s)", type: float64, scan: 1s}`,
		`- {a: 0o17, b: -1e3, c: .NaN, d: "", e: Null, f: 1.5.6, g: 0b101, h: 12:30}`,
		`- {a: ..., b: .., c: -.inf, d: (x), e: x-, f: 1_0}`,
		`- {path: A, deadband: {absolute: 0.5, percent: 1}, history: {enabled: yes}}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, l string) {
		if _, problem := fastAgainstYAML(l); problem != "" {
			t.Fatal(problem)
		}
	})
}

// TestFastFlowItem_PlainScalarsResolveAsYAMLv3: short plain scalars from
// the characters where resolution is subtle (numbers in every base,
// exponents, infinities, dots, signs) get yaml.v3's tag and value.
func TestFastFlowItem_PlainScalarsResolveAsYAMLv3(t *testing.T) {
	const alphabet = "0123456789._/()+-aeEfinNxXoObBtTlsu"
	var buf [5]byte
	n := 0
	var walk func(depth int)
	walk = func(depth int) {
		if depth > 0 {
			l := "- {v: " + string(buf[:depth]) + "}"
			read, problem := fastAgainstYAML(l)
			if problem != "" {
				t.Fatal(problem)
			}
			if read {
				n++
			}
		}
		if depth == 3 {
			return
		}
		for i := 0; i < len(alphabet); i++ {
			buf[depth] = alphabet[i]
			walk(depth + 1)
		}
	}
	walk(0)
	if n < 10000 {
		t.Fatalf("only %d scalars took the fast path", n)
	}
}
