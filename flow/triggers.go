package flow

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/gateway"
	"qubiq.dev/edge/value"
)

// Triggers: each makes messages and offers them to its flow's queue,
// never blocking (what does not fit is dropped and counted).
//
// The message fields every trigger sets: flow, trigger (its kind), seq
// (1, 2, ... per flow), time (when it was made, RFC 3339 UTC) and payload.
// A tag change adds path, value, quality, timestamp, reason (when there is
// one) and previous ({value, quality, timestamp} of the tag's change
// before, or null); a message adds handler and sender; an MQTT message
// topic; an alarm transition alarm and the source's value and quality.

// base is the fields of every message of flow fs.
func (fs *flowState) base(kind string, now time.Time) map[string]any {
	return map[string]any{"flow": fs.name, "trigger": kind, "seq": fs.seq.Add(1),
		"time": now.UTC().Format(time.RFC3339Nano)}
}

func jsonValue(v value.Value) json.RawMessage {
	b, err := value.EncodeJSON(v)
	if err != nil || len(b) == 0 {
		return json.RawMessage("null")
	}
	return b
}

// vqtFields are a VQT's message fields.
func vqtFields(v value.VQT) map[string]any {
	out := map[string]any{"value": jsonValue(v.Value), "quality": v.Quality.String(),
		"timestamp": v.Time.UTC().Format(time.RFC3339Nano)}
	if v.Reason != "" {
		out["reason"] = v.Reason
	}
	return out
}

// --- tag changes ---

// tagRoute is one flow's trigger on one tag path.
type tagRoute struct {
	fs       *flowState
	path     string
	deadband float64
	onlyGood bool
	mu       sync.Mutex
	sent     *value.VQT // the last change offered (deadband)
}

// startFeedLocked subscribes to the tag engine's changes once for every
// tag trigger, filtered to the tags some trigger names (routed: the tag
// engine queues nothing for the others); the feed never blocks the tag
// engine (its overflow is counted: health shows it). Under feedMu.
func (e *Engine) startFeedLocked() {
	ch, dropped, cancel := e.gw.SubscribeValuesFunc(engineGrant, tagFeed, e.routed)
	stop := make(chan struct{})
	done := make(chan struct{})
	e.feedStop = func() { cancel(); close(stop) }
	e.feedDone, e.feedLost = done, dropped
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case c := <-ch:
				e.prevMu.Lock()
				prev, hadPrev := e.prev[c.Path]
				routes := (*e.routes.Load())[c.Path]
				if len(routes) > 0 {
					e.prev[c.Path] = c
				}
				e.prevMu.Unlock()
				for _, r := range routes {
					r.change(c, prev, hadPrev)
				}
			}
		}
	}()
}

// routed reports whether a tag trigger names path (the feed's filter,
// called from the tag engine's scans).
func (e *Engine) routed(path string) bool {
	return len((*e.routes.Load())[path]) > 0
}

// endFeedLocked ends the subscription, counting what it lost, and returns
// the channel closed when its goroutine ended (nil without a feed). Under
// feedMu.
func (e *Engine) endFeedLocked() chan struct{} {
	if e.feedStop == nil {
		return nil
	}
	e.feedStop()
	e.feedGone += e.feedLost()
	done := e.feedDone
	e.feedStop, e.feedDone, e.feedLost = nil, nil, nil
	return done
}

// stopFeed ends the feed for good (the engine stops) and waits for its
// goroutine.
func (e *Engine) stopFeed() {
	e.feedMu.Lock()
	e.feedOn = false
	done := e.endFeedLocked()
	e.feedMu.Unlock()
	if done != nil {
		<-done
	}
}

// feedLostTotal is the tag changes the flows' feed lost since the start.
func (e *Engine) feedLostTotal() uint64 {
	e.feedMu.Lock()
	defer e.feedMu.Unlock()
	n := e.feedGone
	if e.feedLost != nil {
		n += e.feedLost()
	}
	return n
}

// rebuildRoutes sets the tag routes from the running versions' triggers,
// keeping each route's deadband state.
func (e *Engine) rebuildRoutes() {
	old := *e.routes.Load()
	keep := map[*flowState]map[string]*tagRoute{}
	for _, rs := range old {
		for _, r := range rs {
			if keep[r.fs] == nil {
				keep[r.fs] = map[string]*tagRoute{}
			}
			keep[r.fs][r.path] = r
		}
	}
	next := map[string][]*tagRoute{}
	e.mu.RLock()
	for _, fs := range e.flows {
		in := fs.current()
		if in == nil || in.tagsOff.Load() || in.def.Trigger.Kind != TriggerTag {
			continue
		}
		for _, p := range in.def.Trigger.Tags {
			r := keep[fs][p]
			if r == nil || r.deadband != in.def.Trigger.Deadband || r.onlyGood != in.def.OnlyGood {
				r = &tagRoute{fs: fs, path: p, deadband: in.def.Trigger.Deadband, onlyGood: in.def.OnlyGood}
			}
			next[p] = append(next[p], r)
		}
	}
	e.mu.RUnlock()
	// The subscription only while some route exists: without tag
	// triggers every change of every tag would be handed over only to be
	// ignored. Taken before the routes are set, so a new route's first
	// change is seen; ended after they are cleared (its goroutine ends on
	// its own: this may run on it, when a flow stops itself).
	e.feedMu.Lock()
	if len(next) > 0 && e.feedOn && e.feedStop == nil {
		e.startFeedLocked()
	}
	e.routes.Store(&next)
	if len(next) == 0 {
		e.endFeedLocked()
	}
	e.feedMu.Unlock()
}

