package alarm

import (
	"errors"
	"strings"
	"testing"
)

// TestAddNote_PlainTextOnly: a note with a terminal escape, a NUL, a
// right-to-left override or invalid UTF-8 is refused (ErrInvalid) and not
// stored; newlines and tabs are text.
func TestAddNote_PlainTextOnly(t *testing.T) {
	h := newHarness(t, "- {name: High, tag: Line1/Tank/Level, mode: above, setpoint: 90}\n")
	for _, text := range []string{"pump \x1b[2J\x1b[31mOK", "nul\x00byte", "fine \u202etxt.exe", "bad \xff\xfe utf8", "bell\a", "c1 \u0085 next line"} {
		if err := h.e.AddNote(operator, hiID, text); !errors.Is(err, ErrInvalid) {
			t.Errorf("note %q: %v, want ErrInvalid", text, err)
		}
	}
	if a := h.alarm(hiID); len(a.Notes) != 0 {
		t.Fatalf("refused notes were stored: %+v", a.Notes)
	}
	if err := h.e.AddNote(operator, hiID, "pump 2:\n\tchecked, Füllstand ok"); err != nil {
		t.Fatalf("a note with a newline and a tab: %v", err)
	}
	if a := h.alarm(hiID); len(a.Notes) != 1 || !strings.Contains(a.Notes[0].Text, "\n\tchecked") {
		t.Errorf("notes %+v", a.Notes)
	}
}
