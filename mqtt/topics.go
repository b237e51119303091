package mqtt

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/tagpath"
)

// TopicMessage is a message received on a topic a subscriber asked for:
// the topic below the base, the payload, when it arrived.
type TopicMessage struct {
	Topic   string
	Payload []byte
	Time    time.Time
}

type topicSub struct {
	filter  string
	ch      chan TopicMessage
	dropped atomic.Uint64
	once    sync.Once
}

// SubscribeTopic delivers the messages on topics matching filter (MQTT
// wildcards + and #, below the base; cmd/ is the link's own) into a
// channel of buf messages until cancel; dropped counts those lost because
// the subscriber fell behind. The subscription is made now when
// connected, and again on every connection.
func (l *Link) SubscribeTopic(filter string, buf int) (<-chan TopicMessage, func() uint64, func(), error) {
	if err := checkFilter(filter); err != nil {
		return nil, nil, nil, err
	}
	s := &topicSub{filter: filter, ch: make(chan TopicMessage, max(buf, 1))}
	l.mu.Lock()
	id := l.nextSub
	l.nextSub++
	l.filters[id] = s
	c := l.client
	l.mu.Unlock()
	if c != nil {
		c.Subscribe(l.base+"/"+filter, 1, nil) // answered asynchronously; the next connection makes it again
	}
	cancel := func() {
		s.once.Do(func() {
			l.mu.Lock()
			delete(l.filters, id)
			still := false
			for _, o := range l.filters {
				still = still || o.filter == filter
			}
			c := l.client
			l.mu.Unlock()
			if c != nil && !still {
				c.Unsubscribe(l.base + "/" + filter)
			}
		})
	}
	return s.ch, s.dropped.Load, cancel, nil
}

func checkFilter(f string) error {
	switch {
	case f == "" || strings.HasPrefix(f, "/") || strings.Contains(f, "\x00"):
		return errors.New("mqtt: a topic filter is one or more levels below the appliance's topics")
	case strings.HasPrefix(f, "cmd/") || f == "cmd" || f == "#" || strings.HasPrefix(f, "+"):
		return errors.New("mqtt: the filter " + f + " takes the link's own commands (cmd/...)")
	}
	if err := tagpath.CheckTopicText(f); err != nil {
		// The broker would close the connection at each subscription,
		// made again at every connect.
		return fmt.Errorf("mqtt: topic filter %q: %w", f, err)
	}
	lv := strings.Split(f, "/")
	for i, s := range lv {
		if (strings.Contains(s, "+") && s != "+") || (strings.Contains(s, "#") && (s != "#" || i != len(lv)-1)) {
			return errors.New("mqtt: bad topic filter " + f)
		}
	}
	return nil
}

// Match reports whether topic matches the MQTT filter (MQTT 3.1.1 §4.7:
// + one level, # the rest, levels compared exactly).
func Match(filter, topic string) bool {
	fl, tl := strings.Split(filter, "/"), strings.Split(topic, "/")
	for i, f := range fl {
		if f == "#" {
			return true
		}
		if i >= len(tl) {
			return false
		}
		if f != "+" && f != tl[i] {
			return false
		}
	}
	return len(fl) == len(tl)
}

func (l *Link) deliverTopic(in inbound) {
	l.mu.Lock()
	var subs []*topicSub
	for _, s := range l.filters {
		if Match(s.filter, in.topic) {
			subs = append(subs, s)
		}
	}
	l.mu.Unlock()
	for _, s := range subs {
		select {
		case s.ch <- TopicMessage{Topic: in.topic, Payload: in.payload, Time: in.at}:
		default:
			if s.dropped.Add(1) == 1 {
				l.log.Warn("mqtt flow subscription fell behind: messages dropped", slog.String("filter", s.filter))
			}
		}
	}
}

// Publish queues payload on topic (below the base) through the outbox:
// when it returns nil the message is committed and will go out, in order,
// once the broker acknowledges it. g is the publisher's grant (a flow's),
// recorded in the log of a failure.
func (l *Link) Publish(ctx context.Context, g auth.Grant, topic string, payload []byte, retain bool) error {
	if topic == "" || strings.ContainsAny(topic, "+#\x00") || strings.HasPrefix(topic, "cmd/") || strings.HasPrefix(topic, "/") {
		return errors.New("mqtt: topic " + topic + " cannot be published (no wildcards, not below cmd/)")
	}
	if err := tagpath.CheckTopicText(topic); err != nil {
		// The broker would close the connection at each attempt, and the
		// outbox would send it again at every reconnect.
		return fmt.Errorf("mqtt: topic %q cannot be published: %w", topic, err)
	}
	if err := l.enqueue(ctx, []Message{{Topic: topic, Payload: payload, Retain: retain}}); err != nil {
		l.log.Warn("mqtt publish failed", slog.String("principal", g.Principal), slog.String("topic", topic), slog.Any("err", err))
		return err
	}
	return nil
}
