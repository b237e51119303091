package daemon

import (
	"fmt"
	"slices"

	"qubiq.dev/edge/config"
)

// The daemon config's sections and who acts on them (docs/config.md,
// "Warnings"). A section written in the file is acted on when a part of
// the same name runs (the "store" part acts on store:, an "mqtt" part on
// mqtt:), or when the part owning it set a predicate here. A predicate
// returns what of its section, as written, the daemon does not act on, or
// a safety it turns off; each such text is a health warning, logged at
// start-up. A section that has neither a part of its name nor a predicate
// is not acted on by this qubiqd: a warning names it, so a block is never
// silently ignored.
var sectionChecks = map[string]func(*config.Daemon) []string{
	"appliance_id": nil,
	"data_dir":     nil,
	"project":      nil,
	"http":         nil, // the api part
	"security":     nil, // the service part (the baseline write level)
	"history":      nil, // the service part (retention)
	"alarms":       nil, // the service part (alarm settings)
	"diagnostics":  nil, // the diagnostics listener
	"firmware":     nil, // the appliance part (gateway/appliance)
	"log":          nil, // the appliance part (gateway/appliance)
	"python":       pythonWarnings,
	"memory":       memoryWarnings, // the memory limit (memory.go)
}

// pythonWarnings are the worker limits turned off (python.memory_max,
// pids_max, cpu_max: unlimited): on by default, off only when the config
// says so, and then said in health.
func pythonWarnings(c *config.Daemon) []string {
	var out []string
	for _, l := range []struct {
		key string
		off bool
	}{{"memory_max", c.Python.MemoryMax == 0}, {"pids_max", c.Python.PidsMax == 0}, {"cpu_max", c.Python.CPUMax == 0}} {
		if l.off {
			out = append(out, fmt.Sprintf("python.%s: unlimited: script workers run without that limit", l.key))
		}
	}
	return out
}

// builtParts are the names of the parts New builds, in order: the
// sections they act on are not warned about, by a start or by Check.
var builtParts = []string{"restore", "store", "service", "appliance", "mqtt", "flows", "metrics", "api"}

// configWarnings returns the warnings of the config's sections, given the
// names of the parts that run.
func configWarnings(c *config.Daemon, parts []string) []string {
	var out []string
	for _, sec := range c.Sections {
		check, owned := sectionChecks[sec.Key]
		if !owned && !slices.Contains(parts, sec.Key) {
			out = append(out, fmt.Sprintf("%s:%d: %s: this qubiqd does not act on this block; it is ignored", c.File, sec.Line, sec.Key))
			continue
		}
		if check != nil {
			out = append(out, check(c)...)
		}
	}
	return out
}

// partNames are the names of the parts started so far.
func (l *lifecycle) partNames() []string {
	out := make([]string, len(l.started))
	for i, p := range l.started {
		out[i] = p.name
	}
	return out
}
