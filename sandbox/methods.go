package sandbox

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"qubiq.dev/edge/auth"
)

// Method is one row of the system.* surface: the method's name as scripts
// call it without "system." ("vars.incr"), the scope a run's grant needs
// (the dispatcher checks it before the Services see the call; tag.write
// also needs each tag's write level, which the tag engine checks), and its
// argument shape: the Python parameter names, in the order the Python stub
// takes them, with accepted alternative spellings.
type Method struct {
	Name    string
	Scope   auth.Scope
	Args    []string
	Aliases map[string]string // alternative spelling → name in Args
}

// methods is THE table of the system.* surface (docs: "Python side"; the
// scope column is the contract's table "Scope of each system.* method").
// Adding a method is one row here plus its implementation in the service
// layer; methods_test.go fails until the worker's Python stub
// (python/qubiq_worker.py), METHODS.md and the contract's scope table have
// it too, and the service layer's test until it implements it.
var methods = []Method{
	{Name: "tag.read", Scope: auth.TagRead, Args: []string{"paths"}},
	{Name: "tag.write", Scope: auth.TagWrite, Args: []string{"paths", "values"}},
	{Name: "tag.browse", Scope: auth.TagRead, Args: []string{"path"}},

	{Name: "db.runNamedQuery", Scope: auth.DBRead, Args: []string{"name", "params", "database"}},
	{Name: "db.runQuery", Scope: auth.DBWrite, Args: []string{"sql", "args", "database", "tx"}},
	{Name: "db.callProc", Scope: auth.DBWrite, Args: []string{"name", "args", "database", "tx"}},
	{Name: "db.beginTransaction", Scope: auth.DBWrite, Args: []string{"database", "isolation", "timeoutMs"},
		Aliases: map[string]string{"timeout_ms": "timeoutMs"}},
	{Name: "db.commitTransaction", Scope: auth.DBWrite, Args: []string{"tx"}},
	{Name: "db.rollbackTransaction", Scope: auth.DBWrite, Args: []string{"tx"}},
	{Name: "db.closeTransaction", Scope: auth.DBWrite, Args: []string{"tx"}},

	{Name: "hist.getTrends", Scope: auth.HistRead, Args: []string{"paths", "start", "end", "intervalMs", "aggregate"},
		Aliases: map[string]string{"interval_ms": "intervalMs"}},

	{Name: "vars.get", Scope: auth.VarsRead, Args: []string{"key", "default"}},
	{Name: "vars.keys", Scope: auth.VarsRead, Args: []string{"prefix"}},
	{Name: "vars.list", Scope: auth.VarsRead, Args: []string{"prefix"}},
	{Name: "vars.set", Scope: auth.VarsWrite, Args: []string{"key", "value"}},
	{Name: "vars.delete", Scope: auth.VarsWrite, Args: []string{"key"}},
	{Name: "vars.incr", Scope: auth.VarsWrite, Args: []string{"key", "by"}},

	{Name: "files.read", Scope: auth.FileRead, Args: []string{"path"}},
	{Name: "files.size", Scope: auth.FileRead, Args: []string{"path"}},
	{Name: "files.readChunk", Scope: auth.FileRead, Args: []string{"path", "offset", "length"}},
	{Name: "files.save", Scope: auth.FileWrite, Args: []string{"path", "data"}},
	{Name: "files.delete", Scope: auth.FileWrite, Args: []string{"path"}},

	{Name: "message.send", Scope: auth.ScriptExecute, Args: []string{"handler", "payload"}},
	{Name: "script.runOnGateway", Scope: auth.ScriptExecute, Args: []string{"entry", "args"}},

	// Alarms (docs/alarms.md): acknowledge, shelve, unshelve and addNote
	// also need each alarm's ack_level or shelve_level, which the service
	// layer checks against the grant's write level.
	{Name: "alarm.queryStatus", Scope: auth.AlarmRead, Args: []string{"state", "priority", "prefix", "includeNormal"},
		Aliases: map[string]string{"include_normal": "includeNormal"}},
	{Name: "alarm.queryJournal", Scope: auth.AlarmRead, Args: []string{"start", "end", "path", "priority", "state", "limit", "after"}},
	{Name: "alarm.acknowledge", Scope: auth.AlarmAck, Args: []string{"ids", "all"}},
	{Name: "alarm.shelve", Scope: auth.AlarmAck, Args: []string{"ids", "seconds", "oneShot"},
		Aliases: map[string]string{"one_shot": "oneShot", "duration_s": "seconds"}},
	{Name: "alarm.unshelve", Scope: auth.AlarmAck, Args: []string{"ids"}},
	{Name: "alarm.addNote", Scope: auth.AlarmAck, Args: []string{"id", "text"}},
}

