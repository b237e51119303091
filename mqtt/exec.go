package mqtt

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/gateway"
	"qubiq.dev/edge/value"
)

// Reply is the answer on reply/<id>: the command's id, whether it
// succeeded, its result, or the error's kind and detail.
type Reply struct {
	ID     string          `json:"id"`
	OK     bool            `json:"ok"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *ReplyError     `json:"error,omitempty"`
}

// ReplyError is a reply's error: a kind (the Kind* refusals, or the
// service layer's kinds as REST names them) and a detail.
type ReplyError struct {
	Kind   string `json:"kind"`
	Detail string `json:"detail"`
}

// ErrorsTopic takes the answers to commands whose id could not be read
// (below the base).
const ErrorsTopic = "reply/_errors"

func (l *Link) worker(ctx context.Context) {
	for {
		select {
		case in := <-l.cmds:
			l.handle(ctx, in)
		case <-ctx.Done():
			return
		}
	}
}

// busyReplier answers the commands that found the queue full.
func (l *Link) busyReplier(ctx context.Context) {
	for {
		select {
		case in := <-l.busy:
			id, env, _ := DecodeEnvelope(in.topic, in.payload)
			r := refuse(KindBusy, "%d commands are waiting; try again", l.opts.Queue)
			l.finish(ctx, in, id, env, l.refusalGrant(env), r, nil)
		case <-ctx.Done():
			return
		}
	}
}

// handle verifies one command, runs it under its key's grant, replies and
// audits it. Every check that fails refuses the command before anything
// changes.
func (l *Link) handle(ctx context.Context, in inbound) {
	id, env, err := DecodeEnvelope(in.topic, in.payload)
	if err != nil {
		l.finish(ctx, in, id, env, l.refusalGrant(env), err.(*Refusal), nil)
		return
	}
	g, r := l.authorize(env, time.Now())
	if r != nil {
		l.finish(ctx, in, id, env, l.refusalGrant(env), r, nil)
		return
	}
	if err := l.opts.Gateway.CanAudit(); err != nil {
		l.finish(ctx, in, id, env, g, refuse(KindUnavailable, "the audit log cannot take the record: %v", err), nil)
		return
	}
	result, err := l.execute(ctx, g, env)
	if err != nil {
		var ref *Refusal
		if !errors.As(err, &ref) {
			ref = &Refusal{Kind: gateway.Kind(err), Detail: gateway.Message(err)}
			if env.Topic == CmdPush && errors.Is(err, gateway.ErrConflict) {
				ref.Kind = KindReplayed
			}
			if ref.Kind == "internal" {
				l.log.Error("mqtt command failed", slog.String("topic", env.Topic), slog.String("id", env.ID), slog.Any("err", err))
				ref.Detail = "internal error"
			}
		}
		l.finish(ctx, in, id, env, g, ref, result)
		return
	}
	l.finish(ctx, in, id, env, g, nil, result)
}

// authorize checks the key, the signature, the time and the id, in that
// order, and returns the key's grant. The id is remembered only for a
// command that passed the other checks, so an unsigned flood cannot fill
// the memory or block a real id.
func (l *Link) authorize(env *Envelope, now time.Time) (auth.Grant, *Refusal) {
	t, ok := l.keys[env.KeyID]
	if !ok {
		return auth.Grant{}, refuse(KindUnknownKey, "key_id %q is not trusted", env.KeyID)
	}
	if l.cfg.RequireSigned {
		if t.pub == nil {
			return auth.Grant{}, refuse(KindUnknownKey, "key_id %q has no trusted key", env.KeyID)
		}
		if r := env.Verify(t.pub); r != nil {
			return auth.Grant{}, r
		}
	} else if t.pub != nil && env.Sig != nil {
		if r := env.Verify(t.pub); r != nil { // a signature sent is still checked
			return auth.Grant{}, r
		}
	}
	if r := env.Fresh(now, l.cfg.StaleAfter); r != nil {
		return auth.Grant{}, r
	}
	seen, err := l.opts.Seen.Remember(env.KeyID+"/"+env.ID, now, 2*l.cfg.StaleAfter)
	if err != nil {
		return auth.Grant{}, refuse(KindUnavailable, "the command-id memory failed: %v", err)
	}
	if seen {
		return auth.Grant{}, refuse(KindReplayed, "id %q was seen within %s", env.ID, 2*l.cfg.StaleAfter)
	}
	return t.grant, nil
}

// refusalGrant is who a refused command is audited as: the supervisor its
// key id names (claimed, not proven), with no rights.
func (l *Link) refusalGrant(env *Envelope) auth.Grant {
	who := "mqtt:unknown"
	if env != nil && env.KeyID != "" {
		who = "mqtt:" + env.KeyID
	}
	return auth.Grant{Principal: who, Realm: auth.RealmSupervisor, Origin: "mqtt"}
}

// finish replies to the command and audits it: one record per command,
// accepted or refused.
func (l *Link) finish(ctx context.Context, in inbound, id string, env *Envelope, g auth.Grant, r *Refusal, result json.RawMessage) {
	rep := Reply{ID: id, OK: r == nil, Result: result}
	res, detail := "ok", ""
	if r != nil {
		rep.Error = &ReplyError{Kind: r.Kind, Detail: r.Detail}
		res, detail = r.Kind, r.Detail
		l.counters.refused.Add(1)
	} else {
		l.counters.accepted.Add(1)
	}
	topic := ErrorsTopic
	if id != "" {
		topic = "reply/" + id
	}
	b, _ := json.Marshal(rep)
	if err := l.enqueue(ctx, []Message{{Topic: topic, Payload: b, Queued: time.Now().UTC()}}); err != nil {
		l.log.Error("mqtt reply not queued", slog.String("id", id), slog.Any("err", err))
	}
	after := map[string]any{"id": id, "signed": env != nil && env.Sig != nil, "bytes": len(in.payload)}
	if env != nil {
		after["key_id"] = env.KeyID
		after["ts"] = env.TSText
	}
	if !l.cfg.RequireSigned {
		after["require_signed"] = false
		if detail == "" {
			detail = "mqtt.require_signed is false: the command was not verified"
		}
	}
	if err := l.opts.Gateway.Audit(ctx, g, gateway.AuditEvent{Action: "mqtt.command", Target: in.topic, Result: res,
		Detail: detail, After: after}); err != nil {
		l.log.Error("mqtt command audit lost", slog.String("id", id), slog.Any("err", err))
	}
}

// Command bodies (docs/mqtt.md).
type (
	pushBody struct {
		Module  string `json:"module"`
		Version int64  `json:"version"`
		Code    string `json:"code"`
	}
	runBody struct {
		Entry string          `json:"entry"`
		Args  json.RawMessage `json:"args"`
	}
	rollbackBody struct {
		Module string `json:"module"`
	}
	writeBody struct {
		Writes []struct {
			Path  string          `json:"path"`
			Value json.RawMessage `json:"value"`
		} `json:"writes"`
	}
)

// decodeBody decodes a body strictly: unknown keys and wrong types are
// refused as invalid.
func decodeBody(raw json.RawMessage, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return refuse(KindWrongType, "body: %v", err)
	}
	return nil
}

// execute makes the command's one service-layer call under g and encodes
// its answer.
func (l *Link) execute(ctx context.Context, g auth.Grant, env *Envelope) (json.RawMessage, error) {
	gw := l.opts.Gateway
	switch env.Topic {
	case CmdPush:
		var b pushBody
		if err := decodeBody(env.Body, &b); err != nil {
			return nil, err
		}
		if b.Version <= 0 || b.Module == "" {
			return nil, refuse(KindWrongType, "body: module and a version above 0 are required")
		}
		saved, err := gw.SaveScript(ctx, g, gateway.ScriptSource{Module: b.Module, Code: b.Code, Version: b.Version})
		if err != nil {
			return nil, err
		}
		return json.Marshal(savedJSON(saved))
	case CmdRun:
		var b runBody
		if err := decodeBody(env.Body, &b); err != nil {
			return nil, err
		}
		mod, entry, err := gateway.ParseEntry(b.Entry)
		if err != nil {
			return nil, refuse(KindWrongType, "body.entry: %v", err)
		}
		run, err := gw.RunScript(ctx, g, mod, entry, b.Args)
		if err != nil {
			return nil, err
		}
		logs := make([]map[string]string, len(run.Logs))
		for i, ln := range run.Logs {
			logs[i] = map[string]string{"level": ln.Level, "msg": ln.Msg}
		}
		res := run.Result
		if len(res) == 0 {
			res = json.RawMessage("null")
		}
		return json.Marshal(map[string]any{"result": res, "logs": logs, "duration_ms": run.Duration.Milliseconds()})
	case CmdRollback:
		var b rollbackBody
		if err := decodeBody(env.Body, &b); err != nil {
			return nil, err
		}
		saved, err := gw.RollbackScript(ctx, g, b.Module)
		if err != nil {
			return nil, err
		}
		return json.Marshal(savedJSON(saved))
	case CmdWrite:
		var b writeBody
		if err := decodeBody(env.Body, &b); err != nil {
			return nil, err
		}
		if len(b.Writes) == 0 {
			return nil, refuse(KindWrongType, "body.writes is empty")
		}
		ws := make([]gateway.TagWrite, len(b.Writes))
		for i, w := range b.Writes {
			v, err := value.DecodeJSON(w.Value)
			if err != nil || w.Path == "" {
				return nil, refuse(KindWrongType, "body.writes[%d]: a path and a tag value are required", i)
			}
			ws[i] = gateway.TagWrite{Path: w.Path, Value: v}
		}
		res, err := gw.WriteTags(ctx, g, ws)
		if err != nil {
			return nil, err
		}
		out := make([]map[string]string, len(res))
		for i, r := range res {
			out[i] = map[string]string{"path": r.Path, "status": r.Quality.String()}
			if r.Reason != "" {
				out[i]["reason"] = r.Reason
			}
		}
		return json.Marshal(out)
	}
	return nil, refuse(KindUnknownCommand, "%q", env.Topic)
}

func savedJSON(s gateway.ScriptSaved) map[string]any {
	entries := make([]map[string]any, len(s.Entries))
	for i, e := range s.Entries {
		entries[i] = map[string]any{"name": e.Name, "timeout_ms": e.Timeout.Milliseconds()}
	}
	diags := make([]map[string]any, len(s.Diagnostics))
	for i, d := range s.Diagnostics {
		diags[i] = map[string]any{"line": d.Line, "column": d.Column, "end_line": d.EndLine, "end_column": d.EndColumn,
			"code": d.Code, "message": d.Message, "severity": d.Severity}
	}
	return map[string]any{"module": s.Module, "version": s.Version, "entries": entries, "diagnostics": diags}
}
