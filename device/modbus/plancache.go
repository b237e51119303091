package modbus

import (
	"slices"
	"sync"

	"qubiq.dev/edge/device"
	"qubiq.dev/edge/value"
)

// planCacheSize is how many point sets (scan classes) a Driver keeps plans
// for.
const planCacheSize = 8

// planCache keeps the plans of the point sets a Driver reads, so that a
// scan of unchanged points neither parses nor sorts them again: the plan
// is computed once per configuration change (issue 5, request planning)
// and again after the device forced a split. A cached plan is used only
// for a point set equal, point for point, to the one it was made for:
// the same slice (ReadInto's callers do not modify it, device.IntoReader),
// known by its address and length without comparing, or an equal one.
type planCache struct {
	mu      sync.Mutex
	entries []*cachedPlan // most recently used first
}

// cachedPlan is the plan of one point set under split generation gen; bad
// lists the points whose address does not parse, with the reason.
type cachedPlan struct {
	points []device.Point // the caller's slice (ReadInto) or a copy (Read)
	gen    uint64
	reqs   []request
	bad    []badPoint

	lastMu sync.Mutex  // guards last
	last   []lastValue // by point index: the number decoded at the last scan (readRequest)
}

// lastValue is a number decoded from registers, and those registers
// (registerKey).
type lastValue struct {
	key uint64
	v   value.Value
}

type badPoint struct {
	idx    int
	reason string
}

// get returns the plan of points made under gen, or nil.
func (c *planCache) get(points []device.Point, gen uint64) *cachedPlan {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, e := range c.entries {
		if e.gen == gen && (sameSlice(e.points, points) || slices.Equal(e.points, points)) {
			copy(c.entries[1:i+1], c.entries[:i])
			c.entries[0] = e
			return e
		}
	}
	return nil
}

// put stores p, dropping the least recently used plan beyond planCacheSize.
func (c *planCache) put(p *cachedPlan) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries = slices.DeleteFunc(c.entries, func(e *cachedPlan) bool { return slices.Equal(e.points, p.points) })
	c.entries = append([]*cachedPlan{p}, c.entries...)
	if len(c.entries) > planCacheSize {
		c.entries = c.entries[:planCacheSize]
	}
}

// sameSlice reports whether a and b are the same slice: the same first
// element and length.
func sameSlice(a, b []device.Point) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}
