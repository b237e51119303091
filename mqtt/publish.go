package mqtt

import (
	"context"
	"encoding/json"
	"log/slog"
	"math"
	"sort"
	"strings"
	"time"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/gateway"
	"qubiq.dev/edge/tagpath"
	"qubiq.dev/edge/value"
)

// Publish modes of a PublishRule.
const (
	ModeChange   = "change"   // every change beyond the deadband
	ModeInterval = "interval" // at most one value per Interval: the latest that came in since the last one (nothing when none did)
	ModeOff      = "off"      // nothing
)

// PublishRule is how the tags at Path (one tag), or under Prefix (whole
// segments; "" every tag), are published: Mode, the absolute Deadband of
// ModeChange (numbers; 0 every change), the Interval of ModeInterval,
// Retain, and QoS 0 or 1 (a QoS 0 message made while the link is down,
// or sent but unconfirmed when the connection ends, still goes through
// the outbox at QoS 1).
type PublishRule struct {
	Path     string
	Prefix   string
	Mode     string
	Deadband float64
	Interval time.Duration
	Retain   bool
	QoS      int
}

// PublishPolicy is the project's tag publishing (docs/mqtt.md): its rules
// (the rule of a tag is the one naming its path, else the one with the
// longest prefix holding it, else none: not published), and Batched: one
// message on `tags` per scan class and pass instead of one per tag on
// tags/<path>.
type PublishPolicy struct {
	Rules   []PublishRule
	Batched bool
}

// Rule returns the rule for path, and false when none applies.
func (p *PublishPolicy) Rule(path string) (PublishRule, bool) {
	best, found := PublishRule{}, false
	for _, r := range p.Rules {
		if r.Path != "" {
			if r.Path == path {
				return r, r.Mode != ModeOff
			}
			continue
		}
		inside := r.Prefix == "" || path == r.Prefix || strings.HasPrefix(path, r.Prefix+"/")
		if inside && (!found || len(r.Prefix) > len(best.Prefix)) {
			best, found = r, true
		}
	}
	if found && best.Mode == ModeOff {
		return best, false
	}
	return best, found
}

// tagMsg is the per-tag payload: value, quality, time, sequence number.
type tagMsg struct {
	V      json.RawMessage `json:"v"`
	Q      string          `json:"q"`
	T      string          `json:"t"`
	Seq    uint64          `json:"seq"`
	Reason string          `json:"reason,omitempty"`
}

// batchEntry is one value in the batched payload.
type batchEntry struct {
	P string          `json:"p"`
	V json.RawMessage `json:"v"`
	Q string          `json:"q"`
	T string          `json:"t"`
}

// publishGrant is what the link reads tags as: tag:read on every path.
var publishGrant = auth.Grant{Principal: "mqtt", Realm: auth.RealmSupervisor, Origin: "mqtt",
	Scopes: []auth.Scope{auth.TagRead, auth.AlarmRead}}

// nextSeq returns the next message sequence number. It starts from the
// link's start time in microseconds, so numbers keep rising across
// restarts of qubiqd and a subscriber can tell a duplicate (same number)
// from a new message.
func (l *Link) nextSeq() uint64 {
	l.pubSeq.CompareAndSwap(0, uint64(l.start.UnixMicro()))
	return l.pubSeq.Add(1)
}

// change is a value to publish under its rule.
type change struct {
	tv   gateway.TagValue
	rule PublishRule
}

// publishTags publishes the tag changes by the policy until ctx ends.
// Changes that arrive together (one scan) go out in one outbox commit,
// and, batched, as one message per scan class.
func (l *Link) publishTags(ctx context.Context) {
	ch, dropped, cancel := l.opts.Gateway.SubscribeValues(publishGrant, 8192)
	defer cancel()
	pol := l.opts.Publish
	lastSent := map[string]value.Value{}
	latest := map[string]change{}     // interval mode: the latest value per tag
	nextDue := map[string]time.Time{} // interval mode: when each tag is due
	scans := map[string]time.Duration{}
	for _, ti := range l.opts.Gateway.ListTags(ctx, publishGrant) {
		scans[ti.Path] = ti.Scan
	}
	topics := map[string]string{} // tags/<path> by path: each path checked once
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var lost uint64
	for {
		var pass []change
		select {
		case tv := <-ch:
			pass = l.take(pol, tv, pass, lastSent, latest)
		drain:
			for len(pass) < 16384 {
				select {
				case tv := <-ch:
					pass = l.take(pol, tv, pass, lastSent, latest)
				default:
					break drain
				}
			}
		case now := <-tick.C:
			for p, c := range latest {
				if now.After(nextDue[p]) {
					pass = append(pass, c)
					nextDue[p] = now.Add(c.rule.Interval)
					delete(latest, p)
				}
			}
			l.confirmQoS0()
			if d := dropped(); d > lost {
				l.log.Warn("mqtt tag publishing fell behind: changes lost", slog.Uint64("lost", d-lost))
				lost = d
			}
		case <-ctx.Done():
			return
		}
		if len(pass) > 0 {
			l.publishPass(ctx, pol, pass, scans, topics)
		}
	}
}