// change offers one tag change to the route's flow, unless the deadband
// or only_good holds it back.
func (r *tagRoute) change(c gateway.TagValue, prev gateway.TagValue, hadPrev bool) {
	r.mu.Lock()
	if r.sent != nil && c.Quality == r.sent.Quality && r.deadband > 0 {
		a, aok := value.ToFloat(r.sent.Value)
		b, bok := value.ToFloat(c.Value)
		if aok && bok && math.Abs(b-a) < r.deadband {
			r.mu.Unlock()
			return
		}
	}
	v := c.VQT
	r.sent = &v
	r.mu.Unlock()
	if r.onlyGood && !c.Quality.IsGood() {
		r.fs.ctr.filtered.Add(1) // skipped: the flow passes only Good values
		return
	}
	m := r.fs.base(TriggerTag, time.Now())
	for k, x := range vqtFields(c.VQT) {
		m[k] = x
	}
	m["path"] = c.Path
	m["payload"] = m["value"]
	if hadPrev {
		m["previous"] = vqtFields(prev.VQT)
	} else {
		m["previous"] = nil
	}
	r.fs.offer(newMsg(m))
}

// --- the trigger of one version ---

func (in *instance) onStop(f func()) {
	in.trigMu.Lock()
	in.trigStop = append(in.trigStop, f)
	in.trigMu.Unlock()
}

// startTrigger starts the version's trigger.
func (in *instance) startTrigger() error {
	t := in.def.Trigger
	switch t.Kind {
	case TriggerTag:
		in.e.seedPrev(in.ctx, t.Tags)
		in.e.rebuildRoutes()
	case TriggerTimer:
		stop := make(chan struct{})
		done := make(chan struct{})
		go in.timer(stop, done)
		in.onStop(func() { close(stop); <-done })
	case TriggerMessage:
		// DeliverMessage finds the running version by its trigger.
	case TriggerMQTT:
		if in.e.opts.Topics == nil {
			return fmt.Errorf("mqtt trigger %q: the supervisor link %s", t.Topic, linkWhy(in.e.opts.MQTTWhy, "is off"))
		}
		ch, dropped, cancel, err := in.e.opts.Topics.SubscribeTopic(t.Topic, 1024)
		if err != nil {
			return fmt.Errorf("mqtt trigger %q: %w", t.Topic, err)
		}
		in.trigMu.Lock()
		in.srcDropped = append(in.srcDropped, dropped)
		in.trigMu.Unlock()
		in.forward(cancel, func(stop <-chan struct{}) {
			for {
				select {
				case <-stop:
					return
				case tm, ok := <-ch:
					if !ok {
						return
					}
					in.fs.offer(newMsg(in.topicMsg(tm)))
				}
			}
		})
	case TriggerAlarm:
		if in.e.opts.Alarms == nil {
			return fmt.Errorf("alarm trigger: alarm transitions %s", linkWhy(in.e.opts.AlarmsWhy, "are not delivered by this qubiqd"))
		}
		if !in.grant.HasScope(auth.AlarmRead) {
			return fmt.Errorf("alarm trigger: the flow's grant has no %s scope, so no alarm transition would reach it", auth.AlarmRead)
		}
		ch, dropped, cancel := in.e.opts.Alarms.SubscribeTransitions(in.grant, 1024)
		in.trigMu.Lock()
		in.srcDropped = append(in.srcDropped, dropped)
		in.trigMu.Unlock()
		in.forward(cancel, func(stop <-chan struct{}) {
			for {
				select {
				case <-stop:
					return
				case at, ok := <-ch:
					if !ok {
						return
					}
					if m := in.alarmMsg(at); m != nil {
						in.fs.offer(newMsg(m))
					}
				}
			}
		})
	}
	return nil
}

// forward runs loop until the version stops, then cancels the source.
func (in *instance) forward(cancel func(), loop func(stop <-chan struct{})) {
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		loop(stop)
	}()
	in.onStop(func() { close(stop); <-done; cancel() })
}

// seedPrev reads the trigger tags' current VQTs, so the first change
// after a start carries its previous value too.
func (e *Engine) seedPrev(ctx context.Context, paths []string) {
	type reader interface {
		ReadTags(ctx context.Context, g auth.Grant, paths []string) []gateway.TagValue
	}
	r, ok := e.gw.(reader)
	if !ok {
		return
	}
	vals := r.ReadTags(ctx, engineGrant, paths)
	e.prevMu.Lock()
	defer e.prevMu.Unlock()
	for _, v := range vals {
		if _, seen := e.prev[v.Path]; !seen && v.Quality != value.BadNodeIDUnknown {
			e.prev[v.Path] = v
		}
	}
}

