package alarm

import (
	"errors"
	"strings"
	"testing"
	"time"

	"qubiq.dev/edge/value"
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

// TestRestart_ShelveBoundedByMaxShelve: a shelve restored after a restart
// lasts at most alarms.max_shelve: when max_shelve was lowered meanwhile,
// and when the clock stood years ahead when the shelve was made (an
// appliance without a battery clock, corrected by NTP later).
func TestRestart_ShelveBoundedByMaxShelve(t *testing.T) {
	dir := t.TempDir()
	def := "- {name: High, tag: Line1/Tank/Level, mode: above, setpoint: 90}\n"
	db := openStore(t, dir)
	h := newHarness(t, def, withStore(db))
	h.set("Line1/Tank/Level", 95.0)
	if res, err := h.e.Shelve(supervisor, []string{hiID}, 20*time.Hour, false); err != nil || res[0].Status != value.Good {
		t.Fatalf("shelve: %+v %v", res, err)
	}
	db.Close()

	db = openStore(t, dir)
	h2 := newHarness(t, def, withStore(db), func(o *Options) { o.Settings.MaxShelve = time.Hour })
	if a := h2.alarm(hiID); a.Shelf == nil || !a.Shelf.Until.Equal(t0.Add(time.Hour)) {
		t.Fatalf("shelf after a restart with max_shelve 1h: %+v, want it to end at +1h", a.Shelf)
	}
	h2.at(time.Hour)
	if a := h2.alarm(hiID); a.Shelf != nil {
		t.Fatalf("still shelved at +1h: %+v", a.Shelf)
	}
	// A shelve made while the clock stood five years ahead.
	future := t0.AddDate(5, 0, 0)
	h2.now = future
	if _, err := h2.e.Shelve(supervisor, []string{hiID}, 10*time.Minute, false); err != nil {
		t.Fatal(err)
	}
	db.Close()
	db = openStore(t, dir)
	defer db.Close()
	h3 := newHarness(t, def, withStore(db), func(o *Options) { o.Settings.MaxShelve = time.Hour })
	if a := h3.alarm(hiID); a.Shelf == nil || a.Shelf.Until.After(t0.Add(time.Hour)) {
		t.Fatalf("shelf made at a clock five years ahead, restored at the right time: %+v, want it to end within max_shelve", a.Shelf)
	}
}

// TestParse_MessageAndDisplayPathPlainText: an alarm's message and
// display_path are shown to operators; a terminal escape or a
// right-to-left override in them is a definition error naming the key.
func TestParse_MessageAndDisplayPathPlainText(t *testing.T) {
	for _, def := range []string{
		`- {name: High, tag: Line1/Tank/Level, mode: above, setpoint: 90, message: "level \e[31m{value}"}` + "\n",
		`- {name: High, tag: Line1/Tank/Level, mode: above, setpoint: 90, display_path: "Tank \u202e1"}` + "\n",
	} {
		if _, err := parseDefs(t, def); err == nil || !strings.Contains(err.Error(), "control character") {
			t.Errorf("%s: %v, want a definition error naming the control character", def, err)
		}
	}
	if _, err := parseDefs(t, `- {name: High, tag: Line1/Tank/Level, mode: above, setpoint: 90, display_path: "Tank 1 / Füllstand", message: "high: {value:.1f} {units}"}`+"\n"); err != nil {
		t.Errorf("plain text: %v", err)
	}
}
