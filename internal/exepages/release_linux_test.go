package exepages

import (
	"testing"
)

// TestRelease_DropsThisProcesssExecutablePages: in the test binary itself,
// Release finds resident pages of its executable, drops them without
// error, and the process goes on running from them (they fault back in).
func TestRelease_DropsThisProcesssExecutablePages(t *testing.T) {
	n, err := Release()
	if err != nil {
		t.Fatal(err)
	}
	if n <= 0 {
		t.Fatalf("released %d bytes, want the executable's resident pages", n)
	}
	if _, err := Release(); err != nil { // the code it runs came back: it runs again
		t.Fatal(err)
	}
}
