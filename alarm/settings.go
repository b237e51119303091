package alarm

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Settings are the daemon-wide alarm settings: the alarms: section of the
// daemon config (docs/alarms.md, "Daemon settings"). Zero fields take the
// defaults (DefaultSettings).
type Settings struct {
	// JournalMaxAge and JournalMaxBytes are the journal's retention: the
	// oldest entries go when older than the age or while the journal's
	// encoded size is above the bytes. 0 turns a limit off only through
	// ParseSettings' explicit "unlimited".
	JournalMaxAge   time.Duration
	JournalMaxBytes int64
	// Chattering is the default chattering rule (a definition may set its
	// own).
	Chattering Chattering
	// MaxShelve is the longest a shelve may last (shelving is never
	// forever).
	MaxShelve time.Duration
	// FeedBuffer is the room of the alarms' own subscription to the tag
	// engine, in changes.
	FeedBuffer int
	// RetentionEvery is how often retention runs.
	RetentionEvery time.Duration

	unlimitedAge, unlimitedBytes bool
}

// DefaultSettings are the defaults: a journal of at most 90 days and 256
// MiB; chattering at 3 activations in 60 s (ISA-18.2-2016 §16.5); shelving
// for at most 24 h; a feed of 65,536 changes; retention every minute.
var DefaultSettings = Settings{
	JournalMaxAge:   90 * 24 * time.Hour,
	JournalMaxBytes: 256 << 20,
	Chattering:      Chattering{Count: 3, Window: 60 * time.Second},
	MaxShelve:       24 * time.Hour,
	FeedBuffer:      65536,
	RetentionEvery:  time.Minute,
}

func (s Settings) withDefaults() Settings {
	d := DefaultSettings
	if s.JournalMaxAge == 0 && !s.unlimitedAge {
		s.JournalMaxAge = d.JournalMaxAge
	}
	if s.JournalMaxBytes == 0 && !s.unlimitedBytes {
		s.JournalMaxBytes = d.JournalMaxBytes
	}
	if s.Chattering.Count == 0 {
		s.Chattering.Count = d.Chattering.Count
	}
	if s.Chattering.Window == 0 {
		s.Chattering.Window = d.Chattering.Window
	}
	if s.MaxShelve == 0 {
		s.MaxShelve = d.MaxShelve
	}
	if s.FeedBuffer == 0 {
		s.FeedBuffer = d.FeedBuffer
	}
	if s.RetentionEvery == 0 {
		s.RetentionEvery = d.RetentionEvery
	}
	return s
}

// ParseSettings reads the daemon config's alarms: section (n is nil or
// the zero Node when absent):
//
//	alarms:
//	  journal: {max_age: 90d, max_bytes: 256MiB}   # either may be "unlimited"
//	  chattering: {count: 3, window: 60s}
//	  max_shelve: 24h
//	  feed_buffer: 65536
//
// Unknown keys and bad values are errors naming the key and its line.
func ParseSettings(n *yaml.Node) (Settings, error) {
	var s Settings
	if n == nil || n.Kind == 0 || (n.Kind == yaml.ScalarNode && n.Tag == "!!null") {
		return s.withDefaults(), nil
	}
	if n.Kind != yaml.MappingNode {
		return s, fmt.Errorf("line %d: alarms: want a mapping (journal, chattering, max_shelve, feed_buffer)", n.Line)
	}
	var errs []error
	bad := func(k *yaml.Node, format string, args ...any) {
		errs = append(errs, fmt.Errorf("line %d: alarms.%s: %s", k.Line, k.Value, fmt.Sprintf(format, args...)))
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		switch k.Value {
		case "journal":
			if v.Kind != yaml.MappingNode {
				bad(k, "want {max_age: 90d, max_bytes: 256MiB}")
				continue
			}
			for j := 0; j+1 < len(v.Content); j += 2 {
				jk, jv := v.Content[j], v.Content[j+1]
				switch jk.Value {
				case "max_age":
					if jv.Value == "unlimited" {
						s.unlimitedAge = true
						continue
					}
					d, err := parseDuration(jv)
					if err != nil || d <= 0 {
						bad(k, "max_age %q: want a positive duration such as 90d, or unlimited", jv.Value)
					}
					s.JournalMaxAge = d
				case "max_bytes":
					if jv.Value == "unlimited" {
						s.unlimitedBytes = true
						continue
					}
					b, err := parseSize(jv.Value)
					if err != nil || b <= 0 {
						bad(k, "max_bytes %q: want a size such as 256MiB, or unlimited", jv.Value)
					}
					s.JournalMaxBytes = b
				default:
					bad(k, "unknown key %q (want max_age, max_bytes)", jk.Value)
				}
			}
		case "chattering":
			c, err := parseChattering(v)
			if err != nil {
				bad(k, "%v", err)
			}
			s.Chattering = c
		case "max_shelve":
			d, err := parseDuration(v)
			if err != nil || d <= 0 {
				bad(k, "%q: want a positive duration such as 24h", v.Value)
			}
			s.MaxShelve = d
		case "feed_buffer":
			if v.Decode(&s.FeedBuffer) != nil || s.FeedBuffer < 1024 {
				bad(k, "%q: want a whole number of changes, 1024 or more", v.Value)
			}
		default:
			bad(k, "unknown key (want journal, chattering, max_shelve, feed_buffer)")
		}
	}
	if len(errs) > 0 {
		return s, errors.Join(errs...)
	}
	return s.withDefaults(), nil
}

var sizeRe = regexp.MustCompile(`^(\d+(?:\.\d+)?)\s*([KMGT]i?B|B)?$`)

// parseSize reads a size with an optional unit (B, KB, KiB, MB, MiB, GB,
// GiB, TB, TiB).
func parseSize(s string) (int64, error) {
	m := sizeRe.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return 0, fmt.Errorf("bad size %q", s)
	}
	f, _ := strconv.ParseFloat(m[1], 64)
	mult := map[string]float64{"": 1, "B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
		"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}[m[2]]
	v := f * mult
	if v > math.MaxInt64 {
		return 0, fmt.Errorf("size %q too large", s)
	}
	return int64(v), nil
}
