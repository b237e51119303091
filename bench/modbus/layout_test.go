package modbusbench

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"qubiq.dev/edge/device"
	"qubiq.dev/edge/device/modbus"
)

// bruteMin tries every split of the tags (in address order) into runs of
// consecutive tags and returns the fewest runs that all fit.
func bruteMin(ts []Tag, maxGap, maxRegs int) int {
	n := len(ts)
	best := n + 1
	for mask := 0; mask < 1<<(n-1); mask++ {
		count, ok := 1, true
		first, end := 0, ts[0].Start+ts[0].Regs
		for j := 1; j < n && ok; j++ {
			if mask&(1<<(j-1)) != 0 { // a new request starts at j
				ok = end-ts[first].Start <= maxRegs || j-1 == first
				count++
				first, end = j, ts[j].Start+ts[j].Regs
				continue
			}
			if ts[j].Start-end > maxGap {
				ok = false
			}
			end = max(end, ts[j].Start+ts[j].Regs)
		}
		if ok && (end-ts[first].Start <= maxRegs || first == n-1) && count < best {
			best = count
		}
	}
	return best
}

func TestMinRequests_MatchesBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for c := range 300 {
		n := 1 + rng.IntN(11)
		var ts []Tag
		addr := rng.IntN(5)
		for range n {
			addr += rng.IntN(6)
			r := 1 + rng.IntN(4)
			ts = append(ts, Tag{Start: addr, Regs: r})
			addr += r
		}
		maxGap, maxRegs := rng.IntN(4), 4+rng.IntN(10)
		got := MinRequests(ts, maxGap, maxRegs)
		if want := bruteMin(ts, maxGap, maxRegs); len(got) != want {
			t.Fatalf("case %d %+v gap %d regs %d: MinRequests = %d %v, brute force %d", c, ts, maxGap, maxRegs, len(got), got, want)
		}
		covered := map[int]bool{}
		for _, r := range got {
			for a := r.Start; a < r.Start+r.Count; a++ {
				covered[a] = true
			}
		}
		for _, tg := range ts {
			for a := tg.Start; a < tg.Start+tg.Regs; a++ {
				if !covered[a] {
					t.Fatalf("case %d: register %d of a tag not read by %v", c, a, got)
				}
			}
		}
	}
}

func TestGenerate_Layout(t *testing.T) {
	l, err := Generate(5, 2000, 10000)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Tags) != 2000 {
		t.Errorf("%d tags, want 2000", len(l.Tags))
	}
	last := 0
	kinds := map[string]int{}
	for _, tg := range l.Tags {
		last = max(last, tg.Start+tg.Regs)
		kinds[fmt.Sprint(tg.Point.Type)]++
	}
	if last > 10000 || last < 9900 {
		t.Errorf("layout ends at register %d, want it to fill most of 10000", last)
	}
	if len(kinds) < 8 {
		t.Errorf("types %v, want a mix", kinds)
	}
	l2, _ := Generate(5, 2000, 10000)
	if fmt.Sprint(l2.Tags) != fmt.Sprint(l.Tags) {
		t.Error("the same seed gave another layout")
	}
}

// TestMinRequests_PlannerReachesMinimum: the driver's plan of the
// benchmark layout has exactly the minimum number of requests.
func TestMinRequests_PlannerReachesMinimum(t *testing.T) {
	l, err := Generate(5, 2000, 10000)
	if err != nil {
		t.Fatal(err)
	}
	c := modbus.DefaultConfig
	c.URL = "tcp://127.0.0.1:1"
	d := modbus.NewDriver("bench", c, nil)
	defer d.Close(t.Context())
	var points []device.Point
	for _, tg := range l.Tags {
		if err := d.CheckPoint(tg.Point); err != nil {
			t.Fatalf("%s: %v", tg.Point.Address, err)
		}
		points = append(points, tg.Point)
	}
	plan := d.Plan(points)
	min := MinRequests(l.Tags, c.MaxGap, c.MaxRegistersPerRequest)
	t.Logf("%d tags: plan %d requests, minimum %d", len(points), len(plan), len(min))
	if len(plan) != len(min) {
		t.Errorf("plan has %d requests, the minimum is %d", len(plan), len(min))
	}
}
