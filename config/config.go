// Package config reads the daemon's YAML configuration and the project file
// (docs/config.md, "Daemon config (YAML)" and "Project file (YAML)"). Both are
// decoded strictly: an unknown key is an error naming the key, the file and
// the line. Relative paths are resolved against the directory of the file
// that names them.
//
// config imports value, auth and tagengine types only; the daemon turns what
// it reads into drivers, tags and services.
package config

import (
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Daemon is the daemon configuration file.
type Daemon struct {
	ApplianceID string   `yaml:"appliance_id"`
	DataDir     string   `yaml:"data_dir"`
	Project     string   `yaml:"project"`
	HTTP        HTTP     `yaml:"http"`
	Python      Python   `yaml:"python"`
	Security    Security `yaml:"security"`
	Store       Store    `yaml:"store"`
	History     History  `yaml:"history"`
	MQTT        MQTT     `yaml:"mqtt"`
	// Diagnostics is the diagnostics listener: GET /metrics and, when
	// asked for, net/http/pprof (docs/metrics.md).
	Diagnostics Diagnostics `yaml:"diagnostics"`
	// Memory is the daemon's soft memory limit (memory.go).
	Memory Memory `yaml:"memory"`
	// Alarms is the alarm settings (journal retention, chattering rule,
	// longest shelve), parsed by package alarm (docs/alarms.md).
	Alarms yaml.Node `yaml:"alarms"`
	// Firmware (the A/B slots, the trusted firmware keys, the trial) and
	// Log (level, output) are parsed by package gateway/appliance
	// (docs/appliance.md, "Daemon config").
	Firmware yaml.Node `yaml:"firmware"`
	Log      yaml.Node `yaml:"log"`

	// File is the path the configuration was read from (absolute).
	File string `yaml:"-"`
	// Sections are the top-level keys the file writes, in order, with
	// their lines: what the daemon's health warnings check against the
	// parts that act on them.
	Sections []Section `yaml:"-"`
}

// Section is one top-level key of the daemon config file and its line.
type Section struct {
	Key  string
	Line int
}

// topSections returns the top-level keys of a YAML mapping document, with
// their lines; nothing for a document that is not one.
func topSections(b []byte) []Section {
	var root yaml.Node
	if yaml.Unmarshal(b, &root) != nil || len(root.Content) == 0 || root.Content[0].Kind != yaml.MappingNode {
		return nil
	}
	m := root.Content[0]
	var out []Section
	for i := 0; i+1 < len(m.Content); i += 2 {
		out = append(out, Section{Key: m.Content[i].Value, Line: m.Content[i].Line})
	}
	return out
}

// HTTP is the API listener. TLS is "off", "auto" or {cert, key}.
type HTTP struct {
	Listen string    `yaml:"listen"`
	TLS    yaml.Node `yaml:"tls"`
}

// Diagnostics is the diagnostics listener (docs/metrics.md): Listen is
// its host:port (DefaultDiagnosticsListen when absent; "off" serves
// none), Pprof adds net/http/pprof under /debug/pprof/ and is refused
// unless Listen is a loopback address. Explicit reports that the file
// names listen: a listen written in the file that cannot be bound stops
// the start, while the default's failure (another qubiqd on the machine
// holds the port) is a warning in the log and in health.
type Diagnostics struct {
	Listen   string `yaml:"listen"`
	Pprof    bool   `yaml:"pprof"`
	Explicit bool   `yaml:"-"`
}

// Python configures the script workers (docs/config.md, Daemon config, python).
type Python struct {
	Path           string         `yaml:"path"`
	Replicas       int            `yaml:"replicas"`
	NodeTimeout    Duration       `yaml:"node_timeout"`
	GatewayTimeout GatewayTimeout `yaml:"gateway_timeout"`
	// MemoryMaxYAML, PidsMaxYAML and CPUMaxYAML are the worker limits as
	// written: absent (the default), a value, or unlimited. LoadDaemon
	// resolves them into MemoryMax, PidsMax and CPUMax (resolveLimits).
	MemoryMaxYAML yaml.Node `yaml:"memory_max"`
	PidsMaxYAML   yaml.Node `yaml:"pids_max"`
	CPUMaxYAML    yaml.Node `yaml:"cpu_max"`
	// MemoryMax (bytes), PidsMax (processes and threads) and CPUMax (cores)
	// are the worker limits in force: the defaults when the config names
	// none (DefaultMemoryMax, DefaultPidsMax, DefaultCPUMax), 0 when it
	// says unlimited.
	MemoryMax          Size              `yaml:"-"`
	PidsMax            int               `yaml:"-"`
	CPUMax             float64           `yaml:"-"`
	RecycleAfterRuns   int               `yaml:"recycle_after_runs"`
	RecycleAboveMemory Size              `yaml:"recycle_above_memory"`
	Queue              int               `yaml:"queue"`
	FlowWorkers        int               `yaml:"flow_workers"`
	IndexURL           string            `yaml:"index_url"`
	Hardening          map[string]string `yaml:"hardening"`
}

// GatewayTimeout clamps @gateway(timeout_ms=...).
type GatewayTimeout struct {
	Default Duration `yaml:"default"`
	Min     Duration `yaml:"min"`
	Max     Duration `yaml:"max"`
}

// Security holds the baseline write level (view, operate, supervise, design).
type Security struct {
	BaselineWriteLevel string `yaml:"baseline_write_level"`
}

// Store configures the bbolt file. OpenTimeout bounds the wait for its lock;
// LastValuesEvery is how often the tags' last values are persisted
// (docs/config.md, store).
type Store struct {
	OpenTimeout     Duration `yaml:"open_timeout"`
	LastValuesEvery Duration `yaml:"last_values_every"`
}

// History holds the retention policy.
type History struct {
	Retention struct {
		MaxAge   Duration `yaml:"max_age"`
		MaxBytes Size     `yaml:"max_bytes"`
	} `yaml:"retention"`
}

// MQTT is the supervisor link; accepted and validated here, used by the mqtt
// work.
type MQTT struct {
	Brokers      []string          `yaml:"brokers"`
	TLS          map[string]string `yaml:"tls"`
	Username     string            `yaml:"username"`
	PasswordFile string            `yaml:"password_file"`
	TrustedKeys  map[string]string `yaml:"trusted_keys"`
	Grants       map[string]struct {
		Scopes      []string `yaml:"scopes"`
		WriteLevel  string   `yaml:"write_level"`
		Permissions []string `yaml:"permissions"`
	} `yaml:"grants"`
	RequireSigned *bool     `yaml:"require_signed"`
	StaleAfter    Duration  `yaml:"stale_after"`
	Keepalive     Duration  `yaml:"keepalive"`
	Outbox        yaml.Node `yaml:"outbox"`
	// Reconnect bounds the backoff between passes over the brokers
	// (defaults 500ms and 30s; docs/mqtt.md).
	Reconnect struct {
		Min Duration `yaml:"min"`
		Max Duration `yaml:"max"`
	} `yaml:"reconnect"`
}

// Defaults, applied by LoadDaemon to keys the file leaves out. The worker
// limits are the sandbox's own defaults (sandbox.DefaultMemoryMax ...; a
// test keeps them equal): docs/config.md, Daemon config, "limits are on by
// default, and unlimited turns one off".
const (
	DefaultMemoryMax = 256 << 20
	DefaultPidsMax   = 64
	DefaultCPUMax    = 1.0

	DefaultListen = "127.0.0.1:8080"
	// DefaultDiagnosticsListen is diagnostics.listen's default: loopback
	// only.
	DefaultDiagnosticsListen = "127.0.0.1:9464"
	DefaultDataDir           = "/var/lib/qubiq"
	DefaultPythonPath        = "/usr/lib/qubiq/current/python/bin/python3"
	DefaultReplicas          = 2
	DefaultOpenTimeout       = 5 * time.Second
	DefaultLastValuesEvery   = 10 * time.Second
)

// LoadDaemon reads and validates the daemon configuration at path. The
// environment variables PYTHON_PATH, PYTHON_WORKER_REPLICAS,
// QUBIQ_HTTP_LISTEN and QUBIQ_DIAGNOSTICS_LISTEN override python.path,
// python.replicas, http.listen and diagnostics.listen (docs/config.md,
// "Environment"). Relative paths (data_dir, project) are
// made absolute against the file's directory. Every problem found is in the
// returned error, each naming the file and, where known, the line
// (config.Problems lists them). Unless the file cannot be read or is not
// YAML at all (nil config), the config is returned decoded as far as the
// problems allow together with the error, so --check-config goes on to
// the project in the same run.
func LoadDaemon(path string) (*Daemon, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(abs)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	var d Daemon
	var errs []error
	if err := decodeStrict(b, &d); err != nil {
		var se *SyntaxError
		if errors.As(err, &se) {
			return nil, fmt.Errorf("%s: %w", abs, err)
		}
		errs = append(errs, fmt.Errorf("%s: %w", abs, err)) // and go on: every problem in one run
	}
	d.File = abs
	d.Sections = topSections(b)
	dir := filepath.Dir(abs)
	if d.DataDir == "" {
		d.DataDir = DefaultDataDir
	}
	d.DataDir = resolve(dir, d.DataDir)
	if d.Project != "" {
		d.Project = resolve(dir, d.Project)
	}
	if v := os.Getenv("QUBIQ_HTTP_LISTEN"); v != "" {
		d.HTTP.Listen = v
	}
	if d.HTTP.Listen == "" {
		d.HTTP.Listen = DefaultListen
	}
	if v := os.Getenv("QUBIQ_DIAGNOSTICS_LISTEN"); v != "" {
		d.Diagnostics.Listen = v
	}
	if v := os.Getenv("PYTHON_PATH"); v != "" {
		d.Python.Path = v
	}
	if d.Python.Path == "" {
		d.Python.Path = DefaultPythonPath
	}
	if v := os.Getenv("PYTHON_WORKER_REPLICAS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			errs = append(errs, fmt.Errorf("PYTHON_WORKER_REPLICAS=%q: want a whole number >= 1", v))
		} else {
			d.Python.Replicas = n
		}
	}
	if d.Python.Replicas == 0 {
		d.Python.Replicas = DefaultReplicas
	}
	if d.Python.Replicas < 0 {
		errs = append(errs, fmt.Errorf("%s: python.replicas %d: want >= 1", abs, d.Python.Replicas))
	}
	if d.Store.OpenTimeout == 0 {
		d.Store.OpenTimeout = Duration(DefaultOpenTimeout)
	}
	if d.Store.LastValuesEvery == 0 {
		d.Store.LastValuesEvery = Duration(DefaultLastValuesEvery)
	}
	if lv := d.Store.LastValuesEvery.D(); lv < time.Second || lv > time.Hour {
		errs = append(errs, fmt.Errorf("%s: store.last_values_every %s: want 1s to 1h", abs, lv))
	}
	if d.Security.BaselineWriteLevel == "" {
		d.Security.BaselineWriteLevel = "operate"
	}
	switch d.Security.BaselineWriteLevel {
	case "view", "operate", "supervise", "design":
	default:
		errs = append(errs, fmt.Errorf("%s: security.baseline_write_level %q: want view, operate, supervise or design", abs, d.Security.BaselineWriteLevel))
	}
	if _, port, err := net.SplitHostPort(d.HTTP.Listen); err != nil {
		errs = append(errs, fmt.Errorf("%s: http.listen %q: want host:port (%v)", abs, d.HTTP.Listen, err))
	} else if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		errs = append(errs, fmt.Errorf("%s: http.listen %q: port %q is not a number from 0 to 65535", abs, d.HTTP.Listen, port))
	}
	if err := checkTLS(abs, d.HTTP.TLS); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, checkDiagnostics(abs, &d.Diagnostics)...)
	errs = append(errs, resolveLimits(abs, &d.Python)...)
	errs = append(errs, resolveMemory(abs, &d.Memory)...)
	if len(errs) > 0 {
		var root yaml.Node
		_ = yaml.Unmarshal(b, &root) // it parsed above
		return &d, errors.Join(locateKeys(abs, &root, errs)...)
	}
	return &d, nil
}

