// Package exepages gives back the resident pages of the daemon's own
// executable once start-up is over (docs/config.md, memory.exe_pages).
//
// The kernel maps an executable's pages into the process as they are first
// touched, each fault mapping the whole cached block around it (64 KiB of
// fault-around, or a whole large folio of the page cache: up to 2 MiB
// when the file was written through a mapping, as the Go linker writes
// it). Package initialisation, the configuration, the project import and
// the API's first requests touch most of a 38 MB binary that way, and
// those pages stay in the process's resident set for its whole life.
// Release drops them: MADV_DONTNEED on the executable's private read-only
// mappings (text, rodata, pclntab) whose pages are all clean (smaps'
// Anonymous is 0: never copied on write, so the file holds exactly what is
// mapped). The pages stay in the page cache, shared and reclaimable; what
// the daemon runs afterwards faults back in, so its resident set becomes
// what it keeps using. Anonymous memory, the heap and writable mappings
// are never touched. On systems other than Linux Release does nothing.
//
// exepages imports the standard library and golang.org/x/sys/unix only.
package exepages

import (
	"bufio"
	"io"
	"strconv"
	"strings"
)

// Mapping is one region of /proc/self/smaps: its addresses [Start, End),
// permissions ("r-xp"), file offset, device (major, minor) and inode, path
// (empty for anonymous memory), and its resident and anonymous (copied on
// write, for a file mapping) bytes.
type Mapping struct {
	Start, End   uintptr
	Perms        string
	Offset       uint64
	Major, Minor uint32
	Inode        uint64
	Path         string
	Rss          int64
	Anonymous    int64
}

// ParseSmaps reads the regions of a /proc/PID/smaps document. A header
// line it cannot read ends the parse with the regions read so far and an
// error; unknown field lines are skipped.
func ParseSmaps(r io.Reader) ([]Mapping, error) {
	var out []Mapping
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if m, ok := parseHeader(line); ok {
			out = append(out, m)
			continue
		}
		if len(out) == 0 {
			return nil, &ParseError{Line: line}
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch k {
		case "Rss":
			out[len(out)-1].Rss = kB(v)
		case "Anonymous":
			out[len(out)-1].Anonymous = kB(v)
		}
	}
	return out, sc.Err()
}

// ParseError is a /proc/PID/smaps line that is neither a region header nor
// a field of one.
type ParseError struct{ Line string }

// Error names the line.
func (e *ParseError) Error() string { return "smaps: unexpected line " + strconv.Quote(e.Line) }

// parseHeader reads "start-end perms offset major:minor inode [path]".
func parseHeader(line string) (Mapping, bool) {
	f := strings.Fields(line)
	if len(f) < 5 {
		return Mapping{}, false
	}
	lo, hi, ok := strings.Cut(f[0], "-")
	if !ok || len(f[1]) != 4 {
		return Mapping{}, false
	}
	start, err1 := strconv.ParseUint(lo, 16, 64)
	end, err2 := strconv.ParseUint(hi, 16, 64)
	off, err3 := strconv.ParseUint(f[2], 16, 64)
	maj, min, ok2 := strings.Cut(f[3], ":")
	ma, err4 := strconv.ParseUint(maj, 16, 32)
	mi, err5 := strconv.ParseUint(min, 16, 32)
	ino, err6 := strconv.ParseUint(f[4], 10, 64)
	for _, err := range []error{err1, err2, err3, err4, err5, err6} {
		if err != nil {
			return Mapping{}, false
		}
	}
	if !ok2 || end < start {
		return Mapping{}, false
	}
	m := Mapping{Start: uintptr(start), End: uintptr(end), Perms: f[1], Offset: off,
		Major: uint32(ma), Minor: uint32(mi), Inode: ino}
	if len(f) > 5 {
		m.Path = strings.Join(f[5:], " ")
	}
	return m, true
}

// kB reads a smaps field's " 123 kB" as bytes (0 when unreadable).
func kB(v string) int64 {
	n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
	if err != nil {
		return 0
	}
	return n << 10
}

// Select returns the mappings Release may drop: those of the file
// (major, minor, inode) that are private, readable and not writable, with
// resident pages and none of them anonymous (a page copied on write, as
// a dynamic loader's relocations leave in a RELRO segment, would be lost).
func Select(ms []Mapping, major, minor uint32, inode uint64) []Mapping {
	var out []Mapping
	for _, m := range ms {
		if m.Inode != inode || inode == 0 || m.Major != major || m.Minor != minor {
			continue
		}
		if m.Perms[0] != 'r' || m.Perms[1] != '-' || m.Perms[3] != 'p' {
			continue
		}
		if m.Anonymous != 0 || m.Rss == 0 {
			continue
		}
		out = append(out, m)
	}
	return out
}
