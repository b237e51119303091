package daemon

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"qubiq.dev/edge/api/apitypes"
	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/sandbox"
	"qubiq.dev/edge/store"
	"qubiq.dev/edge/store/sqldb"
	"qubiq.dev/edge/tagengine"
	"qubiq.dev/edge/value"
)

// This file answers the system.* calls of scripts: services.Call (the
// sandbox dispatcher has already checked the method's scope against the
// run's grant with sandbox.ScopeFor) dispatches by namespace. The wire
// contract (argument names, result shapes, tagged values) is
// sandbox/METHODS.md.

// callService dispatches one system.* call by namespace.
func (s *System) callService(ctx context.Context, g auth.Grant, method string, params json.RawMessage) (json.RawMessage, error) {
	ns, name, ok := strings.Cut(method, ".")
	if !ok {
		return nil, fmt.Errorf("system.%s: not a namespace.method name", method)
	}
	if ns == "tag" {
		return s.callTag(ctx, g, name, params)
	}
	h, ok := dataMethods[method]
	if !ok {
		return nil, fmt.Errorf("system.%s: no such method", method)
	}
	if s.Data == nil {
		return nil, fmt.Errorf("system.%s: not available in this daemon", method)
	}
	args, err := parseArgs(method, params, h.args)
	if err != nil {
		return nil, err
	}
	return h.fn(ctx, s.Data, g, args)
}

// ReadTags is the sandbox's fast path of system.tag.read
// (sandbox.TagReader): one VQT per path, in order, as tag.read answers.
func (sv services) ReadTags(_ context.Context, g auth.Grant, paths []string) ([]value.VQT, error) {
	if err := sv.s.Keys.StillValid(g); err != nil {
		return nil, err
	}
	res, err := sv.s.Engine().Read(g, paths)
	if err != nil {
		return nil, err
	}
	out := make([]value.VQT, len(res))
	for i, r := range res {
		out[i] = r.VQT
	}
	return out, nil
}

var _ sandbox.TagReader = services{}

// callTag serves system.tag.*.
func (s *System) callTag(ctx context.Context, g auth.Grant, name string, params json.RawMessage) (json.RawMessage, error) {
	switch name {
	case "read":
		var p struct {
			Paths []string `json:"paths"`
		}
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, fmt.Errorf("tag.read: bad params: %w", err)
		}
		res, err := s.Engine().Read(g, p.Paths)
		if err != nil {
			return nil, err
		}
		out := make([]apitypes.TagValue, len(res))
		for i, r := range res {
			out[i] = apitypes.FromVQT(r.Path, r.VQT)
		}
		return json.Marshal(out)
	case "write":
		var p struct {
			Paths  []string          `json:"paths"`
			Values []json.RawMessage `json:"values"`
		}
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, fmt.Errorf("tag.write: bad params: %w", err)
		}
		if len(p.Paths) != len(p.Values) {
			return nil, fmt.Errorf("tag.write: %d paths but %d values", len(p.Paths), len(p.Values))
		}
		reqs := make([]tagengine.WriteRequest, len(p.Paths))
		for i := range p.Paths {
			v, err := apitypes.DecodeValue(p.Values[i])
			if err != nil {
				return nil, fmt.Errorf("tag.write: value %d: %w", i, err)
			}
			reqs[i] = tagengine.WriteRequest{Path: p.Paths[i], Value: v}
		}
		res, err := s.Engine().Write(ctx, g, reqs)
		if err != nil {
			return nil, err
		}
		out := make([]string, len(res))
		for i, r := range res {
			out[i] = r.Quality.String()
		}
		return json.Marshal(out)
	case "browse":
		var p struct {
			Path string `json:"path"`
		}
		if len(params) > 0 && string(params) != "null" {
			if err := json.Unmarshal(params, &p); err != nil {
				return nil, fmt.Errorf("tag.browse: bad params: %w", err)
			}
		}
		return json.Marshal(browse(s.Engine().Tags(g), p.Path))
	}
	return nil, fmt.Errorf("system.tag.%s: no such method", name)
}

// BrowseNode is one child of a folder in system.tag.browse: a folder (with
// the number of tags under it) or a tag.
type BrowseNode struct {
	Name   string `json:"name"`
	Path   string `json:"path"`
	Folder bool   `json:"folder"`
	Tags   int    `json:"tags,omitempty"`
	Type   string `json:"type,omitempty"`
}

