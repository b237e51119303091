package daemon

import (
	"strings"
	"testing"
)

func TestJSONDepth(t *testing.T) {
	cases := map[string]int{
		`null`: 0, `[1,2]`: 1, `{"a":[{"b":1}]}`: 3, `"[[[["`: 0, `["\"[["]`: 1,
		strings.Repeat("[", 150) + strings.Repeat("]", 150): 150,
	}
	for in, want := range cases {
		if got := jsonDepth([]byte(in)); got != want {
			t.Errorf("jsonDepth(%.20s) = %d, want %d", in, got, want)
		}
	}
}
