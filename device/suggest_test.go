package device

import "testing"

func TestSuggestKey(t *testing.T) {
	valid := []string{"url", "unit_id", "timeout", "listen", "max_gap"}
	hints := map[string]string{"host": "use url: tcp://HOST:PORT", "slave": `did you mean "unit_id"?`, "x": `did you mean "nope"?`}
	cases := map[string]string{
		"lisen":   `did you mean "listen"?`,
		"Unit-ID": `did you mean "unit_id"?`,
		"timout":  `did you mean "timeout"?`,
		"host":    "use url: tcp://HOST:PORT",
		"slave":   `did you mean "unit_id"?`,
		"colour":  "",
		"ur":      "", // too short to guess from
		"x":       "", // the hint's key is not valid here
	}
	for in, want := range cases {
		if got := SuggestKey(in, valid, hints); got != want {
			t.Errorf("Key(%q) = %q, want %q", in, got, want)
		}
	}
}
