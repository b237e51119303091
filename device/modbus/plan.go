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

// reqKey identifies a request for the split memory: a request the device
// refused with exception 2 or 3 maps to that exception code.
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
// request for which split reports an exception code (the device refused it
// before with exception 2 or 3) is replaced by its parts, as splitRequest
// cuts them (docs/modbus.md, fault C07).
func plan(items []item, maxGap, maxRegs int, split func(reqKey) byte) []request {
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

func expand(r request, split func(reqKey) byte) []request {
	if len(r.items) < 2 {
		return []request{r}
	}
	if split(r.key()) == 0 {
		return []request{r}
	}
	var out []request
	for _, s := range splitRequest(r) {
		out = append(out, expand(s, split)...)
	}
	return out
}

// splitRequest breaks r, which the device refused with exception 2
// (illegal data address: a bridged gap the device lacks) or 3 (illegal
// data value: typically more registers than the device takes in one
// request), into two halves of about equal span, cut at the item boundary
// that makes the larger part's span smallest. Repeated halving isolates a
// hole in a few steps and keeps every part that the device accepts merged,
// and converges on a device's per-request limit, instead of falling back to
// one request per point (docs/modbus.md, fault C07). A request of one item
// cannot be split.
func splitRequest(r request) []request {
	n := len(r.items)
	if n < 2 {
		return []request{r}
	}
	// prefEnd[i] is the end of items[:i+1], sufEnd[i] the end of items[i:].
	prefEnd := make([]int, n)
	for i, it := range r.items {
		prefEnd[i] = it.end()
		if i > 0 {
			prefEnd[i] = max(prefEnd[i], prefEnd[i-1])
		}
	}
	sufEnd := make([]int, n)
	for i := n - 1; i >= 0; i-- {
		sufEnd[i] = r.items[i].end()
		if i < n-1 {
			sufEnd[i] = max(sufEnd[i], sufEnd[i+1])
		}
	}
	best, bestSpan := 1, -1
	for k := 1; k < n; k++ {
		span := max(prefEnd[k-1]-r.items[0].start(), sufEnd[k]-r.items[k].start())
		if bestSpan < 0 || span < bestSpan {
			best, bestSpan = k, span
		}
	}
	part := func(its []item) request {
		end := its[0].end()
		for _, it := range its {
			end = max(end, it.end())
		}
		return request{unit: r.unit, fc: r.fc, start: its[0].start(), qty: end - its[0].start(),
			items: append([]item(nil), its...)}
	}
	return []request{part(r.items[:best]), part(r.items[best:])}
}
