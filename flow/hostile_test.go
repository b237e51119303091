package flow

import (
	"testing"

	"qubiq.dev/edge/gateway"
	"qubiq.dev/edge/value"
)

// TestEngine_FanOutBeyondOneNodeRun: a Python node returning 300 messages
// feeds a second Python node more messages than one node run takes
// (gateway.MaxNodeBatch); the second runs them all, in runs of at most
// that many, instead of failing every one.
func TestEngine_FanOutBeyondOneNodeRun(t *testing.T) {
	gw := newFakeGW()
	e := testEngine(t, gw, `
- name: fan
  trigger: {tag: Line1/In}
  nodes:
    - {id: split, type: python, next: each, code: "def transform(msg):  # behave: fanout\n    return msg\n"}
    - {id: each, type: python, code: "def transform(msg):  # behave: echo\n    return msg\n"}
`)
	gw.change("Line1/In", 1.0, value.Good)
	st := waitStatus(t, e, "fan", "processed", func(st gateway.FlowStatus) bool { return st.Counters.Processed == 1 })
	if st.Counters.Out != 300 || st.Counters.Errors != 0 {
		t.Fatalf("counters %+v last error %+v: want the 300 messages of the fan-out through the second node, no error", st.Counters, st.LastError)
	}
}
