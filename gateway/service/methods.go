package service

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/sandbox"
	"qubiq.dev/edge/store"
	"qubiq.dev/edge/store/sqldb"
	"qubiq.dev/edge/tagengine"
	"qubiq.dev/edge/value"
)

// The system.* methods of scripts. The sandbox dispatcher has checked the
// method's scope against the run's grant (its row of sandbox.Methods);
// Call decodes the arguments strictly by the same row (sandbox.Method.
// ParseArgs) and runs the method's implementation below. The wire forms
// (argument names, result shapes, tagged values) are sandbox/METHODS.md.
// Adding a method is its row in sandbox/methods.go plus its entry in
// methods; TestMethods_EveryRowImplemented fails until both exist.

// method implements one row of sandbox.Methods.
type method func(ctx context.Context, s *Service, g auth.Grant, a sandbox.Args) (json.RawMessage, error)

// sandboxServices is the service as the sandbox's Services (Call), its
// fast path of tag.read (ReadTags) and its refusal auditor.
type sandboxServices struct{ s *Service }

var (
	_ sandbox.Services       = sandboxServices{}
	_ sandbox.TagReader      = sandboxServices{}
	_ sandbox.RefusalAuditor = sandboxServices{}
)

// Call runs one system.* call of a script whose grant is g. A key revoked,
// or a browser session ended, while its script runs stops that script's
// calls at once (stillValid).
func (sv sandboxServices) Call(ctx context.Context, g auth.Grant, name string, params json.RawMessage) (json.RawMessage, error) {
	if err := sv.s.stillValid(g); err != nil {
		return nil, err
	}
	m, ok := methods[name]
	row, hasRow := sandbox.LookupMethod(name)
	if !ok || !hasRow {
		return nil, fmt.Errorf("system.%s: no such method", name)
	}
	a, err := row.ParseArgs(params)
	if err != nil {
		return nil, err
	}
	return m(ctx, sv.s, g, a)
}

