package config

import (
	"fmt"
	"strings"
)

// Memory is the daemon's own memory (docs/config.md, memory). Limit is the
// Go runtime's soft memory limit as written: "auto" (the default: one and a
// half times the live heap, followed as it changes), "unlimited", or a size
// of at least 16 MiB. LoadDaemon resolves it into LimitBytes: MemoryAuto,
// 0 for unlimited, else the size. ExePages is what the daemon does with
// its executable's resident pages once started: "release" (the default:
// drop them, so that only the pages it keeps using come back) or "keep".
type Memory struct {
	Limit      string `yaml:"limit"`
	LimitBytes int64  `yaml:"-"`
	ExePages   string `yaml:"exe_pages"`
}

// ExePagesRelease and ExePagesKeep are the values of Memory.ExePages.
const (
	ExePagesRelease = "release"
	ExePagesKeep    = "keep"
)

// MemoryAuto is Memory.LimitBytes for memory.limit: auto.
const MemoryAuto = -1

// resolveMemory checks memory.limit and sets LimitBytes, and checks
// memory.exe_pages (empty is release).
func resolveMemory(file string, m *Memory) []error {
	switch v := strings.ToLower(strings.TrimSpace(m.ExePages)); v {
	case "", ExePagesRelease:
		m.ExePages = ExePagesRelease
	case ExePagesKeep:
		m.ExePages = v
	default:
		return []error{fmt.Errorf("%s: memory.exe_pages: %q is neither %s nor %s", file, m.ExePages, ExePagesRelease, ExePagesKeep)}
	}
	switch v := strings.TrimSpace(m.Limit); {
	case v == "" || strings.EqualFold(v, "auto"):
		m.Limit, m.LimitBytes = "auto", MemoryAuto
	case strings.EqualFold(v, Unlimited):
		m.LimitBytes = 0
	default:
		n, err := ParseSize(v)
		if err != nil {
			return []error{fmt.Errorf("%s: memory.limit: %v, auto or %s", file, err, Unlimited)}
		}
		if n < 16<<20 {
			return []error{fmt.Errorf("%s: memory.limit: %s is below 16 MiB (write auto, or %s to turn the limit off)", file, v, Unlimited)}
		}
		m.LimitBytes = n
	}
	return nil
}