// browse lists the children of folder path ("" is the root) among the tags
// the grant may see, folders first, each sorted by name.
func browse(tags []tagengine.TagInfo, path string) []BrowseNode {
	path = strings.Trim(path, "/")
	prefix := ""
	if path != "" {
		prefix = path + "/"
	}
	folders := map[string]int{}
	var out []BrowseNode
	for _, t := range tags {
		rest, ok := strings.CutPrefix(t.Path, prefix)
		if !ok || rest == "" {
			continue
		}
		if name, _, deeper := strings.Cut(rest, "/"); deeper {
			folders[name]++
			continue
		}
		out = append(out, BrowseNode{Name: rest, Path: t.Path, Type: t.Point.Type.String()})
	}
	var fs []BrowseNode
	for name, n := range folders {
		fs = append(fs, BrowseNode{Name: name, Path: prefix + name, Folder: true, Tags: n})
	}
	sort.Slice(fs, func(i, j int) bool { return fs[i].Name < fs[j].Name })
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return append(fs, out...)
}

// argSpec names a method's arguments: the Python parameter names of
// DESIGN.md ("Python side"), plus accepted aliases.
type argSpec struct {
	names   []string
	aliases map[string]string // alias → name (snake_case spellings)
}

type dataMethod struct {
	args argSpec
	fn   func(ctx context.Context, d *Data, g auth.Grant, a args) (json.RawMessage, error)
}

// args are a call's arguments by name (absent and null are the same).
type args map[string]json.RawMessage

func (a args) has(k string) bool {
	v, ok := a[k]
	return ok && string(v) != "null"
}

func (a args) str(method, k string, required bool) (string, error) {
	if !a.has(k) {
		if required {
			return "", fmt.Errorf("system.%s: missing argument %q: %w", method, k, errInvalid)
		}
		return "", nil
	}
	var s string
	if err := json.Unmarshal(a[k], &s); err != nil {
		return "", fmt.Errorf("system.%s: argument %q must be a string: %w", method, k, errInvalid)
	}
	return s, nil
}

func (a args) int(method, k string, def int64) (int64, error) {
	if !a.has(k) {
		return def, nil
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(string(a[k])), 64)
	if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, fmt.Errorf("system.%s: argument %q must be an integer: %w", method, k, errInvalid)
	}
	return int64(f), nil
}

func (a args) raw(k string) json.RawMessage {
	if !a.has(k) {
		return nil
	}
	return a[k]
}

func spec(names ...string) argSpec { return argSpec{names: names} }

// parseArgs decodes params (a JSON object) strictly: unknown names are
// refused, naming them and the method's arguments.
func parseArgs(method string, params json.RawMessage, sp argSpec) (args, error) {
	a := args{}
	if len(bytes.TrimSpace(params)) == 0 || string(bytes.TrimSpace(params)) == "null" {
		return a, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(params, &m); err != nil {
		return nil, fmt.Errorf("system.%s: arguments must be a JSON object: %w", method, errInvalid)
	}
	for k, v := range m {
		name := k
		if al, ok := sp.aliases[k]; ok {
			name = al
		}
		if !containsStr(sp.names, name) {
			return nil, fmt.Errorf("system.%s: unknown argument %q (takes %s): %w", method, k, strings.Join(sp.names, ", "), errInvalid)
		}
		a[name] = v
	}
	return a, nil
}

func containsStr(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// Tagged JSON forms shared with the Python side (sandbox/METHODS.md).
func bytesJSON(b []byte) json.RawMessage {
	return json.RawMessage(`{"$bytes":"` + base64.StdEncoding.EncodeToString(b) + `"}`)
}

// decodeData takes files.save's data: a string (saved as UTF-8) or
// {"$bytes": base64}.
func decodeData(method string, raw json.RawMessage) ([]byte, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fmt.Errorf("system.%s: data: %w", method, errInvalid)
		}
		return []byte(s), nil
	}
	var t struct {
		B *string `json:"$bytes"`
	}
	if err := json.Unmarshal(raw, &t); err != nil || t.B == nil {
		return nil, fmt.Errorf(`system.%s: data must be str or bytes ({"$bytes": base64} on the wire): %w`, method, errInvalid)
	}
	b, err := base64.StdEncoding.DecodeString(*t.B)
	if err != nil {
		return nil, fmt.Errorf("system.%s: data: $bytes is not standard base64: %w", method, errInvalid)
	}
	return b, nil
}

