package flow

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/gateway"
	"qubiq.dev/edge/value"
)

// What the flow engine needs from the parts around it, each as a small
// interface of its own (the daemon passes the concrete ones).

// Gateway is the part of the service layer the engine calls: the Python
// nodes, tag writes and the change stream, messages, the saved scripts,
// the audit log. gateway/service implements it.
type Gateway interface {
	gateway.Nodes
	WriteTags(ctx context.Context, g auth.Grant, writes []gateway.TagWrite) ([]gateway.WriteResult, error)
	ListTags(ctx context.Context, g auth.Grant) []gateway.TagInfo
	// SubscribeValuesFunc streams the changes of the tags whose path want
	// accepts (gateway/service.Service.SubscribeValuesFunc).
	SubscribeValuesFunc(g auth.Grant, buf int, want func(path string) bool) (ch <-chan gateway.TagValue, dropped func() uint64, cancel func())
	SendMessage(ctx context.Context, g auth.Grant, handler string, payload json.RawMessage) (gateway.ScriptRun, error)
	ListScripts(ctx context.Context, g auth.Grant) ([]gateway.ScriptInfo, error)
	CanAudit() error
	Audit(ctx context.Context, g auth.Grant, ev gateway.AuditEvent) error
}

// Store keeps the versions of each flow: opaque records, numbered from 1,
// never reused (store.DB implements it). Not found, stale and only-one
// are answered as booleans; err is a failure of the store.
type Store interface {
	// SaveFlowVersion stores rec as version (0: the next) of name; stale
	// when version is not above every version name was ever given.
	SaveFlowVersion(name string, version int, rec []byte) (saved int, stale bool, err error)
	// FlowVersion returns version (0: the latest) of name.
	FlowVersion(name string, version int) (v int, rec []byte, ok bool, err error)
	// FlowVersions returns every version of name, oldest first.
	FlowVersions(name string) (versions []int, recs [][]byte, err error)
	// LatestFlows returns the latest version of every flow, by name.
	LatestFlows() (names []string, versions []int, recs [][]byte, err error)
	// DropLatestFlowVersion removes the latest version of name and
	// returns the one latest now.
	DropLatestFlowVersion(name string) (v int, rec []byte, found, only bool, err error)
	// DeleteFlowVersions removes every version of name.
	DeleteFlowVersions(name string) (found bool, err error)
}

// TopicMessage is one message the supervisor link received on a topic a
// flow subscribed to: the topic below the appliance's base topic
// (qubiq/v1/<appliance_id>/), the payload as received, and when.
type TopicMessage struct {
	Topic   string
	Payload []byte
	Time    time.Time
}

// TopicSource is the supervisor link's side of mqtt triggers: the mqtt
// part implements it (wiring: docs/flows.md, "MQTT and alarms").
type TopicSource interface {
	// SubscribeTopic delivers the messages on the topics matching filter
	// (MQTT wildcards + and #, below the appliance's base topic) into a
	// channel of buf messages until cancel; dropped counts those lost
	// because the flow fell behind. An error means the subscription could
	// not be made (the flow is stopped, its reason the error).
	SubscribeTopic(filter string, buf int) (ch <-chan TopicMessage, dropped func() uint64, cancel func(), err error)
}

// Publisher is the supervisor link's side of mqtt_publish nodes: the mqtt
// part implements it, with store-and-forward (the outbox), so a publish
// that returned nil is queued durably. g is the flow's grant, for the
// link's audit.
type Publisher interface {
	Publish(ctx context.Context, g auth.Grant, topic string, payload []byte, retain bool) error
}

// AlarmTransition is one transition of an alarm (the alarm API's journal
// entry): the alarm's id, name, source tag and priority, the states from
// and to, the cause ("condition", "ack", "shelve", ...), who caused it,
// when, and the source's value and quality then.
type AlarmTransition struct {
	ID       string
	Name     string
	Source   string
	Priority string
	From     string
	To       string
	Cause    string
	By       string
	Time     time.Time
	Value    value.Value
	Quality  value.Quality
}

// AlarmSource is the alarm part's side of alarm triggers: the alarm part
// implements it (wiring: docs/flows.md, "MQTT and alarms").
type AlarmSource interface {
	// SubscribeTransitions delivers every transition of an alarm g may
	// read (scope alarm:read and the alarm's source tag within g's
	// prefixes) into a channel of buf transitions until cancel; dropped
	// counts those lost because the flow fell behind. g is the flow's
	// grant (docs/flows.md, "Grants").
	SubscribeTransitions(g auth.Grant, buf int) (ch <-chan AlarmTransition, dropped func() uint64, cancel func())
}

// AlarmsFrom makes the AlarmSource of alarm triggers from the service
// layer's alarms: each flow subscribes under its own grant, so only alarms
// the grant may read arrive (gateway.Alarms.SubscribeAlarms). The daemon
// passes it as Options.Alarms.
func AlarmsFrom(a gateway.Alarms) AlarmSource { return gatewayAlarms{a} }

type gatewayAlarms struct{ alarms gateway.Alarms }

// SubscribeTransitions converts the service's alarm events into
// transitions; a full channel counts the lost one in dropped.
func (a gatewayAlarms) SubscribeTransitions(g auth.Grant, buf int) (<-chan AlarmTransition, func() uint64, func()) {
	in, dropped, cancel := a.alarms.SubscribeAlarms(g, buf)
	out := make(chan AlarmTransition, max(buf, 1))
	stop := make(chan struct{})
	var lost atomic.Uint64
	go func() {
		for {
			select {
			case <-stop:
				return
			case ev := <-in:
				at := AlarmTransition{ID: ev.Alarm.ID, Name: ev.Alarm.Name, Source: ev.Alarm.Source,
					Priority: ev.Alarm.Priority, From: ev.From, To: ev.To, Cause: ev.Cause, By: ev.By,
					Time: ev.At, Value: ev.Value, Quality: ev.Quality}
				select {
				case out <- at:
				default:
					lost.Add(1)
				}
			}
		}
	}()
	var once sync.Once
	return out, func() uint64 { return dropped() + lost.Load() }, func() { once.Do(func() { cancel(); close(stop) }) }
}
