package flow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"regexp"
	"sort"
	"time"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/gateway"
	"qubiq.dev/edge/value"
)

// Processing: one version's loop takes up to Options.Batch queued
// messages at a time, in order, and runs them through the graph node by
// node in topological order, so every node sees the messages of one
// trigger in the order the trigger made them (docs/flows.md, "Order").

// Error kinds of node failures (gateway.FlowError.Kind).
const (
	KindTimeout      = "timeout"           // a Python node ran past its timeout; its worker was replaced
	KindException    = "exception"         // a Python node raised
	KindBadReturn    = "bad_return"        // a Python node returned something that is not a message
	KindDenied       = "permission_denied" // a system.* call of a Python node was refused and not caught
	KindWriteFailed  = "write_failed"      // a tag write was refused or failed
	KindBadQuality   = "bad_quality"       // a tag write of a message whose quality is not Good
	KindNoValue      = "no_value"          // the field a node reads is not in the message
	KindPublish      = "publish_failed"    // an MQTT publish failed
	KindMessageFail  = "message_failed"    // sending a message failed
	KindNodeRunError = "node_failed"       // the node could not run (busy, runtime missing, killed)
)

// out is one message leaving a node: where to ("" the end) and the message.
type out struct {
	to string
	m  *Msg
}

func (in *instance) loop() {
	defer close(in.done)
	q := in.fs.q
	for {
		for {
			select {
			case <-in.stopCh:
				return
			default:
			}
			batch := q.pop(in.e.opts.Batch)
			if len(batch) == 0 {
				break
			}
			in.process(batch)
		}
		select {
		case <-in.stopCh:
			return
		case <-q.notify:
		}
	}
}

// process runs one batch through the graph.
func (in *instance) process(batch []*Msg) {
	for i, m := range batch {
		m.ord = i
	}
	// A trigger message that reaches a failed node (or one of the
	// messages it became) is dropped, not processed, so that once nothing
	// is in flight in = processed + dropped + queue (docs/flows.md,
	// "Queues, counters and back-pressure").
	in.lost = make([]bool, len(batch))
	pending := map[string][]*Msg{in.def.Nodes[0].ID: batch}
	for _, nd := range in.def.Order {
		msgs := pending[nd.ID]
		delete(pending, nd.ID)
		if len(msgs) == 0 {
			continue
		}
		sort.SliceStable(msgs, func(i, j int) bool { return msgs[i].ord < msgs[j].ord })
		nr := in.nodes[nd.ID]
		if nr.isFailed() {
			// A failed node stops: what reaches it is dropped, counted.
			in.markLost(msgs)
			continue
		}
		nr.runs.Add(uint64(len(msgs)))
		for _, o := range in.runNode(nr, msgs) {
			if o.to == "" {
				in.fs.ctr.out.Add(1)
				continue
			}
			pending[o.to] = append(pending[o.to], o.m)
		}
	}
	lost := 0
	for _, l := range in.lost {
		if l {
			lost++
		}
	}
	in.lost = nil
	in.fs.ctr.dropped.Add(uint64(lost))
	in.fs.ctr.processed.Add(uint64(len(batch) - lost))
}

// markLost records that msgs reached a failed node: their trigger
// messages count as dropped.
func (in *instance) markLost(msgs []*Msg) {
	for _, m := range msgs {
		if m.ord >= 0 && m.ord < len(in.lost) {
			in.lost[m.ord] = true
		}
	}
}

func (in *instance) runNode(nr *nodeRun, msgs []*Msg) []out {
	switch nr.def.Type {
	case TypePython:
		return in.runPython(nr, msgs)
	case TypeFilter:
		return in.runFilter(nr, msgs)
	case TypeTagWrite:
		return in.runTagWrite(nr, msgs)
	case TypeMQTTPublish:
		return in.runPublish(nr, msgs)
	case TypeLog:
		return in.runLog(nr, msgs)
	case TypeMessage:
		return in.runMessage(nr, msgs)
	}
	outs := make([]out, len(msgs)) // end
	for i, m := range msgs {
		outs[i] = out{m: m}
	}
	return outs
}

