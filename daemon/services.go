package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
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
	row, hasRow := sandbox.LookupMethod(method)
	if !ok || !hasRow {
		return nil, fmt.Errorf("system.%s: no such method", method)
	}
	if s.Data == nil {
		return nil, fmt.Errorf("system.%s: not available in this daemon", method)
	}
	args, err := row.ParseArgs(params)
	if err != nil {
		return nil, err
	}
	return h(ctx, s.Data, g, args)
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
// dataMethod implements one row of sandbox's method table.
type dataMethod func(ctx context.Context, d *Data, g auth.Grant, a sandbox.Args) (json.RawMessage, error)

var dataMethods = map[string]dataMethod{
	"vars.get": func(_ context.Context, d *Data, _ auth.Grant, a sandbox.Args) (json.RawMessage, error) {
		key, err := a.String("key", true)
		if err != nil {
			return nil, err
		}
		v, ok, err := d.varsGet(key)
		if err != nil {
			return nil, err
		}
		if !ok {
			if def := a.Raw("default"); def != nil {
				return def, nil
			}
			return json.RawMessage("null"), nil
		}
		return v, nil
	},
	"vars.set": func(ctx context.Context, d *Data, g auth.Grant, a sandbox.Args) (json.RawMessage, error) {
		key, err := a.String("key", true)
		if err != nil {
			return nil, err
		}
		v := a.Raw("value")
		if v == nil {
			v = json.RawMessage("null")
		}
		return nil, d.varsSet(ctx, g, key, v)
	},
	"vars.delete": func(ctx context.Context, d *Data, g auth.Grant, a sandbox.Args) (json.RawMessage, error) {
		key, err := a.String("key", true)
		if err != nil {
			return nil, err
		}
		ok, err := d.varsDelete(ctx, g, key)
		if err != nil {
			return nil, err
		}
		return jsonOf(ok)
	},
	"vars.incr": func(ctx context.Context, d *Data, g auth.Grant, a sandbox.Args) (json.RawMessage, error) {
		key, err := a.String("key", true)
		if err != nil {
			return nil, err
		}
		return d.varsIncr(ctx, g, key, json.Number(bytes.TrimSpace(a.Raw("by"))))
	},
	"vars.keys": func(_ context.Context, d *Data, _ auth.Grant, a sandbox.Args) (json.RawMessage, error) {
		p, err := a.String("prefix", false)
		if err != nil {
			return nil, err
		}
		keys, err := d.Vars.Keys(p)
		if err != nil {
			return nil, err
		}
		return jsonOf(keys)
	},
	"vars.list": func(_ context.Context, d *Data, _ auth.Grant, a sandbox.Args) (json.RawMessage, error) {
		p, err := a.String("prefix", false)
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
	},

	"files.read": func(_ context.Context, d *Data, g auth.Grant, a sandbox.Args) (json.RawMessage, error) {
		p, err := a.String("path", true)
		if err != nil {
			return nil, err
		}
		b, err := d.filesRead(g, p)
		if err != nil {
			return nil, err
		}
		return sandbox.BytesJSON(b), nil
	},
	"files.size": func(_ context.Context, d *Data, g auth.Grant, a sandbox.Args) (json.RawMessage, error) {
		p, err := a.String("path", true)
		if err != nil {
			return nil, err
		}
		n, err := d.filesSize(g, p)
		if err != nil {
			return nil, err
		}
		return jsonOf(n)
	},
	"files.readChunk": func(_ context.Context, d *Data, g auth.Grant, a sandbox.Args) (json.RawMessage, error) {
		p, err := a.String("path", true)
		if err != nil {
			return nil, err
		}
		off, err := a.Int("offset", 0)
		if err != nil {
			return nil, err
		}
		n, err := a.Int("length", -1)
		if err != nil {
			return nil, err
		}
		if n < 0 {
			return nil, fmt.Errorf("system.files.readChunk: missing argument \"length\": %w", sandbox.ErrBadArgs)
		}
		b, err := d.filesChunk(g, p, off, n)
		if err != nil {
			return nil, err
		}
		return sandbox.BytesJSON(b), nil
	},
	"files.save": func(_ context.Context, d *Data, g auth.Grant, a sandbox.Args) (json.RawMessage, error) {
		p, err := a.String("path", true)
		if err != nil {
			return nil, err
		}
		if !a.Has("data") {
			return nil, fmt.Errorf("system.files.save: missing argument \"data\": %w", sandbox.ErrBadArgs)
		}
		b, err := a.Data("data")
		if err != nil {
			return nil, err
		}
		return nil, d.filesSave(g, p, b)
	},
	"files.delete": func(_ context.Context, d *Data, g auth.Grant, a sandbox.Args) (json.RawMessage, error) {
		p, err := a.String("path", true)
		if err != nil {
			return nil, err
		}
		return nil, d.filesDelete(g, p)
	},

	"db.runNamedQuery": func(ctx context.Context, d *Data, g auth.Grant, a sandbox.Args) (json.RawMessage, error) {
		name, err := a.String("name", true)
		if err != nil {
			return nil, err
		}
		db, err := a.String("database", false)
		if err != nil {
			return nil, err
		}
		return d.runNamed(ctx, g, name, a.Raw("params"), db, sqldb.ModeScript)
	},
	"db.runQuery": func(ctx context.Context, d *Data, g auth.Grant, a sandbox.Args) (json.RawMessage, error) {
		q, err := a.String("sql", true)
		if err != nil {
			return nil, err
		}
		db, tx, qargs, err := dbTarget("db.runQuery", a)
		if err != nil {
			return nil, err
		}
		return d.runQuery(ctx, g, q, qargs, db, tx)
	},
	"db.callProc": func(ctx context.Context, d *Data, g auth.Grant, a sandbox.Args) (json.RawMessage, error) {
		name, err := a.String("name", true)
		if err != nil {
			return nil, err
		}
		db, tx, qargs, err := dbTarget("db.callProc", a)
		if err != nil {
			return nil, err
		}
		return d.callProc(ctx, g, name, qargs, db, tx)
	},
	"db.beginTransaction": func(ctx context.Context, d *Data, g auth.Grant, a sandbox.Args) (json.RawMessage, error) {
		db, err := a.String("database", false)
		if err != nil {
			return nil, err
		}
		iso, err := a.String("isolation", false)
		if err != nil {
			return nil, err
		}
		ms, err := a.Int("timeoutMs", sqldb.DefaultTxTimeout.Milliseconds())
		if err != nil {
			return nil, err
		}
		if ms <= 0 {
			return nil, fmt.Errorf("system.db.beginTransaction: timeoutMs %d must be positive: %w", ms, sandbox.ErrBadArgs)
		}
		h, err := d.beginTx(ctx, g, db, iso, time.Duration(ms)*time.Millisecond)
		if err != nil {
			return nil, err
		}
		return jsonOf(h)
	},
	"db.commitTransaction":   endTxMethod("db.commitTransaction"),
	"db.rollbackTransaction": endTxMethod("db.rollbackTransaction"),
	"db.closeTransaction":    endTxMethod("db.closeTransaction"),

	"hist.getTrends": func(ctx context.Context, d *Data, g auth.Grant, a sandbox.Args) (json.RawMessage, error) {
		const m = "hist.getTrends"
		var q store.TrendQuery
		if err := json.Unmarshal(a.Raw("paths"), &q.Paths); err != nil || q.Paths == nil {
			return nil, fmt.Errorf("system.%s: paths must be a list of tag paths: %w", m, sandbox.ErrBadArgs)
		}
		if !a.Has("start") {
			return nil, fmt.Errorf("system.%s: missing argument \"start\": %w", m, sandbox.ErrBadArgs)
		}
		var err error
		if q.Start, err = a.Time("start"); err != nil {
			return nil, err
		}
		if a.Has("end") {
			if q.End, err = a.Time("end"); err != nil {
				return nil, err
			}
		}
		ms, err := a.Int("intervalMs", 0)
		if err != nil {
			return nil, err
		}
		q.Interval = time.Duration(ms) * time.Millisecond
		agg, err := a.String("aggregate", false)
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
				m, n, MaxScriptTrendPoints, sandbox.ErrBadArgs)
		}
		return trendsJSON(trs)
	},

	"message.send": func(ctx context.Context, d *Data, g auth.Grant, a sandbox.Args) (json.RawMessage, error) {
		h, err := a.String("handler", true)
		if err != nil {
			return nil, err
		}
		run, err := d.sendMessage(ctx, g, h, a.Raw("payload"))
		if err != nil {
			return nil, err
		}
		return run.Result, nil
	},
	"script.runOnGateway": func(ctx context.Context, d *Data, g auth.Grant, a sandbox.Args) (json.RawMessage, error) {
		e, err := a.String("entry", true)
		if err != nil {
			return nil, err
		}
		run, err := d.runOnGateway(ctx, g, e, a.Raw("args"))
		if err != nil {
			return nil, err
		}
		return run.Result, nil
	},
}

// dbTarget reads runQuery/callProc's database, tx and args.
func dbTarget(method string, a sandbox.Args) (database, tx string, qargs []any, err error) {
	if database, err = a.String("database", false); err != nil {
		return
	}
	if tx, err = a.String("tx", false); err != nil {
		return
	}
	qargs, err = sqldb.DecodeArgs(a.Raw("args"))
	if err != nil {
		err = fmt.Errorf("system.%s: %w", method, err)
	}
	return
}

func endTxMethod(method string) func(ctx context.Context, d *Data, g auth.Grant, a sandbox.Args) (json.RawMessage, error) {
	return func(ctx context.Context, d *Data, g auth.Grant, a sandbox.Args) (json.RawMessage, error) {
		tx, err := a.String("tx", true)
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
