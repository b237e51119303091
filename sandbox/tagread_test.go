package sandbox

import (
	"context"
	"math"
	"testing"
	"time"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/value"
)

// columnServices serves tag.read through the TagReader fast path from a
// fixed list of VQTs (by path).
type columnServices struct {
	*fakeServices
	vqts map[string]value.VQT
}

func (c *columnServices) ReadTags(_ context.Context, _ auth.Grant, paths []string) ([]value.VQT, error) {
	out := make([]value.VQT, len(paths))
	for i, p := range paths {
		v, ok := c.vqts[p]
		if !ok {
			v = value.Bad(value.BadNodeIDUnknown, "unknown tag", time.Date(2024, 5, 1, 10, 0, 1, 0, time.UTC))
		}
		out[i] = v
	}
	return out, nil
}

// The binary column answer reads in the script as the JSON answer did:
// ints exact (beyond int64 too), floats as floats, NaN and the infinities
// as None, invalid UTF-8 as U+FFFD, nested arrays as lists, each row's
// quality, time and reason, and the one-quality, one-time form.
func TestPool_Run_TagRead_ColumnAnswer(t *testing.T) {
	ts := time.Date(2024, 5, 1, 10, 0, 0, 123456789, time.UTC)
	svc := &columnServices{fakeServices: newFakeServices(), vqts: map[string]value.VQT{
		"F":   {Value: 42.5, Quality: value.Good, Time: ts},
		"I":   {Value: int32(-7), Quality: value.Good, Time: ts},
		"U":   {Value: uint64(math.MaxUint64), Quality: value.Good, Time: ts},
		"L":   {Value: int64(1) << 40, Quality: value.Good, Time: ts},
		"S":   {Value: "é\xff", Quality: value.Good, Time: ts},
		"B":   {Value: true, Quality: value.Good, Time: ts},
		"N":   {Value: nil, Quality: value.Good, Time: ts},
		"NaN": {Value: math.NaN(), Quality: value.Good, Time: ts},
		"W":   {Value: float32(1), Quality: value.Good, Time: ts},
		"A":   {Value: []any{1.5, "x", []any{int64(2)}, math.Inf(1)}, Quality: value.Good, Time: ts},
	}}
	p := startPool(t, testConfig(t), svc)
	load(t, p, "m", `
KINDS = {float: "float", int: "int", str: "str", bool: "bool", list: "list", type(None): "NoneType"}

def rows(qvs):
    return [[q.path, q.value, KINDS[type(q.value)], q.quality, q.timestamp.isoformat() if q.timestamp else None,
             q.reason] for q in qvs]

def all(args):
    return rows(system.tag.read(["F", "I", "U", "L", "S", "B", "N", "NaN", "W", "A", "Nope"]))

def same(args):
    return rows(system.tag.read(["F", "B"])) + rows(system.tag.read(["Nope"])) + rows(system.tag.read([]))
`)
	g := auth.Grant{Principal: "op1", Scopes: []auth.Scope{auth.TagRead}}
	got := mustRun(t, p, g, "m", "all", `null`)
	const at = `"2024-05-01T10:00:00.123456+00:00"`
	want := `[["F",42.5,"float","Good",` + at + `,null],["I",-7,"int","Good",` + at + `,null],` +
		`["U",18446744073709551615,"int","Good",` + at + `,null],["L",1099511627776,"int","Good",` + at + `,null],` +
		`["S","é` + "\uFFFD" + `","str","Good",` + at + `,null],["B",true,"bool","Good",` + at + `,null],` +
		`["N",null,"NoneType","Good",` + at + `,null],["NaN",null,"NoneType","Good",` + at + `,null],` +
		`["W",1.0,"float","Good",` + at + `,null],["A",[1.5,"x",[2],null],"list","Good",` + at + `,null],` +
		`["Nope",null,"NoneType","Bad_NodeIdUnknown","2024-05-01T10:00:01+00:00","unknown tag"]]`
	if got != want {
		t.Errorf("all:\n%s\nwant\n%s", got, want)
	}
	got = mustRun(t, p, g, "m", "same", `null`)
	want = `[["F",42.5,"float","Good",` + at + `,null],["B",true,"bool","Good",` + at + `,null],` +
		`["Nope",null,"NoneType","Bad_NodeIdUnknown","2024-05-01T10:00:01+00:00","unknown tag"]]`
	if got != want {
		t.Errorf("same:\n%s\nwant\n%s", got, want)
	}
}