// fail applies the node's error policy to m for fe, appending what leaves
// the node to outs.
func (in *instance) fail(nr *nodeRun, m *Msg, fe *gateway.FlowError, outs []out) []out {
	fe.Node = nr.def.ID
	if fe.Time.IsZero() {
		fe.Time = time.Now().UTC()
	}
	// The last error is set before the counters move, and status reads
	// the counters before the last error, so a status that counts an
	// error always has one to show.
	nr.mu.Lock()
	nr.lastErr = fe
	nr.mu.Unlock()
	nr.errs.Add(1)
	if fe.Kind == KindTimeout {
		nr.timeouts.Add(1)
	}
	in.fs.noteError(fe)
	if ok, held := nr.errLog.allow(10 * time.Second); ok {
		in.e.log.Warn("flow node failed", slog.String("flow", in.def.Name), slog.String("node", fe.Node),
			slog.String("kind", fe.Kind), slog.String("error", fe.Message), slog.Int("line", fe.Line),
			slog.String("on_error", nr.def.OnError), slog.Int("failures_since_last_line", held+1))
	}
	switch nr.def.OnError {
	case OnErrorRoute:
		m.set("error", map[string]any{"flow": in.def.Name, "node": fe.Node, "kind": fe.Kind, "message": fe.Message,
			"line": fe.Line, "time": fe.Time.Format(time.RFC3339Nano)})
		return append(outs, out{to: nr.def.Error, m: m})
	case OnErrorFail:
		nr.mu.Lock()
		first := !nr.failed
		nr.failed = true
		nr.mu.Unlock()
		if first {
			in.e.log.Error("flow node failed and stopped until reset", slog.String("flow", in.def.Name),
				slog.String("node", fe.Node), slog.String("kind", fe.Kind), slog.String("error", fe.Message))
			in.audit("flow.node_failed", in.def.Name+"/"+fe.Node, fe.Kind, fe.Message,
				map[string]any{"version": in.version, "line": fe.Line})
		}
	}
	return outs // drop, fail: the message goes no further
}

// audit records ev; a record that cannot be queued is logged.
func (in *instance) audit(action, target, result, detail string, after any) {
	err := in.e.gw.Audit(context.WithoutCancel(in.ctx), in.grant, gateway.AuditEvent{Action: action, Target: target,
		Result: result, Detail: detail, After: after})
	if err != nil {
		in.e.log.Error("flow audit record lost", slog.String("action", action), slog.String("target", target), slog.Any("err", err))
	}
}

// next is where a message that passed node nd goes.
func next(nd *NodeDef, m *Msg, outs []out) []out { return append(outs, out{to: nd.Next, m: m}) }

// --- python ---

func (in *instance) runPython(nr *nodeRun, msgs []*Msg) []out {
	var outs []out
	// One node run takes at most gateway.MaxNodeBatch messages; a node
	// behind a fan-out (a list returned upstream) may receive more.
	chunk := min(len(msgs), gateway.MaxNodeBatch)
	if nr.def.OnError == OnErrorFail {
		chunk = 1 // it stops at the failing message: none after it runs
	}
	for start := 0; start < len(msgs); {
		if nr.isFailed() {
			in.markLost(msgs[start:])
			return outs
		}
		end := min(start+chunk, len(msgs))
		raws := make([]json.RawMessage, 0, end-start)
		for _, m := range msgs[start:end] {
			b, err := m.bytes()
			if err != nil {
				b = json.RawMessage(`{}`)
			}
			raws = append(raws, b)
		}
		res, err := in.e.gw.RunNode(in.ctx, in.grant, gateway.NodeRun{Module: nr.module, Entry: nr.entry, Msgs: raws,
			Timeout: nr.def.Timeout})
		if err != nil {
			fe := runFailure(err)
			for _, m := range msgs[start:end] {
				outs = in.fail(nr, m, copyErr(fe), outs)
			}
			start = end
			continue
		}
		if len(res) == 0 {
			fe := &gateway.FlowError{Kind: KindNodeRunError, Message: "the node run answered nothing"}
			outs = in.fail(nr, msgs[start], fe, outs)
			start++
			continue
		}
		for i, r := range res {
			outs = in.pythonResult(nr, msgs[start+i], r, outs)
		}
		start += len(res)
	}
	return outs
}