// locateKeys gives each problem "FILE: KEY ..." the line of KEY (a dotted
// path such as store.open_timeout) in the document root, as
// "FILE:LINE: KEY ...", so every problem of a config reads as
// docs/config.md shows; a key the file does not hold (a default, an
// environment variable) keeps the file alone.
func locateKeys(file string, root *yaml.Node, errs []error) []error {
	out := make([]error, len(errs))
	for i, e := range errs {
		out[i] = e
		rest, ok := strings.CutPrefix(e.Error(), file+": ")
		if !ok || strings.Contains(rest, "\n") {
			continue
		}
		key, _, _ := strings.Cut(rest, " ")
		if line := keyLine(root, strings.TrimSuffix(key, ":")); line > 0 {
			out[i] = &located{msg: fmt.Sprintf("%s:%d: %s", file, line, rest), err: e}
		}
	}
	return out
}

// keyLine is the line of the key at the dotted path in a YAML document
// (mappings only); 0 when the document lacks it.
func keyLine(root *yaml.Node, path string) int {
	n := root
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	line := 0
	for _, seg := range strings.Split(path, ".") {
		if n.Kind != yaml.MappingNode {
			return 0
		}
		var next *yaml.Node
		for j := 0; j+1 < len(n.Content); j += 2 {
			if n.Content[j].Value == seg {
				line, next = n.Content[j].Line, n.Content[j+1]
				break
			}
		}
		if next == nil {
			return 0
		}
		n = next
	}
	return line
}

