package main

import (
	"encoding/binary"
	"testing"
)

// TestRequests_PlanOfTheBenchmark: 2,000 registers in requests of at most
// 124 are the 17 requests qubiqd's plan sends (no float32 straddles two),
// each a well-formed FC3 frame whose response length is 9 + 2·count.
func TestRequests_PlanOfTheBenchmark(t *testing.T) {
	reqs := requests(2000, 124)
	if len(reqs) != 17 {
		t.Fatalf("%d requests, want 17", len(reqs))
	}
	next := 0
	for i, r := range reqs {
		f := r.frame
		start, count := int(binary.BigEndian.Uint16(f[8:])), int(binary.BigEndian.Uint16(f[10:]))
		if len(f) != 12 || binary.BigEndian.Uint16(f[4:]) != 6 || f[6] != 1 || f[7] != 3 {
			t.Fatalf("request %d: frame % x, want MBAP length 6, unit 1, FC3", i, f)
		}
		if start != next || count > 124 || count%2 != 0 {
			t.Errorf("request %d: start %d count %d, want start %d, an even count <= 124", i, start, count, next)
		}
		if r.response != 9+2*count {
			t.Errorf("request %d: response length %d, want %d", i, r.response, 9+2*count)
		}
		next = start + count
	}
	if next != 2000 {
		t.Errorf("requests cover registers 0 to %d, want 2000", next)
	}
}