// decodeTime takes a timestamp argument: {"$dt": RFC 3339}, an RFC 3339
// string (a zone required), or a number of milliseconds since the epoch.
func decodeTime(method, k string, raw json.RawMessage) (time.Time, error) {
	raw = bytes.TrimSpace(raw)
	bad := fmt.Errorf(`system.%s: %s must be a datetime ({"$dt": RFC 3339}), an RFC 3339 string with a zone, or epoch milliseconds: %w`, method, k, errInvalid)
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

func jsonOf(v any) (json.RawMessage, error) { return json.Marshal(v) }

// trendJSON is one path of getTrends as scripts get it: points as
// [t_us, value, quality] with t in microseconds since the epoch (UTC).
func trendsJSON(trs []store.Trend) (json.RawMessage, error) {
	var b bytes.Buffer
	b.WriteByte('[')
	for i, tr := range trs {
		if i > 0 {
			b.WriteByte(',')
		}
		head := map[string]any{"path": tr.Path, "aggregate": tr.Aggregate, "bad": tr.Bad, "known": tr.Known, "interval_ms": nil}
		if tr.Interval > 0 {
			head["interval_ms"] = tr.Interval.Milliseconds()
		}
		hb, err := json.Marshal(head)
		if err != nil {
			return nil, err
		}
		b.Write(hb[:len(hb)-1])
		b.WriteString(`,"points":[`)
		for j, p := range tr.Points {
			if j > 0 {
				b.WriteByte(',')
			}
			v, err := apitypes.EncodeValue(p.Value)
			if err != nil {
				return nil, fmt.Errorf("history of %q: %w", tr.Path, err)
			}
			b.WriteByte('[')
			b.WriteString(strconv.FormatInt(p.Time.UnixMicro(), 10))
			b.WriteByte(',')
			b.Write(v)
			b.WriteString(`,"`)
			b.WriteString(p.Quality.String())
			b.WriteString(`"]`)
		}
		b.WriteString("]}")
	}
	b.WriteByte(']')
	return b.Bytes(), nil
}

// dataMethods are the system.* methods beyond tag, by "ns.method": their
// argument names (DESIGN.md "Python side") and handlers.
var dataMethods = map[string]dataMethod{
	"vars.get": {spec("key", "default"), func(_ context.Context, d *Data, _ auth.Grant, a args) (json.RawMessage, error) {
		key, err := a.str("vars.get", "key", true)
		if err != nil {
			return nil, err
		}
		v, ok, err := d.varsGet(key)
		if err != nil {
			return nil, err
		}
		if !ok {
			if def := a.raw("default"); def != nil {
				return def, nil
			}
			return json.RawMessage("null"), nil
		}
		return v, nil
	}},
	"vars.set": {spec("key", "value"), func(ctx context.Context, d *Data, g auth.Grant, a args) (json.RawMessage, error) {
		key, err := a.str("vars.set", "key", true)
		if err != nil {
			return nil, err
		}
		v := a.raw("value")
		if v == nil {
			v = json.RawMessage("null")
		}
		return nil, d.varsSet(ctx, g, key, v)
	}},
	"vars.delete": {spec("key"), func(ctx context.Context, d *Data, g auth.Grant, a args) (json.RawMessage, error) {
		key, err := a.str("vars.delete", "key", true)
		if err != nil {
			return nil, err
		}
		ok, err := d.varsDelete(ctx, g, key)
		if err != nil {
			return nil, err
		}
		return jsonOf(ok)
	}},
	"vars.incr": {spec("key", "by"), func(ctx context.Context, d *Data, g auth.Grant, a args) (json.RawMessage, error) {
		key, err := a.str("vars.incr", "key", true)
		if err != nil {
			return nil, err
		}
		return d.varsIncr(ctx, g, key, json.Number(bytes.TrimSpace(a.raw("by"))))
	}},
	"vars.keys": {spec("prefix"), func(_ context.Context, d *Data, _ auth.Grant, a args) (json.RawMessage, error) {
		p, err := a.str("vars.keys", "prefix", false)
		if err != nil {
			return nil, err
		}
		keys, err := d.Vars.Keys(p)
		if err != nil {
			return nil, err
		}
		return jsonOf(keys)
	}},
	"vars.list": {spec("prefix"), func(_ context.Context, d *Data, _ auth.Grant, a args) (json.RawMessage, error) {
		p, err := a.str("vars.list", "prefix", false)
		if err != nil {
			return nil, err
		}
		list, err := d.Vars.List(p)
		if err != nil {
			return nil, err
		}
		m := make(map[string]json.RawMessage, len(list))
		for _, v := range list {
			m[v.Key] = v.Value
		}
		return jsonOf(m)
	}},

	"files.read": {spec("path"), func(_ context.Context, d *Data, g auth.Grant, a args) (json.RawMessage, error) {
		p, err := a.str("files.read", "path", true)
		if err != nil {
			return nil, err
		}
		b, err := d.filesRead(g, p)
		if err != nil {
			return nil, err
		}
		return bytesJSON(b), nil
	}},
	"files.size": {spec("path"), func(_ context.Context, d *Data, g auth.Grant, a args) (json.RawMessage, error) {
		p, err := a.str("files.size", "path", true)
		if err != nil {
			return nil, err
		}
		n, err := d.filesSize(g, p)
		if err != nil {
			return nil, err
		}
		return jsonOf(n)
	}},
	"files.readChunk": {spec("path", "offset", "length"), func(_ context.Context, d *Data, g auth.Grant, a args) (json.RawMessage, error) {
		p, err := a.str("files.readChunk", "path", true)
		if err != nil {
			return nil, err
		}
		off, err := a.int("files.readChunk", "offset", 0)
		if err != nil {
			return nil, err
		}
		n, err := a.int("files.readChunk", "length", -1)
		if err != nil {
			return nil, err
		}
		if n < 0 {
			return nil, fmt.Errorf("system.files.readChunk: missing argument \"length\": %w", errInvalid)
		}
		b, err := d.filesChunk(g, p, off, n)
		if err != nil {
			return nil, err
		}
		return bytesJSON(b), nil
	}},
	"files.save": {spec("path", "data"), func(_ context.Context, d *Data, g auth.Grant, a args) (json.RawMessage, error) {
		p, err := a.str("files.save", "path", true)
		if err != nil {
			return nil, err
		}
		if !a.has("data") {
			return nil, fmt.Errorf("system.files.save: missing argument \"data\": %w", errInvalid)
		}
		b, err := decodeData("files.save", a.raw("data"))
		if err != nil {
			return nil, err
		}
		return nil, d.filesSave(g, p, b)
	}},
	"files.delete": {spec("path"), func(_ context.Context, d *Data, g auth.Grant, a args) (json.RawMessage, error) {
		p, err := a.str("files.delete", "path", true)
		if err != nil {
			return nil, err
		}
		return nil, d.filesDelete(g, p)
	}},

	"db.runNamedQuery": {spec("name", "params", "database"), func(ctx context.Context, d *Data, g auth.Grant, a args) (json.RawMessage, error) {
		name, err := a.str("db.runNamedQuery", "name", true)
		if err != nil {
			return nil, err
		}
		db, err := a.str("db.runNamedQuery", "database", false)
		if err != nil {
			return nil, err
		}
		return d.runNamed(ctx, g, name, a.raw("params"), db, sqldb.ModeScript)
	}},
	"db.runQuery": {spec("sql", "args", "database", "tx"), func(ctx context.Context, d *Data, g auth.Grant, a args) (json.RawMessage, error) {
		q, err := a.str("db.runQuery", "sql", true)
		if err != nil {
			return nil, err
		}
		db, tx, qargs, err := dbTarget("db.runQuery", a)
		if err != nil {
			return nil, err
		}
		return d.runQuery(ctx, g, q, qargs, db, tx)
	}},
	"db.callProc": {spec("name", "args", "database", "tx"), func(ctx context.Context, d *Data, g auth.Grant, a args) (json.RawMessage, error) {
		name, err := a.str("db.callProc", "name", true)
		if err != nil {
			return nil, err
		}
		db, tx, qargs, err := dbTarget("db.callProc", a)
		if err != nil {
			return nil, err
		}
		return d.callProc(ctx, g, name, qargs, db, tx)
	}},
	"db.beginTransaction": {argSpec{names: []string{"database", "isolation", "timeoutMs"}, aliases: map[string]string{"timeout_ms": "timeoutMs"}},
		func(ctx context.Context, d *Data, g auth.Grant, a args) (json.RawMessage, error) {
			db, err := a.str("db.beginTransaction", "database", false)
			if err != nil {
				return nil, err
			}
			iso, err := a.str("db.beginTransaction", "isolation", false)
			if err != nil {
				return nil, err
			}
			ms, err := a.int("db.beginTransaction", "timeoutMs", sqldb.DefaultTxTimeout.Milliseconds())
			if err != nil {
				return nil, err
			}
			if ms <= 0 {
				return nil, fmt.Errorf("system.db.beginTransaction: timeoutMs %d must be positive: %w", ms, errInvalid)
			}
			h, err := d.beginTx(ctx, g, db, iso, time.Duration(ms)*time.Millisecond)
			if err != nil {
				return nil, err
			}
			return jsonOf(h)
		}},
	"db.commitTransaction":   {spec("tx"), endTxMethod("db.commitTransaction")},
	"db.rollbackTransaction": {spec("tx"), endTxMethod("db.rollbackTransaction")},
	"db.closeTransaction":    {spec("tx"), endTxMethod("db.closeTransaction")},

	"hist.getTrends": {argSpec{names: []string{"paths", "start", "end", "intervalMs", "aggregate"}, aliases: map[string]string{"interval_ms": "intervalMs"}},
		func(ctx context.Context, d *Data, g auth.Grant, a args) (json.RawMessage, error) {
			const m = "hist.getTrends"
			var q store.TrendQuery
			if err := json.Unmarshal(a.raw("paths"), &q.Paths); err != nil || q.Paths == nil {
				return nil, fmt.Errorf("system.%s: paths must be a list of tag paths: %w", m, errInvalid)
			}
			if !a.has("start") {
				return nil, fmt.Errorf("system.%s: missing argument \"start\": %w", m, errInvalid)
			}
			var err error
			if q.Start, err = decodeTime(m, "start", a.raw("start")); err != nil {
				return nil, err
			}
			if a.has("end") {
				if q.End, err = decodeTime(m, "end", a.raw("end")); err != nil {
					return nil, err
				}
			}
			ms, err := a.int(m, "intervalMs", 0)
			if err != nil {
				return nil, err
			}
			q.Interval = time.Duration(ms) * time.Millisecond
			agg, err := a.str(m, "aggregate", false)
			if err != nil {
				return nil, err
			}
			q.Aggregate = store.Aggregate(agg)
			trs, err := d.trends(ctx, g, q)
			if err != nil {
				return nil, err
			}
			n := 0
			for _, tr := range trs {
				n += len(tr.Points)
			}
			if n > MaxScriptTrendPoints {
				return nil, fmt.Errorf("system.%s: %d points is over the %d a script may get in one call; narrow the range or use intervalMs with an aggregate: %w",
					m, n, MaxScriptTrendPoints, errInvalid)
			}
			return trendsJSON(trs)
		}},

	"message.send": {spec("handler", "payload"), func(ctx context.Context, d *Data, g auth.Grant, a args) (json.RawMessage, error) {
		h, err := a.str("message.send", "handler", true)
		if err != nil {
			return nil, err
		}
		run, err := d.sendMessage(ctx, g, h, a.raw("payload"))
		if err != nil {
			return nil, err
		}
		return run.Result, nil
	}},
	"script.runOnGateway": {spec("entry", "args"), func(ctx context.Context, d *Data, g auth.Grant, a args) (json.RawMessage, error) {
		e, err := a.str("script.runOnGateway", "entry", true)
		if err != nil {
			return nil, err
		}
		run, err := d.runOnGateway(ctx, g, e, a.raw("args"))
		if err != nil {
			return nil, err
		}
		return run.Result, nil
	}},
}

// dbTarget reads runQuery/callProc's database, tx and args.
func dbTarget(method string, a args) (database, tx string, qargs []any, err error) {
	if database, err = a.str(method, "database", false); err != nil {
		return
	}
	if tx, err = a.str(method, "tx", false); err != nil {
		return
	}
	qargs, err = sqldb.DecodeArgs(a.raw("args"))
	if err != nil {
		err = fmt.Errorf("system.%s: %w", method, err)
	}
	return
}

func endTxMethod(method string) func(ctx context.Context, d *Data, g auth.Grant, a args) (json.RawMessage, error) {
	return func(ctx context.Context, d *Data, g auth.Grant, a args) (json.RawMessage, error) {
		tx, err := a.str(method, "tx", true)
		if err != nil {
			return nil, err
		}
		return nil, d.endTx(ctx, g, method, tx)
	}
}

// DataMethods lists the system.* methods the daemon serves beyond tag.*,
// sorted (for the scope-table test).
func DataMethods() []string {
	out := make([]string, 0, len(dataMethods))
	for m := range dataMethods {
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}

// AuditRefusal records a system.* call the sandbox dispatcher refused for a
// missing scope (sandbox.RefusalAuditor): one audit record per refusal.
func (sv services) AuditRefusal(g auth.Grant, method string, reason error) {
	sv.s.auditRefusal(g, "system."+method, reason)
}

var _ sandbox.RefusalAuditor = services{}