// located is a problem given its line: its message, the problem itself
// for errors.Is and errors.As.
type located struct {
	msg string
	err error
}

func (l *located) Error() string { return l.msg }
func (l *located) Unwrap() error { return l.err }

// checkDiagnostics applies diagnostics.listen's default and checks it: off,
// or host:port with a port from 0 to 65535; pprof only on a loopback
// address (127.0.0.0/8, ::1, localhost), since a profile shows the
// daemon's memory and command line.
func checkDiagnostics(file string, dg *Diagnostics) []error {
	dg.Explicit = dg.Listen != ""
	if dg.Listen == "" {
		dg.Listen = DefaultDiagnosticsListen
	}
	if dg.Listen == "off" {
		if dg.Pprof {
			return []error{fmt.Errorf("%s: diagnostics.pprof: true needs a diagnostics listener (diagnostics.listen is off)", file)}
		}
		return nil
	}
	host, port, err := net.SplitHostPort(dg.Listen)
	if err != nil {
		return []error{fmt.Errorf("%s: diagnostics.listen %q: want host:port or off (%v)", file, dg.Listen, err)}
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return []error{fmt.Errorf("%s: diagnostics.listen %q: port %q is not a number from 0 to 65535", file, dg.Listen, port)}
	}
	if dg.Pprof && !IsLoopback(host) {
		return []error{fmt.Errorf("%s: diagnostics.pprof: true is served on a loopback address only, and diagnostics.listen %q is not one (use 127.0.0.1:PORT)", file, dg.Listen)}
	}
	return nil
}