// namespaceScopes is the strong scope of each namespace: the fail-safe for
// a method that has no row in methods (docs: "Fail-safe"). A namespace not
// here is refused.
var namespaceScopes = map[string]auth.Scope{
	"tag":     auth.TagWrite,
	"alarm":   auth.AlarmAck,
	"db":      auth.DBWrite,
	"hist":    auth.HistWrite,
	"vars":    auth.VarsWrite,
	"files":   auth.FileWrite,
	"message": auth.ScriptExecute,
	"script":  auth.ScriptExecute,
}

// Methods returns the rows of the system.* surface, sorted by name.
func Methods() []Method {
	out := slices.Clone(methods)
	slices.SortFunc(out, func(a, b Method) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// LookupMethod returns the row of the system.* method name ("vars.incr").
func LookupMethod(name string) (Method, bool) {
	for _, m := range methods {
		if m.Name == name {
			return m, true
		}
	}
	return Method{}, false
}

// ErrUnknownNamespace is returned (wrapped) by ScopeFor for a method outside
// the system.* namespaces; such a call is refused.
var ErrUnknownNamespace = errors.New("unknown system namespace")

// ScopeFor returns the scope a grant needs to call the system.* method
// ("tag.read", without the "system." prefix): its row's scope, or, for a
// method with no row, its namespace's strong scope (tag:write, alarm:ack,
// db:write, hist:write, vars:write, file:write, script:execute). A method in
// no known namespace, or without a namespace, is an error wrapping
// ErrUnknownNamespace.
func ScopeFor(method string) (auth.Scope, error) {
	if m, ok := LookupMethod(method); ok {
		return m.Scope, nil
	}
	ns, _, dotted := strings.Cut(method, ".")
	if s, ok := namespaceScopes[ns]; ok && dotted {
		return s, nil
	}
	return "", fmt.Errorf("system.%s: %w", method, ErrUnknownNamespace)
}

// ErrBadArgs is wrapped by the argument errors of a system.* call: unknown
// names, wrong JSON types, missing arguments. Its text, "invalid request",
// ends each message.
var ErrBadArgs = errors.New("invalid request")

// Args are one call's arguments by name (absent and JSON null are the
// same: the Python default), parsed by Method.ParseArgs.
type Args struct {
	method string
	m      map[string]json.RawMessage
}

// ParseArgs decodes params (a JSON object, or empty/null for no arguments)
// strictly against the row: an alias is taken as its name, and an unknown
// name is refused naming it and the method's arguments. Errors wrap
// ErrBadArgs.
func (m Method) ParseArgs(params json.RawMessage) (Args, error) {
	a := Args{method: m.Name, m: map[string]json.RawMessage{}}
	p := bytes.TrimSpace(params)
	if len(p) == 0 || string(p) == "null" {
		return a, nil
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(p, &raw); err != nil {
		return Args{}, fmt.Errorf("system.%s: arguments must be a JSON object: %w", m.Name, ErrBadArgs)
	}
	for k, v := range raw {
		name := k
		if al, ok := m.Aliases[k]; ok {
			name = al
		}
		if !slices.Contains(m.Args, name) {
			return Args{}, fmt.Errorf("system.%s: unknown argument %q (takes %s): %w", m.Name, k, strings.Join(m.Args, ", "), ErrBadArgs)
		}
		a.m[name] = v
	}
	return a, nil
}

// Has reports whether argument k was given (and is not null).
func (a Args) Has(k string) bool {
	v, ok := a.m[k]
	return ok && string(v) != "null"
}

// Raw returns argument k as sent, or nil when absent or null.
func (a Args) Raw(k string) json.RawMessage {
	if !a.Has(k) {
		return nil
	}
	return a.m[k]
}

// String returns string argument k; absent is "" unless required (an
// error naming it).
func (a Args) String(k string, required bool) (string, error) {
	if !a.Has(k) {
		if required {
			return "", fmt.Errorf("system.%s: missing argument %q: %w", a.method, k, ErrBadArgs)
		}
		return "", nil
	}
	var s string
	if err := json.Unmarshal(a.m[k], &s); err != nil {
		return "", fmt.Errorf("system.%s: argument %q must be a string: %w", a.method, k, ErrBadArgs)
	}
	return s, nil
}

// Int returns integer argument k (a JSON number without a fraction, at
// most 2^53 in magnitude); absent is def.
func (a Args) Int(k string, def int64) (int64, error) {
	if !a.Has(k) {
		return def, nil
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(string(a.m[k])), 64)
	if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, fmt.Errorf("system.%s: argument %q must be an integer: %w", a.method, k, ErrBadArgs)
	}
	return int64(f), nil
}

// Data returns data argument k: a string (its UTF-8 bytes) or the tagged
// bytes form {"$bytes": standard base64} (METHODS.md, tagged values).
func (a Args) Data(k string) ([]byte, error) {
	raw := bytes.TrimSpace(a.Raw(k))
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fmt.Errorf("system.%s: %s: %w", a.method, k, ErrBadArgs)
		}
		return []byte(s), nil
	}
	var t struct {
		B *string `json:"$bytes"`
	}
	if err := json.Unmarshal(raw, &t); err != nil || t.B == nil {
		return nil, fmt.Errorf(`system.%s: %s must be str or bytes ({"$bytes": base64} on the wire): %w`, a.method, k, ErrBadArgs)
	}
	b, err := base64.StdEncoding.DecodeString(*t.B)
	if err != nil {
		return nil, fmt.Errorf("system.%s: %s: $bytes is not standard base64: %w", a.method, k, ErrBadArgs)
	}
	return b, nil
}

