package exepages

import (
	"strings"
	"testing"
)

// A /proc/self/smaps sample of a Go daemon: its executable (dev fe:00,
// inode 5309700) as text, rodata, data and bss; a RELRO-like read-only
// mapping of it with a page copied on write; the heap; the store's
// read-only shared mapping; the vdso.
const sample = `00400000-01c3b000 r-xp 00000000 fe:00 5309700                            /usr/lib/qubiq/current/bin/qubiqd
Size:              24812 kB
Rss:               12288 kB
Pss:               12288 kB
Anonymous:             0 kB
VmFlags: rd ex mr mw me
01c3b000-0357e000 r--p 0183b000 fe:00 5309700                            /usr/lib/qubiq/current/bin/qubiqd
Size:              25868 kB
Rss:                6144 kB
Anonymous:             0 kB
VmFlags: rd mr mw me
0357e000-0357f000 r--p 0317e000 fe:00 5309700                            /usr/lib/qubiq/current/bin/qubiqd
Size:                  4 kB
Rss:                   4 kB
Anonymous:             4 kB
0357f000-035d5000 rw-p 0317f000 fe:00 5309700                            /usr/lib/qubiq/current/bin/qubiqd
Size:                344 kB
Rss:                 300 kB
Anonymous:           120 kB
035d5000-03612000 rw-p 00000000 00:00 0
Rss:                 200 kB
Anonymous:           200 kB
c000000000-c004000000 rw-p 00000000 00:00 0
Rss:               30000 kB
Anonymous:         30000 kB
7f0000000000-7f0010000000 r--s 00000000 fe:00 5309999                    /var/lib/qubiq/data/qubiq.db
Rss:                6000 kB
Anonymous:             0 kB
7f0010000000-7f0010100000 r--p 00000000 fe:00 5309700                    /usr/lib/qubiq/current/bin/qubiqd (deleted)
Rss:                   0 kB
Anonymous:             0 kB
7ffd1a3f0000-7ffd1a3f2000 r-xp 00000000 00:00 0                          [vdso]
Rss:                   8 kB
Anonymous:             0 kB
`

// TestParseSmaps reads every region with its addresses, permissions,
// file, resident and anonymous bytes.
func TestParseSmaps(t *testing.T) {
	ms, err := ParseSmaps(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 9 {
		t.Fatalf("%d regions, want 9: %+v", len(ms), ms)
	}
	m := ms[0]
	if m.Start != 0x400000 || m.End != 0x1c3b000 || m.Perms != "r-xp" || m.Offset != 0 || m.Major != 0xfe || m.Minor != 0 ||
		m.Inode != 5309700 || m.Path != "/usr/lib/qubiq/current/bin/qubiqd" || m.Rss != 12288<<10 || m.Anonymous != 0 {
		t.Errorf("text: %+v", m)
	}
	if ms[3].Anonymous != 120<<10 || ms[3].Perms != "rw-p" {
		t.Errorf("data: %+v", ms[3])
	}
	if ms[4].Path != "" || ms[4].Inode != 0 {
		t.Errorf("bss: %+v", ms[4])
	}
	if ms[7].Path != "/usr/lib/qubiq/current/bin/qubiqd (deleted)" {
		t.Errorf("a path with a space: %q", ms[7].Path)
	}
}

// TestParseSmaps_RefusesAFieldBeforeAnyRegion: what is not smaps is an
// error, not an empty selection.
func TestParseSmaps_RefusesAFieldBeforeAnyRegion(t *testing.T) {
	if _, err := ParseSmaps(strings.NewReader("Rss: 4 kB\n")); err == nil {
		t.Error("no error for a field line before any region")
	}
}

// TestSelect_OnlyTheExecutablesCleanReadOnlyPrivatePages: the text and
// rodata of the executable, never a writable mapping (data, bss, heap),
// a read-only one holding a copied-on-write page, another file's mapping
// (the store), a mapping of nothing resident, or anonymous memory.
func TestSelect_OnlyTheExecutablesCleanReadOnlyPrivatePages(t *testing.T) {
	ms, err := ParseSmaps(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	got := Select(ms, 0xfe, 0, 5309700)
	if len(got) != 2 || got[0].Start != 0x400000 || got[1].Start != 0x1c3b000 {
		t.Fatalf("selected %+v, want the text and the rodata", got)
	}
	if got := Select(ms, 0xfe, 1, 5309700); len(got) != 0 {
		t.Errorf("another device: selected %+v", got)
	}
	if got := Select(ms, 0, 0, 0); len(got) != 0 {
		t.Errorf("inode 0 (anonymous memory): selected %+v", got)
	}
}