func copyErr(fe *gateway.FlowError) *gateway.FlowError { c := *fe; return &c }

// runFailure is the failure of a node call that ran nothing.
func runFailure(err error) *gateway.FlowError {
	var se *gateway.ScriptError
	if errors.As(err, &se) {
		fe := &gateway.FlowError{Kind: scriptKind(se.Kind), Message: se.Detail}
		if fe.Kind == KindException {
			fe.Message = "the node's module failed to load: " + se.Detail
		}
		return fe
	}
	return &gateway.FlowError{Kind: KindNodeRunError, Message: err.Error()}
}

// scriptKind maps a script failure's kind to the flow's words.
func scriptKind(k string) string {
	switch k {
	case gateway.KindTimeout:
		return KindTimeout
	case gateway.KindScriptError:
		return KindException
	case gateway.KindBadResult:
		return KindBadReturn
	case gateway.KindPermissionDenied:
		return KindDenied
	}
	return k
}

func (in *instance) pythonResult(nr *nodeRun, m *Msg, r gateway.NodeResult, outs []out) []out {
	in.logPrints(nr, r.Logs)
	if r.Err != nil {
		return in.fail(nr, m, &gateway.FlowError{Kind: scriptKind(r.Err.Kind), Message: r.Err.Detail, Line: r.Line}, outs)
	}
	v := trimSpace(r.Value)
	if n := nesting(v); n > MaxNesting+1 || (n > MaxNesting && (len(v) == 0 || v[0] != '[')) {
		// A list of messages is one level more than its messages.
		return in.fail(nr, m, &gateway.FlowError{Kind: KindBadReturn,
			Message: fmt.Sprintf("transform returned a message nesting %d levels deep; a message nests at most %d", n, MaxNesting)}, outs)
	}
	switch {
	case len(v) > 0 && v[0] == '{':
		nm := rawMsg(v)
		nm.ord = m.ord
		return next(nr.def, nm, outs)
	case len(v) > 0 && v[0] == '[':
		var list []json.RawMessage
		if err := json.Unmarshal(v, &list); err == nil {
			ok := true
			for _, e := range list {
				if e = trimSpace(e); len(e) == 0 || e[0] != '{' {
					ok = false
				}
			}
			if ok {
				for _, e := range list {
					nm := rawMsg(trimSpace(e))
					nm.ord = m.ord
					outs = next(nr.def, nm, outs)
				}
				if len(list) == 0 {
					in.fs.ctr.filtered.Add(1)
				}
				return outs
			}
		}
	case string(v) == "null":
		in.fs.ctr.filtered.Add(1)
		return outs
	}
	return in.fail(nr, m, &gateway.FlowError{Kind: KindBadReturn,
		Message: fmt.Sprintf("transform returned %s, which is not a message (a dict), a list of messages or None", preview(v))}, outs)
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\n' || b[0] == '\t' || b[0] == '\r') {
		b = b[1:]
	}
	return b
}

func preview(b []byte) string {
	s := string(b)
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	return s
}

// logPrints sends what a node printed to the daemon's log, at most one
// line per node and second (the rest counted).
func (in *instance) logPrints(nr *nodeRun, logs []gateway.LogLine) {
	for _, l := range logs {
		if ok, held := nr.printLog.allow(time.Second); ok {
			in.e.log.Info("flow node: "+l.Msg, slog.String("flow", in.def.Name), slog.String("node", nr.def.ID),
				slog.String("level", l.Level), slog.Int("lines_held_back", held))
		}
	}
}

// --- filter ---

