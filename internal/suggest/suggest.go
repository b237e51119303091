// Package suggest measures how far a mistyped word is from the words it
// may have meant: the edit distance behind every "did you mean" of the
// project (unknown config keys in package device and config, qubiqctl's
// command topics). It imports the standard library only, so the CLI,
// which links no daemon code, shares it.
package suggest

// Distance is the Levenshtein edit distance of a and b, in bytes: the
// fewest single-byte insertions, deletions and substitutions that turn a
// into b.
func Distance(a, b string) int {
	prev, cur := make([]int, len(b)+1), make([]int, len(b)+1)
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
