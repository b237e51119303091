package modbus

import (
	"fmt"
	"strings"
	"testing"

	"qubiq.dev/edge/value"
)

func planItems(t *testing.T, pts ...string) []item {
	t.Helper()
	var items []item
	for i, p := range pts {
		var addr, typ string
		var unit int
		if _, err := fmt.Sscanf(p, "%s %s %d", &addr, &typ, &unit); err != nil {
			t.Fatalf("bad test point %q: %v", p, err)
		}
		ty, err := value.ParseType(typ)
		if err != nil {
			t.Fatal(err)
		}
		items = append(items, item{idx: i, unit: byte(unit), spec: mustSpec(t, addr, ty, "")})
	}
	return items
}

func describe(rs []request) []string {
	var out []string
	for _, r := range rs {
		s := fmt.Sprintf("u%d fc%d %d+%d [", r.unit, r.fc, r.start, r.qty)
		for i, it := range r.items {
			if i > 0 {
				s += " "
			}
			s += fmt.Sprint(it.idx)
		}
		out = append(out, s+"]")
	}
	return out
}

func TestPlan_Merge(t *testing.T) {
	tests := []struct {
		name    string
		points  []string
		maxGap  int
		maxRegs int
		want    []string
	}{
		{"adjacent", []string{"HR100 float32 1", "HR102 int16 1", "HR103 uint32 1"}, 16, 125,
			[]string{"u1 fc3 100+5 [0 1 2]"}},
		{"gap bridged", []string{"HR100 int16 1", "HR116 int16 1"}, 16, 125,
			[]string{"u1 fc3 100+17 [0 1]"}},
		{"gap too wide", []string{"HR100 int16 1", "HR118 int16 1"}, 16, 125,
			[]string{"u1 fc3 100+1 [0]", "u1 fc3 118+1 [1]"}},
		{"max gap 0", []string{"HR100 int16 1", "HR102 int16 1", "HR101 int16 1"}, 0, 125,
			[]string{"u1 fc3 100+3 [0 2 1]"}},
		{"unsorted input, overlap", []string{"HR110 int16 1", "HR100 float64 1", "HR102 int16 1"}, 16, 125,
			[]string{"u1 fc3 100+11 [1 2 0]"}},
		{"max registers", []string{"HR0 float64 1", "HR4 float64 1", "HR8 float64 1"}, 16, 8,
			[]string{"u1 fc3 0+8 [0 1]", "u1 fc3 8+4 [2]"}},
		{"protocol max 125", []string{"HR0 int16 1", "HR124 int16 1", "HR125 int16 1"}, 125, 125,
			[]string{"u1 fc3 0+125 [0 1]", "u1 fc3 125+1 [2]"}},
		{"by function and unit", []string{"HR0 int16 1", "IR0 int16 1", "HR1 int16 2", "CO0 bool 1", "DI3 bool 1", "CO9 bool 1", "HR0.3 bool 1"}, 16, 125,
			[]string{"u1 fc1 0+10 [3 5]", "u1 fc2 3+1 [4]", "u1 fc3 0+1 [0 6]", "u1 fc4 0+1 [1]", "u2 fc3 1+1 [2]"}},
		{"string", []string{"HR0:10 string 1", "HR10 int16 1"}, 0, 125,
			[]string{"u1 fc3 0+11 [0 1]"}},
		{"bits up to 2000", []string{"CO0 bool 1", "CO1999 bool 1", "CO2000 bool 1"}, 2000, 125,
			[]string{"u1 fc1 0+2000 [0 1]", "u1 fc1 2000+1 [2]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := describe(plan(planItems(t, tt.points...), tt.maxGap, tt.maxRegs, nil))
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("plan =\n  %v\nwant\n  %v", got, tt.want)
			}
		})
	}
}

func TestPlan_RemembersSplit(t *testing.T) {
	// docs/modbus.md, fault C07: 11174, 11176, 11177 merged over the hole at 11175.
	items := planItems(t, "HR11174 int16 1", "HR11176 int16 1", "HR11177 int16 1")
	merged := plan(items, 16, 125, nil)
	if got := describe(merged); fmt.Sprint(got) != "[u1 fc3 11174+4 [0 1 2]]" {
		t.Fatalf("plan = %v", got)
	}
	split := map[reqKey]byte{merged[0].key(): 2}
	got := describe(plan(items, 16, 125, func(k reqKey) byte { return split[k] }))
	want := []string{"u1 fc3 11174+1 [0]", "u1 fc3 11176+2 [1 2]"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("plan after split = %v, want %v", got, want)
	}
	// A run that fails too is split into its points.
	split[reqKey{1, 3, 11176, 2}] = 2
	got = describe(plan(items, 16, 125, func(k reqKey) byte { return split[k] }))
	want = []string{"u1 fc3 11174+1 [0]", "u1 fc3 11176+1 [1]", "u1 fc3 11177+1 [2]"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("plan after second split = %v, want %v", got, want)
	}
}

func TestPlan_SplitHalvesOnException3(t *testing.T) {
	var pts []string
	for i := range 100 {
		pts = append(pts, fmt.Sprintf("HR%d int16 1", i))
	}
	items := planItems(t, pts...)
	split := map[reqKey]byte{{1, 3, 0, 100}: 3, {1, 3, 0, 50}: 3}
	got := describe(plan(items, 16, 125, func(k reqKey) byte { return split[k] }))
	var starts []string
	for _, g := range got {
		starts = append(starts, g[:len("u1 fc3 ")]+g[len("u1 fc3 "):strings.Index(g, " [")])
	}
	want := []string{"u1 fc3 0+25", "u1 fc3 25+25", "u1 fc3 50+50"}
	if fmt.Sprint(starts) != fmt.Sprint(want) {
		t.Errorf("plan after exception 3 = %v, want %v (halves, not one request per point)", starts, want)
	}
}

func TestSplitRequest_Halves(t *testing.T) {
	tests := []struct {
		name   string
		points []string
		want   []string
	}{
		{"even", []string{"HR0 int16 1", "HR1 int16 1", "HR2 int16 1", "HR3 int16 1"},
			[]string{"u1 fc3 0+2 [0 1]", "u1 fc3 2+2 [2 3]"}},
		{"by span, not by count", []string{"HR0 float64 1", "HR4 int16 1", "HR5 int16 1", "HR6 int16 1", "HR7 int16 1"},
			[]string{"u1 fc3 0+4 [0]", "u1 fc3 4+4 [1 2 3 4]"}},
		{"with a gap", []string{"HR0 int16 1", "HR10 int16 1", "HR11 int16 1"},
			[]string{"u1 fc3 0+1 [0]", "u1 fc3 10+2 [1 2]"}},
		{"overlapping bit and register", []string{"HR0 int16 1", "HR0.3 bool 1", "HR1 int16 1"},
			[]string{"u1 fc3 0+1 [0 1]", "u1 fc3 1+1 [2]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			merged := plan(planItems(t, tt.points...), 16, 125, nil)
			if len(merged) != 1 {
				t.Fatalf("plan = %v, want one merged request", describe(merged))
			}
			got := describe(splitRequest(merged[0]))
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("halves = %v, want %v", got, tt.want)
			}
		})
	}
}