func (in *instance) runFilter(nr *nodeRun, msgs []*Msg) []out {
	var outs []out
	nd := nr.def
	for _, m := range msgs {
		if passes(nd, m) {
			outs = next(nd, m, outs)
		} else if nd.Else != "" {
			outs = append(outs, out{to: nd.Else, m: m})
		} else {
			in.fs.ctr.filtered.Add(1)
		}
	}
	return outs
}

func passes(nd *NodeDef, m *Msg) bool {
	if len(nd.Quality) > 0 {
		qv, _ := m.get("quality")
		qs, _ := qv.(string)
		q, err := value.ParseQuality(qs)
		if err != nil {
			return false
		}
		ok := false
		for _, want := range nd.Quality {
			switch want {
			case "Good":
				ok = ok || q.IsGood()
			case "Uncertain":
				ok = ok || q.IsUncertain()
			case "Bad":
				ok = ok || q.IsBad()
			default:
				ok = ok || qs == want
			}
		}
		if !ok {
			return false
		}
	}
	c := nd.Cond
	if c == nil {
		return true
	}
	v, ok := m.get(nd.Field)
	if !ok {
		return false
	}
	if c.Above != nil || c.Below != nil || c.AtLeast != nil || c.AtMost != nil {
		x, ok := number(v)
		if !ok {
			return false
		}
		if (c.Above != nil && !(x > *c.Above)) || (c.Below != nil && !(x < *c.Below)) ||
			(c.AtLeast != nil && !(x >= *c.AtLeast)) || (c.AtMost != nil && !(x <= *c.AtMost)) {
			return false
		}
	}
	if c.HasEquals && !same(v, c.Equals) {
		return false
	}
	if c.HasNotEquals && same(v, c.NotEquals) {
		return false
	}
	return true
}

// number is v as a float64 when it is a number.
func number(v any) (float64, bool) {
	switch x := v.(type) {
	case json.Number:
		f, err := x.Float64()
		return f, err == nil && !math.IsInf(f, 0)
	case float64:
		return x, true
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case uint64:
		return float64(x), true
	}
	return 0, false
}

// same compares a message's value with one written in the flow: numbers by
// value, the rest by their JSON.
func same(v, want any) bool {
	if a, ok := number(v); ok {
		b, ok := number(want)
		return ok && a == b
	}
	x, err1 := json.Marshal(v)
	y, err2 := json.Marshal(want)
	return err1 == nil && err2 == nil && string(x) == string(y)
}

// --- tag write ---

func (in *instance) runTagWrite(nr *nodeRun, msgs []*Msg) []out {
	var outs []out
	nd := nr.def
	var writes []gateway.TagWrite
	var writing []*Msg
	for _, m := range msgs {
		if qv, ok := m.get("quality"); ok && !nd.AllowBad {
			if qs, _ := qv.(string); qs != value.Good.String() {
				outs = in.fail(nr, m, &gateway.FlowError{Kind: KindBadQuality,
					Message: fmt.Sprintf("not written to %s: the message's quality is %s (allow_bad_quality: true writes it anyway)", nd.Path, qs)}, outs)
				continue
			}
		}
		v, ok := m.get(nd.Field)
		if !ok {
			outs = in.fail(nr, m, &gateway.FlowError{Kind: KindNoValue, Message: fmt.Sprintf("the message has no field %q to write to %s", nd.Field, nd.Path)}, outs)
			continue
		}
		val, err := toValue(v)
		if err != nil {
			outs = in.fail(nr, m, &gateway.FlowError{Kind: KindWriteFailed, Message: fmt.Sprintf("field %q: %v", nd.Field, err)}, outs)
			continue
		}
		writes = append(writes, gateway.TagWrite{Path: nd.Path, Value: val})
		writing = append(writing, m)
	}
	if len(writes) == 0 {
		return outs
	}
	res, err := in.e.gw.WriteTags(in.ctx, in.grant, writes)
	if err == nil && len(res) != len(writes) {
		err = fmt.Errorf("the write answered %d results for %d writes", len(res), len(writes))
	}
	for i, m := range writing {
		if err != nil {
			outs = in.fail(nr, m, &gateway.FlowError{Kind: KindWriteFailed, Message: fmt.Sprintf("%s: nothing written: %v", nd.Path, err)}, outs)
			continue
		}
		r := res[i]
		if r.Quality != value.Good {
			msg := r.Quality.String()
			if r.Reason != "" {
				msg += ": " + r.Reason
			}
			outs = in.fail(nr, m, &gateway.FlowError{Kind: KindWriteFailed, Message: nd.Path + ": " + msg}, outs)
			continue
		}
		m.set("write", map[string]any{"path": nd.Path, "status": r.Quality.String()})
		outs = next(nd, m, outs)
	}
	return outs
}

