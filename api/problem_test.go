package api

import (
	"fmt"
	"testing"
)

// TestClassify_DetailDoesNotRepeatTheKind: the problem's title and kind
// say what kind of fault it is, so its detail does not start with the
// kind's words again ("Conflict" + "conflict: install ...").
func TestClassify_DetailDoesNotRepeatTheKind(t *testing.T) {
	for err, want := range map[error]string{
		fmt.Errorf("%w: install requests==2.32.3: another package operation is running", ErrConflict): "install requests==2.32.3: another package operation is running",
		fmt.Errorf("%w: remove requests: package not installed", ErrNotFound):                         "remove requests: package not installed",
		fmt.Errorf("%w: missing \"name\"", ErrInvalid):                                                `missing "name"`,
		fmt.Errorf("user %q: %w", "nobody", ErrNotFound):                                              `user "nobody": not found`,
	} {
		if p, _, _ := classify(err); p.Detail != want {
			t.Errorf("detail %q; want %q", p.Detail, want)
		}
	}
}