// IsLoopback reports whether host (an address or name of a listen
// setting) is a loopback address: 127.0.0.0/8, ::1 or "localhost". An
// empty host (all addresses) is not.
func IsLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// checkTLS validates http.tls (docs/config.md, Daemon config): off, auto, or a
// mapping of exactly cert and key (paths, relative to the config file; the
// daemon loads them at start).
func checkTLS(file string, n yaml.Node) error {
	switch {
	case n.Kind == 0:
		return nil
	case n.Kind == yaml.ScalarNode:
		switch n.Value {
		case "off", "false", "auto":
			return nil
		}
		return fmt.Errorf("%s:%d: http.tls %q: want off, auto or {cert: FILE, key: FILE}", file, n.Line, n.Value)
	case n.Kind == yaml.MappingNode:
		var tls struct {
			Cert string `yaml:"cert"`
			Key  string `yaml:"key"`
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			if k := n.Content[i]; k.Value != "cert" && k.Value != "key" {
				return fmt.Errorf("%s:%d: http.tls: unknown key %q (want cert and key)", file, k.Line, k.Value)
			}
		}
		if err := n.Decode(&tls); err != nil || tls.Cert == "" || tls.Key == "" {
			return fmt.Errorf("%s:%d: http.tls: want {cert: FILE, key: FILE}, both set", file, n.Line)
		}
		return nil
	}
	return fmt.Errorf("%s:%d: http.tls: want off, auto or {cert: FILE, key: FILE}", file, n.Line)
}

func resolve(dir, p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(dir, p)
}

// sectionNames names, for messages, the YAML section each config type
// decodes.
var sectionNames = map[string]string{
	"Daemon": "the config", "HTTP": "http", "Python": "python", "GatewayTimeout": "python.gateway_timeout",
	"Security": "security", "Store": "store", "History": "history", "MQTT": "mqtt", "Memory": "memory",
	"Project": "the project", "TagConfig": "a tag", "DeadbandConf": "a tag's deadband",
	"ScaleConf": "a tag's scale", "HistoryConf": "a tag's history", "ScriptConfig": "a script",
}