// toValue turns a message field into a tag value (value.Normalize form).
func toValue(v any) (value.Value, error) {
	if v == nil {
		return nil, errors.New("null cannot be written")
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return value.DecodeJSON(b)
}

// --- mqtt publish ---

func (in *instance) runPublish(nr *nodeRun, msgs []*Msg) []out {
	var outs []out
	nd := nr.def
	for _, m := range msgs {
		pub := in.e.opts.Publisher
		if pub == nil {
			outs = in.fail(nr, m, &gateway.FlowError{Kind: KindPublish, Message: "the supervisor link is not wired to the flows in this qubiqd"}, outs)
			continue
		}
		v, ok := m.get(nd.Field)
		if !ok {
			outs = in.fail(nr, m, &gateway.FlowError{Kind: KindNoValue, Message: fmt.Sprintf("the message has no field %q to publish", nd.Field)}, outs)
			continue
		}
		b, err := json.Marshal(v)
		if err == nil {
			err = pub.Publish(in.ctx, in.grant, nd.Topic, b, nd.Retain)
		}
		if err != nil {
			outs = in.fail(nr, m, &gateway.FlowError{Kind: KindPublish, Message: nd.Topic + ": " + err.Error()}, outs)
			continue
		}
		outs = next(nd, m, outs)
	}
	return outs
}

// --- log ---

var templateRe = regexp.MustCompile(`\{([A-Za-z_][A-Za-z0-9_.]*)\}`)

// expand fills {field} in text with the message's values.
func expand(text string, m *Msg) string {
	return templateRe.ReplaceAllStringFunc(text, func(s string) string {
		v, ok := m.get(s[1 : len(s)-1])
		if !ok {
			return s
		}
		if str, ok := v.(string); ok {
			return str
		}
		b, err := json.Marshal(v)
		if err != nil {
			return s
		}
		return string(b)
	})
}

func (in *instance) runLog(nr *nodeRun, msgs []*Msg) []out {
	var outs []out
	nd := nr.def
	level := map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo, "warning": slog.LevelWarn,
		"error": slog.LevelError}[nd.Level]
	for _, m := range msgs {
		text := nd.Message
		if text == "" {
			b, _ := m.bytes()
			text = string(b)
		} else {
			text = expand(text, m)
		}
		in.e.log.Log(in.ctx, level, "flow: "+text, slog.String("flow", in.def.Name), slog.String("node", nd.ID))
		if nd.Audit {
			in.audit("flow.log", in.def.Name+"/"+nd.ID, "ok", text, nil)
		}
		outs = next(nd, m, outs)
	}
	return outs
}

// --- message ---

func (in *instance) runMessage(nr *nodeRun, msgs []*Msg) []out {
	var outs []out
	nd := nr.def
	for _, m := range msgs {
		b, err := m.bytes()
		if err == nil {
			_, err = in.e.gw.SendMessage(in.ctx, in.grant, nd.Handler, b)
		}
		if err != nil {
			kind := KindMessageFail
			var de *auth.DeniedError
			if errors.As(err, &de) {
				kind = KindDenied
			}
			outs = in.fail(nr, m, &gateway.FlowError{Kind: kind, Message: nd.Handler + ": " + err.Error()}, outs)
			continue
		}
		outs = next(nd, m, outs)
	}
	return outs
}
