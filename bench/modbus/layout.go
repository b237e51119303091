package modbusbench

import (
	"fmt"
	"math/rand/v2"
	"sort"

	"qubiq.dev/edge/device"
	"qubiq.dev/edge/value"
)

// Tag is one generated tag: its point for the driver and the holding
// registers it covers, [Start, Start+Regs).
type Tag struct {
	Point device.Point
	Start int
	Regs  int
}

// Layout is a generated benchmark layout: tags over Registers holding
// registers of unit 1, and the value of every register.
type Layout struct {
	Tags      []Tag
	Registers int
	Values    []uint16
}

// kinds are the tag types of the layout with their weights (per 100) and
// sizes in registers; "bits" is a status word read as 1-4 bool tags
// (HRn.b), "string" a string of 4-8 registers.
var kinds = []struct {
	name   string
	weight int
	regs   int
}{
	{"int16", 22, 1}, {"uint16", 18, 1}, {"bits", 10, 1}, {"int32", 10, 2}, {"uint32", 8, 2},
	{"float32", 18, 2}, {"float64", 5, 4}, {"int64", 3, 4}, {"uint64", 2, 4}, {"string", 4, 0},
}

var orders32 = []string{"ABCD", "CDAB", "BADC", "DCBA"}

// Generate makes a layout of n tags over regs holding registers, the same
// for a given seed: mixed types and byte orders, most tags packed
// back to back, some after a small gap (bridged by max_gap 16), a few after
// a wide one (17-64 registers, not bridged), filling the registers to
// their end.
func Generate(seed uint64, n, regs int) (Layout, error) {
	rng := rand.New(rand.NewPCG(seed, seed^0x9E3779B97F4A7C15))
	type entry struct {
		kind  string
		regs  int
		bits  int // tags in a status word
		order string
	}
	var entries []entry
	tags, used := 0, 0
	for tags < n {
		w := rng.IntN(100)
		k := kinds[0]
		for _, c := range kinds {
			if w < c.weight {
				k = c
				break
			}
			w -= c.weight
		}
		e := entry{kind: k.name, regs: k.regs, order: orders32[rng.IntN(4)]}
		switch k.name {
		case "bits":
			e.bits = min(1+rng.IntN(4), n-tags)
			tags += e.bits
		case "string":
			e.regs = 4 + rng.IntN(5)
			tags++
		default:
			tags++
		}
		entries = append(entries, e)
		used += e.regs
	}
	free := regs - used
	if free < 0 {
		return Layout{}, fmt.Errorf("%d tags take %d registers, more than %d", n, used, regs)
	}
	// Wide gaps first (about 1 in 50 entries), then small ones, until the
	// free registers are spent.
	gaps := make([]int, len(entries))
	for i := range entries {
		if i > 0 && rng.IntN(50) == 0 && free >= 64 {
			g := 17 + rng.IntN(48)
			gaps[i] = g
			free -= g
		}
	}
	for free > 0 {
		i := 1 + rng.IntN(len(entries)-1)
		if gaps[i] > 16 {
			continue
		}
		g := min(1+rng.IntN(4), free, 16-gaps[i])
		if g <= 0 {
			continue
		}
		gaps[i] += g
		free -= g
	}
	l := Layout{Registers: regs, Values: make([]uint16, regs)}
	for i := range l.Values {
		l.Values[i] = uint16(rng.Uint32())
	}
	addr := 0
	for i, e := range entries {
		addr += gaps[i]
		name := func(j int) string { return fmt.Sprintf("Bench/T%04d", len(l.Tags)+j) }
		switch e.kind {
		case "bits":
			bits := rng.Perm(16)[:e.bits]
			sort.Ints(bits)
			for _, b := range bits {
				l.Tags = append(l.Tags, Tag{Start: addr, Regs: 1, Point: device.Point{Tag: name(0),
					Address: fmt.Sprintf("HR%d.%d", addr, b), Type: value.Bool}})
			}
		case "string":
			for r := range e.regs {
				l.Values[addr+r] = uint16('A'+rng.IntN(26))<<8 | uint16('a'+rng.IntN(26))
			}
			l.Tags = append(l.Tags, Tag{Start: addr, Regs: e.regs, Point: device.Point{Tag: name(0),
				Address: fmt.Sprintf("HR%d:%d", addr, e.regs), Type: value.String}})
		default:
			typ, err := value.ParseType(e.kind)
			if err != nil {
				return Layout{}, err
			}
			p := device.Point{Tag: name(0), Address: fmt.Sprintf("HR%d", addr), Type: typ}
			if e.regs > 1 {
				p.ByteOrder = e.order
			}
			l.Tags = append(l.Tags, Tag{Start: addr, Regs: e.regs, Point: p})
		}
		addr += e.regs
	}
	if addr > regs {
		return Layout{}, fmt.Errorf("layout runs to register %d, past %d", addr, regs)
	}
	return l, nil
}

// Request is one read request of a minimal plan: quantity Count from Start.
type Request struct{ Start, Count int }

// MinRequests computes, by dynamic programming over the tags in address
// order, the fewest FC3 requests that read every tag whole, where one
// request covers consecutive tags, bridges no gap wider than maxGap and
// spans at most maxRegs registers (the rules of the driver's max_gap and
// max_registers_per_request). It is the benchmark's own computation, not
// the driver's planner: best[j] is the fewest requests for the first j
// tags, over every last request tags[i:j] that fits.
func MinRequests(tags []Tag, maxGap, maxRegs int) []Request {
	ts := append([]Tag(nil), tags...)
	sort.SliceStable(ts, func(i, j int) bool {
		if ts[i].Start != ts[j].Start {
			return ts[i].Start < ts[j].Start
		}
		return ts[i].Start+ts[i].Regs < ts[j].Start+ts[j].Regs
	})
	n := len(ts)
	const inf = int(^uint(0) >> 1)
	best := make([]int, n+1)
	from := make([]int, n+1)
	for j := 1; j <= n; j++ {
		best[j] = inf
	}
	for i := 0; i < n; i++ {
		if best[i] == inf {
			continue
		}
		end := ts[i].Start + ts[i].Regs
		for j := i; j < n; j++ {
			if j > i {
				if ts[j].Start-end > maxGap {
					break
				}
				end = max(end, ts[j].Start+ts[j].Regs)
			}
			if end-ts[i].Start > maxRegs && j > i {
				break
			}
			if best[i]+1 < best[j+1] {
				best[j+1], from[j+1] = best[i]+1, i
			}
		}
	}
	var out []Request
	for j := n; j > 0; j = from[j] {
		i := from[j]
		end := 0
		for _, t := range ts[i:j] {
			end = max(end, t.Start+t.Regs)
		}
		out = append(out, Request{Start: ts[i].Start, Count: end - ts[i].Start})
	}
	for l, r := 0, len(out)-1; l < r; l, r = l+1, r-1 {
		out[l], out[r] = out[r], out[l]
	}
	return out
}
