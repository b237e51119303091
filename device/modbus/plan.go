package modbus

import "sort"

// item is one point of a Read, parsed: idx is its index in the Read's
// points and results.
type item struct {
	idx  int
	unit byte
	spec spec
}

func (it item) start() int { return int(it.spec.addr.Offset) }
func (it item) end() int   { return it.start() + it.spec.registers() }

// request is one read request on the wire: function code fc (1-4) on unit,
// quantity qty registers (or bits) from start, and the items it serves.
type request struct {
	unit  byte
	fc    byte
	start int
	qty   int
	items []item
}

// reqKey identifies a request for the split memory.
type reqKey struct {
	unit, fc byte
	start    uint16
	qty      int
}

func (r request) key() reqKey { return reqKey{r.unit, r.fc, uint16(r.start), r.qty} }

func (r request) end() int { return r.start + r.qty }

// plan groups items by unit and function code, in address order, and merges
// neighbours into one request while the gap between them is at most maxGap
// registers (or bits) and the request stays within maxRegs registers (2000
// bits for coils and discrete inputs; Modbus Application Protocol §6.1-6.4).
// A single point larger than maxRegs gets a request of its own size. A merged
// request that split reports (one that failed with exception 2 before) is
// replaced by its parts (cases/modbus.md C07).
func plan(items []item, maxGap, maxRegs int, split func(reqKey) bool) []request {
	sorted := make([]item, len(items))
	copy(sorted, items)
	sort.SliceStable(sorted, func(i, j int) bool {
		a, b := sorted[i], sorted[j]
		if a.unit != b.unit {
			return a.unit < b.unit
		}
		if fa, fb := a.spec.addr.Table.readFunction(), b.spec.addr.Table.readFunction(); fa != fb {
			return fa < fb
		}
		if a.start() != b.start() {
			return a.start() < b.start()
		}
		return a.end() < b.end()
	})
	var out []request
	var cur *request
	for _, it := range sorted {
		fc := it.spec.addr.Table.readFunction()
		limit := maxRegs
		if it.spec.addr.Table.IsBits() {
			limit = MaxBitsPerRequest
		}
		if cur != nil && cur.unit == it.unit && cur.fc == fc && it.start() <= cur.end()+maxGap &&
			max(it.end(), cur.end())-cur.start <= limit {
			cur.qty = max(it.end(), cur.end()) - cur.start
			cur.items = append(cur.items, it)
			continue
		}
		if cur != nil {
			out = append(out, *cur)
		}
		cur = &request{unit: it.unit, fc: fc, start: it.start(), qty: it.end() - it.start(), items: []item{it}}
	}
	if cur != nil {
		out = append(out, *cur)
	}
	if split == nil {
		return out
	}
	var expanded []request
	for _, r := range out {
		expanded = append(expanded, expand(r, split)...)
	}
	return expanded
}

func expand(r request, split func(reqKey) bool) []request {
	if len(r.items) < 2 || !split(r.key()) {
		return []request{r}
	}
	var out []request
	for _, s := range splitRequest(r) {
		out = append(out, expand(s, split)...)
	}
	return out
}

// splitRequest breaks r into the runs of items that touch or overlap (no
// gap bridged); a request that is already one run is broken into its items,
// so that repeated splitting isolates the one point the device refuses.
func splitRequest(r request) []request {
	var runs []request
	for _, it := range r.items { // items are in address order
		if n := len(runs); n > 0 && it.start() <= runs[n-1].end() {
			last := &runs[n-1]
			last.qty = max(it.end(), last.end()) - last.start
			last.items = append(last.items, it)
			continue
		}
		runs = append(runs, request{unit: r.unit, fc: r.fc, start: it.start(), qty: it.end() - it.start(), items: []item{it}})
	}
	if len(runs) > 1 {
		return runs
	}
	out := make([]request, 0, len(r.items))
	for _, it := range r.items {
		out = append(out, request{unit: r.unit, fc: r.fc, start: it.start(), qty: it.end() - it.start(), items: []item{it}})
	}
	return out
}