// ReadTags is the sandbox's fast path of system.tag.read: one VQT per
// path, in order, as tag.read answers.
func (sv sandboxServices) ReadTags(_ context.Context, g auth.Grant, paths []string) ([]value.VQT, error) {
	if err := sv.s.stillValid(g); err != nil {
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

// AuditRefusal records a system.* call the dispatcher refused: one audit
// record per refusal.
func (sv sandboxServices) AuditRefusal(g auth.Grant, name string, reason error) {
	sv.s.AuditRefusal(context.Background(), g, "system."+name, reason)
}

// MaxScriptTrendPoints caps the points of one getTrends call from a
// script (its answer travels in one frame of at most 16 MiB).
const MaxScriptTrendPoints = 300000

func jsonOf(v any) (json.RawMessage, error) { return json.Marshal(v) }

// methods are the implementations of the rows of sandbox.Methods.
var methods = map[string]method{
	"tag.read": func(_ context.Context, s *Service, g auth.Grant, a sandbox.Args) (json.RawMessage, error) {
		var paths []string
		if err := json.Unmarshal(a.Raw("paths"), &paths); err != nil {
			return nil, fmt.Errorf("tag.read: bad params: %w", err)
		}
		res, err := s.Engine().Read(g, paths)
		if err != nil {
			return nil, err
		}
		out := make([]tagRow, len(res))
		for i, r := range res {
			out[i] = rowOf(r.Path, r.VQT)
		}
		return json.Marshal(out)
	},
	"tag.write": func(ctx context.Context, s *Service, g auth.Grant, a sandbox.Args) (json.RawMessage, error) {
		var paths []string
		var values []json.RawMessage
		if err := json.Unmarshal(a.Raw("paths"), &paths); err != nil {
			return nil, fmt.Errorf("tag.write: bad params: %w", err)
		}
		if err := json.Unmarshal(a.Raw("values"), &values); err != nil {
			return nil, fmt.Errorf("tag.write: bad params: %w", err)
		}
		if len(paths) != len(values) {
			return nil, fmt.Errorf("tag.write: %d paths but %d values", len(paths), len(values))
		}
		reqs := make([]tagengine.WriteRequest, len(paths))
		for i := range paths {
			v, err := value.DecodeJSON(values[i])
			if err != nil {
				return nil, fmt.Errorf("tag.write: value %d: %w", i, err)
			}
			reqs[i] = tagengine.WriteRequest{Path: paths[i], Value: v}
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
	},
	"tag.browse": func(ctx context.Context, s *Service, g auth.Grant, a sandbox.Args) (json.RawMessage, error) {
		p, err := a.String("path", false)
		if err != nil {
			return nil, err
		}
		type node struct {
			Name   string `json:"name"`
			Path   string `json:"path"`
			Folder bool   `json:"folder"`
			Tags   int    `json:"tags,omitempty"`
			Type   string `json:"type,omitempty"`
		}
		ns := s.BrowseTags(ctx, g, p)
		out := make([]node, len(ns))
		for i, n := range ns {
			out[i] = node{Name: n.Name, Path: n.Path, Folder: n.Folder, Tags: n.Tags}
			if !n.Folder {
				out[i].Type = n.Type.String()
			}
		}
		return json.Marshal(out)
	},

	"vars.get": func(_ context.Context, s *Service, _ auth.Grant, a sandbox.Args) (json.RawMessage, error) {
		key, err := a.String("key", true)
		if err != nil {
			return nil, err
		}
		v, ok, err := s.data.vars.Get(key)
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
	"vars.set": func(ctx context.Context, s *Service, g auth.Grant, a sandbox.Args) (json.RawMessage, error) {
		key, err := a.String("key", true)
		if err != nil {
			return nil, err
		}
		v := a.Raw("value")
		if v == nil {
			v = json.RawMessage("null")
		}
		return nil, s.data.varsSet(ctx, g, key, v)
	},
	"vars.delete": func(ctx context.Context, s *Service, g auth.Grant, a sandbox.Args) (json.RawMessage, error) {
		key, err := a.String("key", true)
		if err != nil {
			return nil, err
		}
		ok, err := s.data.varsDelete(ctx, g, key)
		if err != nil {
			return nil, err
		}
		return jsonOf(ok)
	},
	"vars.incr": func(ctx context.Context, s *Service, g auth.Grant, a sandbox.Args) (json.RawMessage, error) {
		key, err := a.String("key", true)
		if err != nil {
			return nil, err
		}
		return s.data.varsIncr(ctx, g, key, json.Number(bytes.TrimSpace(a.Raw("by"))))
	},
	"vars.keys": func(_ context.Context, s *Service, _ auth.Grant, a sandbox.Args) (json.RawMessage, error) {
		p, err := a.String("prefix", false)
		if err != nil {
			return nil, err
		}
		keys, err := s.data.vars.Keys(p)
		if err != nil {
			return nil, err
		}
		return jsonOf(keys)
	},
	"vars.list": func(_ context.Context, s *Service, _ auth.Grant, a sandbox.Args) (json.RawMessage, error) {
		p, err := a.String("prefix", false)
		if err != nil {
			return nil, err
		}
		list, err := s.data.vars.List(p)
		if err != nil {
			return nil, err
		}
		m := make(map[string]json.RawMessage, len(list))
		for _, v := range list {
			m[v.Key] = v.Value
		}
		return jsonOf(m)
	},

	"files.read": func(_ context.Context, s *Service, g auth.Grant, a sandbox.Args) (json.RawMessage, error) {
		p, err := a.String("path", true)
		if err != nil {
			return nil, err
		}
		b, err := s.data.filesRead(g, p)
		if err != nil {
			return nil, err
		}
		return sandbox.BytesJSON(b), nil
	},
	"files.size": func(_ context.Context, s *Service, g auth.Grant, a sandbox.Args) (json.RawMessage, error) {
		p, err := a.String("path", true)
		if err != nil {
			return nil, err
		}
		n, err := s.data.filesSize(g, p)
		if err != nil {
			return nil, err
		}
		return jsonOf(n)
	},
	"files.readChunk": func(_ context.Context, s *Service, g auth.Grant, a sandbox.Args) (json.RawMessage, error) {
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
		b, err := s.data.filesChunk(g, p, off, n)
		if err != nil {
			return nil, err
		}
		return sandbox.BytesJSON(b), nil
	},
	"files.save": func(_ context.Context, s *Service, g auth.Grant, a sandbox.Args) (json.RawMessage, error) {
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
		return nil, s.data.filesSave(g, p, b)
	},
	"files.delete": func(_ context.Context, s *Service, g auth.Grant, a sandbox.Args) (json.RawMessage, error) {
		p, err := a.String("path", true)
		if err != nil {
			return nil, err
		}
		return nil, s.data.filesDelete(g, p)
	},

	"db.runNamedQuery": func(ctx context.Context, s *Service, g auth.Grant, a sandbox.Args) (json.RawMessage, error) {
		name, err := a.String("name", true)
		if err != nil {
			return nil, err
		}
		db, err := a.String("database", false)
		if err != nil {
			return nil, err
		}
		return s.data.runNamed(ctx, g, name, a.Raw("params"), db, sqldb.ModeScript)
	},
	"db.runQuery": func(ctx context.Context, s *Service, g auth.Grant, a sandbox.Args) (json.RawMessage, error) {
		q, err := a.String("sql", true)
		if err != nil {
			return nil, err
		}
		db, tx, qargs, err := dbTarget("db.runQuery", a)
		if err != nil {
			return nil, err
		}
		return s.data.runQuery(ctx, g, q, qargs, db, tx)
	},
	"db.callProc": func(ctx context.Context, s *Service, g auth.Grant, a sandbox.Args) (json.RawMessage, error) {
		name, err := a.String("name", true)
		if err != nil {
			return nil, err
		}
		db, tx, qargs, err := dbTarget("db.callProc", a)
		if err != nil {
			return nil, err
		}
		return s.data.callProc(ctx, g, name, qargs, db, tx)
	},
	"db.beginTransaction": func(ctx context.Context, s *Service, g auth.Grant, a sandbox.Args) (json.RawMessage, error) {
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
		h, err := s.data.beginTx(ctx, g, db, iso, time.Duration(ms)*time.Millisecond)
		if err != nil {
			return nil, err
		}
		return jsonOf(h)
	},
	"db.commitTransaction":   endTxMethod("db.commitTransaction"),
	"db.rollbackTransaction": endTxMethod("db.rollbackTransaction"),
	"db.closeTransaction":    endTxMethod("db.closeTransaction"),

	"hist.getTrends": func(ctx context.Context, s *Service, g auth.Grant, a sandbox.Args) (json.RawMessage, error) {
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
		trs, err := s.data.trends(ctx, g, q)
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

	"message.send": func(ctx context.Context, s *Service, g auth.Grant, a sandbox.Args) (json.RawMessage, error) {
		h, err := a.String("handler", true)
		if err != nil {
			return nil, err
		}
		run, err := s.sendMessage(ctx, g, h, a.Raw("payload"))
		if err != nil {
			return nil, err
		}
		return run.Result, nil
	},
	"script.runOnGateway": func(ctx context.Context, s *Service, g auth.Grant, a sandbox.Args) (json.RawMessage, error) {
		e, err := a.String("entry", true)
		if err != nil {
			return nil, err
		}
		run, err := s.runOnGateway(ctx, g, e, a.Raw("args"))
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

func endTxMethod(name string) method {
	return func(ctx context.Context, s *Service, g auth.Grant, a sandbox.Args) (json.RawMessage, error) {
		tx, err := a.String("tx", true)
		if err != nil {
			return nil, err
		}
		return nil, s.data.endTx(ctx, g, name, tx)
	}
}

// trendsJSON is getTrends' answer as scripts get it: per path its head and
// points as [t_us, value, quality], t in microseconds since the epoch (UTC).
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
			v, err := value.EncodeJSON(p.Value)
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
