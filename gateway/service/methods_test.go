package service

import (
	"slices"
	"testing"

	"qubiq.dev/edge/sandbox"
)

// TestMethods_EveryRowImplemented: the service implements exactly the rows
// of the system.* method table (sandbox.Methods), in both directions; the
// table's other copies (Python stubs, METHODS.md, the contract's scope
// table) are held to it by sandbox/methods_test.go.
func TestMethods_EveryRowImplemented(t *testing.T) {
	var rows []string
	for _, m := range sandbox.Methods() {
		rows = append(rows, m.Name)
		if _, ok := methods[m.Name]; !ok {
			t.Errorf("sandbox.Methods has %s, which the service does not implement (methods.go)", m.Name)
		}
	}
	for name := range methods {
		if !slices.Contains(rows, name) {
			t.Errorf("the service implements %s, which has no row in sandbox.Methods: the dispatcher would never let a script call it", name)
		}
	}
}

func TestJSONDepth(t *testing.T) {
	cases := map[string]int{
		`null`: 0, `[1,2]`: 1, `{"a":[{"b":1}]}`: 3, `"[[[["`: 0, `["\"[["]`: 1,
		string(make([]byte, 0)): 0,
	}
	deep := ""
	for range 150 {
		deep += "["
	}
	for range 150 {
		deep += "]"
	}
	cases[deep] = 150
	for in, want := range cases {
		if got := jsonDepth([]byte(in)); got != want {
			t.Errorf("jsonDepth(%.20s) = %d, want %d", in, got, want)
		}
	}
}
