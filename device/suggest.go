package device

import (
	"fmt"
	"strings"
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
		if d := editDistance(key, v); d < dist {
			best, dist = v, d
		}
	}
	if best != "" && len(key) > 2 {
		return fmt.Sprintf("did you mean %q?", best)
	}
	return ""
}

// editDistance is the Levenshtein edit distance of a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := 1
			if a[i-1] == b[j-1] {
				c = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+c)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