// take applies the rule of tv's tag: off and inside-the-deadband changes
// are skipped, interval values are kept for their tick.
func (l *Link) take(pol *PublishPolicy, tv gateway.TagValue, pass []change, lastSent map[string]value.Value, latest map[string]change) []change {
	r, ok := pol.Rule(tv.Path)
	if !ok {
		return pass
	}
	if r.Mode == ModeInterval {
		latest[tv.Path] = change{tv, r}
		return pass
	}
	if prev, had := lastSent[tv.Path]; had && r.Deadband > 0 && tv.Quality.IsGood() {
		a, aok := value.ToFloat(prev)
		b, bok := value.ToFloat(tv.Value)
		if aok && bok && math.Abs(a-b) < r.Deadband {
			return pass
		}
	}
	if r.Deadband > 0 { // the last value sent matters only to a deadband
		lastSent[tv.Path] = tv.Value
	}
	return append(pass, change{tv, r})
}

// publishPass sends one pass of changes: per tag on tags/<path>, or
// batched on `tags`, one message per scan class. topics caches the
// per-tag topics (an empty one: the path is not a valid topic).
func (l *Link) publishPass(ctx context.Context, pol *PublishPolicy, pass []change, scans map[string]time.Duration, topics map[string]string) {
	var q0, q1 []Message
	add := func(m Message, qos int) {
		if qos == 0 {
			q0 = append(q0, m)
		} else {
			q1 = append(q1, m)
		}
	}
	now := time.Now().UTC()
	if pol.Batched {
		type group struct {
			entries []batchEntry
			retain  bool
			qos     int
		}
		groups := map[time.Duration]*group{}
		var order []time.Duration
		for _, c := range pass {
			s := scans[c.tv.Path]
			g := groups[s]
			if g == nil {
				g = &group{qos: 0}
				groups[s] = g
				order = append(order, s)
			}
			v, _ := value.EncodeJSON(c.tv.Value)
			g.entries = append(g.entries, batchEntry{P: c.tv.Path, V: v, Q: c.tv.Quality.String(), T: stamp(c.tv.Time)})
			g.retain = g.retain || c.rule.Retain
			g.qos = max(g.qos, c.rule.QoS)
		}
		sort.Slice(order, func(i, j int) bool { return order[i] < order[j] })
		for _, s := range order {
			g := groups[s]
			b, _ := json.Marshal(struct {
				Seq    uint64       `json:"seq"`
				Values []batchEntry `json:"values"`
			}{l.nextSeq(), g.entries})
			add(Message{Topic: "tags", Payload: b, Retain: g.retain, Queued: now}, g.qos)
		}
	} else {
		// The payloads share one allocation; the values of a scan share
		// their time's text.
		arena := make([]byte, 0, len(pass)*96)
		var st stamper
		for _, c := range pass {
			topic, seen := topics[c.tv.Path]
			if !seen {
				topic, _ = tagpath.Topic("tags", c.tv.Path)
				topics[c.tv.Path] = topic
			}
			if topic == "" {
				continue
			}
			start := len(arena)
			arena = appendTagMsg(arena, c.tv.Value, c.tv.Quality, st.stamp(c.tv.Time), l.nextSeq(), c.tv.Reason)
			add(Message{Topic: topic, Payload: arena[start:len(arena):len(arena)], Retain: c.rule.Retain, Queued: now}, c.rule.QoS)
		}
	}
	if len(q1) > 0 {
		if err := l.enqueue(ctx, q1); err != nil {
			l.log.Error("mqtt tag values not queued", slog.Int("messages", len(q1)), slog.Any("err", err))
		}
	}
	if len(q0) > 0 {
		if err := l.publishDirect(ctx, q0); err != nil {
			l.log.Error("mqtt tag values not queued", slog.Int("messages", len(q0)), slog.Any("err", err))
		}
	}
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// publishAlarms publishes every alarm transition on alarms/<source path>
// (the alarm's source tag path as topic levels) through the outbox.
func (l *Link) publishAlarms(ctx context.Context) {
	ch, _, cancel := l.opts.Alarms.SubscribeAlarms(publishGrant, 1024)
	defer cancel()
	for {
		select {
		case ev := <-ch:
			topic, err := tagpath.Topic("alarms", ev.Alarm.Source)
			if err != nil {
				continue
			}
			v, _ := value.EncodeJSON(ev.Value)
			b, _ := json.Marshal(map[string]any{"id": ev.Alarm.ID, "name": ev.Alarm.Name, "source": ev.Alarm.Source,
				"priority": ev.Alarm.Priority, "event": ev.Event, "from": ev.From, "to": ev.To, "cause": ev.Cause,
				"by": ev.By, "t": stamp(ev.At), "v": v, "q": ev.Quality.String(), "state": ev.Alarm.State,
				"seq": l.nextSeq()})
			if err := l.enqueue(ctx, []Message{{Topic: topic, Payload: b}}); err != nil {
				l.log.Error("mqtt alarm transition not queued", slog.String("alarm", ev.Alarm.ID), slog.Any("err", err))
			}
		case <-ctx.Done():
			return
		}
	}
}