func (in *instance) timer(stop, done chan struct{}) {
	defer close(done)
	t := in.def.Trigger
	now := in.e.opts.Now
	for {
		var wait time.Duration
		if t.Cron != nil {
			n := t.Cron.Next(now())
			if n.IsZero() {
				in.e.log.Warn("cron expression never matches again", "flow", in.def.Name, "cron", t.Cron.String())
				return
			}
			wait = n.Sub(now())
		} else {
			wait = t.Every
		}
		tm := time.NewTimer(wait)
		select {
		case <-stop:
			tm.Stop()
			return
		case <-tm.C:
		}
		at := now()
		m := in.fs.base(TriggerTimer, at)
		m["payload"] = at.UTC().Format(time.RFC3339Nano)
		in.fs.offer(newMsg(m))
	}
}

func (in *instance) topicMsg(tm TopicMessage) map[string]any {
	m := in.fs.base(TriggerMQTT, tm.Time)
	m["topic"] = tm.Topic
	if json.Valid(tm.Payload) {
		m["payload"] = json.RawMessage(tm.Payload)
	} else {
		m["payload"] = strings.ToValidUTF8(string(tm.Payload), "\uFFFD")
	}
	return m
}

// alarmMsg is the message of an alarm transition the trigger selects, or
// nil.
func (in *instance) alarmMsg(at AlarmTransition) map[string]any {
	f := in.def.Trigger.Alarm
	if f.Source != "" && at.Source != f.Source && !strings.HasPrefix(at.Source, f.Source+"/") {
		return nil
	}
	if len(f.Priorities) > 0 && !slices.Contains(f.Priorities, at.Priority) {
		return nil
	}
	if len(f.To) > 0 && !slices.Contains(f.To, at.To) {
		return nil
	}
	if in.def.OnlyGood && !at.Quality.IsGood() {
		in.fs.ctr.filtered.Add(1)
		return nil
	}
	m := in.fs.base(TriggerAlarm, at.Time)
	alarm := map[string]any{"id": at.ID, "name": at.Name, "source": at.Source, "priority": at.Priority,
		"from": at.From, "to": at.To, "cause": at.Cause, "by": at.By, "at": at.Time.UTC().Format(time.RFC3339Nano)}
	m["alarm"] = alarm
	m["payload"] = alarm
	m["path"] = at.Source
	m["value"] = jsonValue(at.Value)
	m["quality"] = at.Quality.String()
	return m
}

// --- messages (gateway.MessageSink) ---

// MessageHandlers lists the message names the running flows' triggers
// take, sorted.
func (e *Engine) MessageHandlers() []string {
	var out []string
	e.mu.RLock()
	for _, fs := range e.flows {
		if in := fs.current(); in != nil && in.def.Trigger.Kind == TriggerMessage {
			out = append(out, in.def.Trigger.Message)
		}
	}
	e.mu.RUnlock()
	slices.Sort(out)
	return out
}

// DeliverMessage queues a message for the flow whose trigger is handler.
// The sender's grant must cover the flow's (auth.Grant.Covers).
func (e *Engine) DeliverMessage(_ context.Context, g auth.Grant, handler string, payload json.RawMessage) (gateway.ScriptRun, bool, error) {
	var target *flowState
	var in *instance
	e.mu.RLock()
	for _, fs := range e.flows {
		if cur := fs.current(); cur != nil && cur.def.Trigger.Kind == TriggerMessage && cur.def.Trigger.Message == handler {
			target, in = fs, cur
			break
		}
	}
	e.mu.RUnlock()
	if target == nil {
		return gateway.ScriptRun{}, false, nil
	}
	if err := g.Covers(in.grant, "message "+handler+" to flow "+target.name); err != nil {
		return gateway.ScriptRun{}, true, err
	}
	if len(payload) == 0 || !json.Valid(payload) {
		payload = json.RawMessage("null")
	}
	if n := nesting(payload); n >= MaxNesting { // the message holding it is one level more
		return gateway.ScriptRun{}, true, fmt.Errorf("%w: message %s: the payload nests %d levels deep; a message nests at most %d levels, its payload %d",
			gateway.ErrInvalid, handler, n, MaxNesting, MaxNesting-1)
	}
	m := target.base(TriggerMessage, time.Now())
	m["handler"] = handler
	m["sender"] = g.Principal
	m["payload"] = payload
	dropped, queued := target.offer(newMsg(m))
	res := map[string]any{"flow": target.name, "queued": queued}
	if dropped > 0 {
		res["dropped"] = dropped // the queue was full: this message, or the oldest that made room, was dropped
	}
	b, _ := json.Marshal(res)
	return gateway.ScriptRun{Result: b, Logs: []gateway.LogLine{}}, true, nil
}
