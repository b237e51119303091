package cgroup

import (
	"bufio"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// mount is one cgroup mount from mountinfo.
type mount struct {
	root, point string
	v2          bool
	controllers []string
}

func (h Host) defaults() Host {
	if h.CgroupMap == "" {
		h.CgroupMap = "/proc/self/cgroup"
	}
	if h.MountInfo == "" {
		h.MountInfo = "/proc/self/mountinfo"
	}
	if h.PID == 0 {
		h.PID = os.Getpid()
	}
	return h
}

func (h Host) path(p string) string { return filepath.Join(h.Root, p) }

// parseMountInfo returns the cgroup and cgroup2 mounts of a mountinfo file
// (proc(5): "... root mountpoint ... - fstype source superoptions").
func parseMountInfo(b []byte) []mount {
	var out []mount
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		sep := slices.Index(f, "-")
		if sep < 5 || sep+3 > len(f) {
			continue
		}
		fstype := f[sep+1]
		m := mount{root: unescape(f[3]), point: unescape(f[4])}
		switch fstype {
		case "cgroup2":
			m.v2 = true
		case "cgroup":
			for _, o := range strings.Split(f[sep+3], ",") {
				switch o {
				case "rw", "ro", "":
				default:
					if !strings.Contains(o, "=") {
						m.controllers = append(m.controllers, o)
					}
				}
			}
		default:
			continue
		}
		out = append(out, m)
	}
	return out
}

// unescape undoes mountinfo's octal escapes (\040 for a space).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// parseCgroupMap returns controller → path from /proc/self/cgroup; the v2
// entry ("0::/path") is under "".
func parseCgroupMap(b []byte) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[1] == "" {
			if parts[0] == "0" {
				out[""] = parts[2]
			}
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			out[c] = parts[2]
		}
	}
	return out
}

// dirOf joins a mount and a cgroup path seen from it.
func dirOf(h Host, m mount, cgPath string) string {
	rel := cgPath
	if m.root != "/" && strings.HasPrefix(cgPath, m.root) {
		rel = strings.TrimPrefix(cgPath, m.root)
	}
	return h.path(filepath.Join(m.point, rel))
}