// Time returns timestamp argument k: the tagged {"$dt": RFC 3339}, an RFC
// 3339 string with a zone, or a number of milliseconds since the epoch; in
// UTC.
func (a Args) Time(k string) (time.Time, error) {
	raw := bytes.TrimSpace(a.Raw(k))
	bad := fmt.Errorf(`system.%s: %s must be a datetime ({"$dt": RFC 3339}), an RFC 3339 string with a zone, or epoch milliseconds: %w`, a.method, k, ErrBadArgs)
	if len(raw) == 0 {
		return time.Time{}, bad
	}
	var s string
	switch raw[0] {
	case '{':
		var t struct {
			DT *string `json:"$dt"`
		}
		if err := json.Unmarshal(raw, &t); err != nil || t.DT == nil {
			return time.Time{}, bad
		}
		s = *t.DT
	case '"':
		if err := json.Unmarshal(raw, &s); err != nil {
			return time.Time{}, bad
		}
	default:
		ms, err := strconv.ParseFloat(string(raw), 64)
		if err != nil {
			return time.Time{}, bad
		}
		return time.UnixMicro(int64(ms * 1000)).UTC(), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, bad
	}
	return t.UTC(), nil
}

// BytesJSON is b in the tagged bytes form of the wire: {"$bytes": base64}.
func BytesJSON(b []byte) json.RawMessage {
	return json.RawMessage(`{"$bytes":"` + base64.StdEncoding.EncodeToString(b) + `"}`)
}
