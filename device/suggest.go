package device

import (
	"fmt"
	"strings"

	"qubiq.dev/edge/internal/suggest"
)

// Key suggestions: when a config file holds a key that is not valid, the
// key a person most likely meant ("lisen" → "listen", "host" → "use url:
// tcp://HOST:PORT"). DecodeStrict (the drivers' JSON keys) and package
// config (the YAML keys) share it, so a wrong key gets the same kind of
// hint wherever it is written.

// SuggestKey returns a hint for the unknown key: hints[lower(key)] when there is
// one (a hint that names a key in quotes only when that key is valid here),
// else `did you mean "K"?` for the valid key K nearest to key (the same
// apart from case, '-' and '_', or at most 2 edits away for a key of more
// than 2 characters), else "".
func SuggestKey(key string, valid []string, hints map[string]string) string {
	if h, ok := hints[strings.ToLower(key)]; ok {
		if !strings.Contains(h, `"`) {
			return h
		}
		for _, v := range valid {
			if strings.Contains(h, `"`+v+`"`) {
				return h
			}
		}
	}
	norm := func(s string) string { return strings.ReplaceAll(strings.ToLower(s), "-", "_") }
	best, dist := "", 3
	for _, v := range valid {
		if norm(v) == norm(key) {
			return fmt.Sprintf("did you mean %q?", v)
		}
		if d := suggest.Distance(key, v); d < dist {
			best, dist = v, d
		}
	}
	if best != "" && len(key) > 2 {
		return fmt.Sprintf("did you mean %q?", best)
	}
	return ""
}