// Duration is a time.Duration written as Go duration text ("250ms", "1s",
// "5m") with a "d" suffix allowed for days ("35d").
type Duration time.Duration

// UnmarshalYAML decodes "1s", "35d" or a number of seconds.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*d = Duration(v)
	return nil
}

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

var dayRe = regexp.MustCompile(`^(\d+(?:\.\d+)?)d$`)

// ParseDuration parses Go duration text, "Nd" (days) or a bare number of
// seconds. The error names the text.
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if m := dayRe.FindStringSubmatch(s); m != nil {
		f, _ := strconv.ParseFloat(m[1], 64)
		return time.Duration(f * float64(24*time.Hour)), nil
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		return time.Duration(f * float64(time.Second)), nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("bad duration %q (want e.g. 500ms, 1s, 5m, 35d)", s)
	}
	return v, nil
}

// Size is a byte count written as "256MiB", "2GiB", "64MB" or a number.
type Size int64

var sizeRe = regexp.MustCompile(`^(\d+(?:\.\d+)?)\s*([KMGT]i?B|B)?$`)

// UnmarshalYAML decodes a size with an optional unit (B, KB, KiB, MB, MiB,
// GB, GiB, TB, TiB).
func (s *Size) UnmarshalYAML(n *yaml.Node) error {
	v, err := ParseSize(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*s = Size(v)
	return nil
}

// ParseSize parses "256MiB" and friends into bytes. The error names the text.
func ParseSize(s string) (int64, error) {
	m := sizeRe.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return 0, fmt.Errorf("bad size %q (want e.g. 256MiB, 2GiB)", s)
	}
	f, _ := strconv.ParseFloat(m[1], 64)
	mult := map[string]float64{"": 1, "B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
		"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}[m[2]]
	return int64(f * mult), nil
}

// Unlimited is the word that turns a worker limit off.
const Unlimited = "unlimited"

// resolveLimits sets py's limits in force from what the file wrote: the
// default when a key is absent, 0 for unlimited, else the value, which
// must be a limit (memory_max a size of at least 16 MiB, pids_max a whole
// number of at least 1, cpu_max a number of cores above 0; 0 is not a way
// to write unlimited).
func resolveLimits(file string, py *Python) []error {
	var errs []error
	bad := func(n *yaml.Node, key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: line %d: python.%s: %s", file, n.Line, key, fmt.Sprintf(format, args...)))
	}
	limit := func(n *yaml.Node, key string, parse func(string) error) bool {
		switch {
		case n.Kind == 0:
			return false // absent: the default
		case n.Kind != yaml.ScalarNode:
			bad(n, key, "want a limit or %s, got %s", Unlimited, got(n))
		case strings.EqualFold(n.Value, Unlimited):
			return true
		default:
			if err := parse(n.Value); err != nil {
				bad(n, key, "%v", err)
			}
		}
		return true
	}
	py.MemoryMax, py.PidsMax, py.CPUMax = DefaultMemoryMax, DefaultPidsMax, DefaultCPUMax
	if limit(&py.MemoryMaxYAML, "memory_max", func(v string) error {
		n, err := ParseSize(v)
		switch {
		case err != nil:
			return fmt.Errorf("%v, or %s", err, Unlimited)
		case n < 16<<20:
			return fmt.Errorf("%s is below the 16 MiB an interpreter needs (write %s to turn the limit off)", v, Unlimited)
		}
		py.MemoryMax = Size(n)
		return nil
	}) && strings.EqualFold(py.MemoryMaxYAML.Value, Unlimited) {
		py.MemoryMax = 0
	}
	if limit(&py.PidsMaxYAML, "pids_max", func(v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return fmt.Errorf("%q: want a whole number of processes and threads, at least 1 (write %s to turn the limit off)", v, Unlimited)
		}
		py.PidsMax = n
		return nil
	}) && strings.EqualFold(py.PidsMaxYAML.Value, Unlimited) {
		py.PidsMax = 0
	}
	if limit(&py.CPUMaxYAML, "cpu_max", func(v string) error {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || !(f > 0) || math.IsInf(f, 0) {
			return fmt.Errorf("%q: want a number of cores above 0, such as 0.5 (write %s to turn the limit off)", v, Unlimited)
		}
		py.CPUMax = f
		return nil
	}) && strings.EqualFold(py.CPUMaxYAML.Value, Unlimited) {
		py.CPUMax = 0
	}
	return errs
}
