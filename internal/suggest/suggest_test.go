package suggest

import "testing"

func TestDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{{"", "", 0}, {"listen", "listen", 0}, {"lisen", "listen", 1}, {"cmd/scripts/psuh", "cmd/scripts/push", 2}, {"", "abc", 3}, {"kitten", "sitting", 3}} {
		if got := Distance(c.a, c.b); got != c.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
		if got := Distance(c.b, c.a); got != c.want {
			t.Errorf("Distance(%q, %q) = %d, want %d (symmetric)", c.b, c.a, got, c.want)
		}
	}
}
