package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"qubiq.dev/edge/gateway"
)

// Devices (labels device and driver; docs/metrics.md, "Devices").
var (
	devState      = desc("qubiq_device_state", "1 for the device's connection state now (connected, connecting, degraded, disconnected, untrusted, refused, ...), 0 for the others.", "device", "driver", "state")
	devTags       = desc("qubiq_device_tags", "Tags the device serves.", "device", "driver")
	devRequests   = desc("qubiq_device_requests_total", "Requests to the device: reads, writes, keep-alive reads.", "device", "driver")
	devErrors     = desc("qubiq_device_errors_total", "Failed requests by kind: timeout, not_connected, communication, exception, configuration.", "device", "driver", "kind")
	devReconnects = desc("qubiq_device_reconnects_total", "Connections (OPC UA sessions) made again after one was lost.", "device", "driver")
	devLastGood   = desc("qubiq_device_last_good_poll_timestamp_seconds", "When the last successful read of the device ended (Unix time; absent: never).", "device", "driver")
	devLatency    = desc("qubiq_device_request_duration_seconds", "Time of the requests that reached the wire, from sending to the answer or the timeout.", "device", "driver")
	devBreaker    = desc("qubiq_device_unit_breaker_open", "1 while a Modbus unit is demoted by its circuit breaker, else 0.", "device", "unit")
	devUnitTO     = desc("qubiq_device_unit_consecutive_timeouts", "Consecutive timeouts of a Modbus unit (the breaker opens at breaker.timeouts).", "device", "unit")

	uaItems      = desc("qubiq_opcua_monitored_items", "Monitored items configured on the OPC UA device.", "device")
	uaBadItems   = desc("qubiq_opcua_monitored_items_bad", "Monitored items bad now (refused, node gone, not monitored).", "device")
	uaSubs       = desc("qubiq_opcua_subscriptions", "Subscriptions live on the OPC UA server.", "device")
	uaPublishes  = desc("qubiq_opcua_publish_responses_total", "Publish responses with data (OPC UA Part 4 §5.13.1.1).", "device")
	uaKeepAlives = desc("qubiq_opcua_keepalives_total", "Publish responses without data: the subscriptions' keep-alive messages.", "device")
	uaChanges    = desc("qubiq_opcua_data_changes_total", "Monitored item notifications delivered to the tag engine.", "device")
	uaSessions   = desc("qubiq_opcua_sessions_created_total", "OPC UA sessions created.", "device")
	uaReact      = desc("qubiq_opcua_sessions_reactivated_total", "OPC UA sessions re-activated on a new secure channel.", "device")
)

// deviceStates are the states every device gets a qubiq_device_state
// series for (0 or 1), so a state going away shows as 0, not as a gap.
var deviceStates = []string{"connected", "connecting", "degraded", "disconnected"}

func devices(e emitter, devs []gateway.DeviceInfo) {
	for _, d := range devs {
		seen := false
		for _, st := range deviceStates {
			seen = seen || st == d.State
			e.gauge(devState, b2f(st == d.State), d.Name, d.Driver, st)
		}
		if !seen && d.State != "" {
			e.gauge(devState, 1, d.Name, d.Driver, d.State)
		}
		e.gauge(devTags, float64(d.Tags), d.Name, d.Driver)
		s := d.Stats
		if s == nil {
			continue
		}
		e.counter(devRequests, float64(s.Requests), d.Name, d.Driver)
		for _, k := range sortedKeys(s.Errors) {
			e.counter(devErrors, float64(s.Errors[k]), d.Name, d.Driver, k)
		}
		e.counter(devReconnects, float64(s.Reconnects), d.Name, d.Driver)
		if !s.LastGood.IsZero() {
			e.gauge(devLastGood, float64(s.LastGood.UnixNano())/1e9, d.Name, d.Driver)
		}
		if l := s.Latency; len(l.Counts) == len(l.Bounds)+1 {
			buckets := make(map[float64]uint64, len(l.Bounds))
			var cum uint64
			for i, b := range l.Bounds {
				cum += l.Counts[i]
				buckets[b] = cum
			}
			e.ch <- prometheus.MustNewConstHistogram(devLatency, l.Count, l.Sum.Seconds(), buckets, d.Name, d.Driver)
		}
		for _, u := range s.Units {
			unit := strconv.Itoa(u.Unit)
			e.gauge(devBreaker, b2f(u.Breaker == "open"), d.Name, unit)
			e.gauge(devUnitTO, float64(u.Timeouts), d.Name, unit)
		}
		if o := s.OPCUA; o != nil {
			e.gauge(uaItems, float64(o.MonitoredItems), d.Name)
			e.gauge(uaBadItems, float64(o.BadItems), d.Name)
			e.gauge(uaSubs, float64(o.Subscriptions), d.Name)
			e.counter(uaPublishes, float64(o.PublishResponses), d.Name)
			e.counter(uaKeepAlives, float64(o.KeepAlives), d.Name)
			e.counter(uaChanges, float64(o.DataChanges), d.Name)
			e.counter(uaSessions, float64(o.SessionsCreated), d.Name)
			e.counter(uaReact, float64(o.SessionsReactivate), d.Name)
		}
	}
}

// Flows (label flow; the names docs/flows.md, "Health and metrics", gives).
var (
	flowIn        = desc("qubiq_flow_messages_in_total", "Messages the flow's trigger offered.", "flow")
	flowProcessed = desc("qubiq_flow_messages_processed_total", "Messages taken from the queue and run through the graph.", "flow")
	flowOut       = desc("qubiq_flow_messages_out_total", "Messages that reached an end of the graph.", "flow")
	flowFiltered  = desc("qubiq_flow_messages_filtered_total", "Messages a filter or a Python node stopped.", "flow")
	flowDropped   = desc("qubiq_flow_messages_dropped_total", "Messages lost before they were processed (queue full, flow failed, feed overflow).", "flow")
	flowErrors    = desc("qubiq_flow_errors_total", "Node failures, every error policy.", "flow")
	flowTimeouts  = desc("qubiq_flow_timeouts_total", "Node failures that were timeouts.", "flow")
	flowQueue     = desc("qubiq_flow_queue_messages", "Messages waiting in the flow's queue.", "flow")
	flowRunning   = desc("qubiq_flow_running", "1 while the flow runs, 0 when it failed or stopped.", "flow")
)

func flows(e emitter, fs []gateway.FlowStatus) {
	for _, f := range fs {
		c := f.Counters
		e.counter(flowIn, float64(c.In), f.Name)
		e.counter(flowProcessed, float64(c.Processed), f.Name)
		e.counter(flowOut, float64(c.Out), f.Name)
		e.counter(flowFiltered, float64(c.Filtered), f.Name)
		e.counter(flowDropped, float64(c.Dropped), f.Name)
		e.counter(flowErrors, float64(c.Errors), f.Name)
		e.counter(flowTimeouts, float64(c.Timeouts), f.Name)
		e.gauge(flowQueue, float64(f.Queue), f.Name)
		e.gauge(flowRunning, b2f(f.State == gateway.FlowRunning), f.Name)
	}
}

// Alarms (the names docs/alarms.md, "Metrics", gives).
var (
	alByState    = desc("qubiq_alarms", "Annunciated alarms by state: normal, active_unacked, active_acked, rtn_unacked.", "state")
	alShelved    = desc("qubiq_alarms_shelved", "Shelved alarms.")
	alSuppressed = desc("qubiq_alarms_suppressed", "Suppressed alarms (by design).")
	alOOS        = desc("qubiq_alarms_out_of_service", "Alarms out of service.")
	alNotEval    = desc("qubiq_alarms_not_evaluable", "Alarms whose tag is not Good: not evaluable.")
	alChatter    = desc("qubiq_alarms_chattering", "Alarms flagged as chattering now.")
	alActive     = desc("qubiq_alarms_active", "Active alarms by priority.", "priority")
	alRate       = desc("qubiq_alarm_rate_per_10min", "Alarm annunciations per 10 minutes over the last hour (EEMUA 191).")
	alFloods     = desc("qubiq_alarm_floods_24h", "Alarm floods in the last 24 hours (EEMUA 191: more than 10 per 10 minutes).")
	alJEntries   = desc("qubiq_alarm_journal_entries", "Entries in the alarm journal.")
	alJBytes     = desc("qubiq_alarm_journal_bytes", "Bytes of the alarm journal.")
	alCounters   = []struct {
		d *prometheus.Desc
		v func(*gateway.AlarmMetrics) uint64
	}{
		{desc("qubiq_alarm_activations_total", "Alarm annunciations."), func(a *gateway.AlarmMetrics) uint64 { return a.ActivationsTotal }},
		{desc("qubiq_alarm_transitions_total", "Alarm state transitions."), func(a *gateway.AlarmMetrics) uint64 { return a.TransitionsTotal }},
		{desc("qubiq_alarm_chattering_total", "Chattering flags raised."), func(a *gateway.AlarmMetrics) uint64 { return a.ChatteringTotal }},
		{desc("qubiq_alarm_evaluations_total", "Alarm evaluations."), func(a *gateway.AlarmMetrics) uint64 { return a.EvaluationsTotal }},
		{desc("qubiq_alarm_tag_changes_total", "Tag changes the alarm engine took."), func(a *gateway.AlarmMetrics) uint64 { return a.ChangesTotal }},
		{desc("qubiq_alarm_feed_dropped_total", "Tag changes the alarm feed lost."), func(a *gateway.AlarmMetrics) uint64 { return a.FeedDroppedTotal }},
		{desc("qubiq_alarm_resyncs_total", "Resyncs of the alarm engine after its feed lost changes."), func(a *gateway.AlarmMetrics) uint64 { return a.ResyncsTotal }},
		{desc("qubiq_alarm_journal_commit_errors_total", "Failed alarm journal commits."), func(a *gateway.AlarmMetrics) uint64 { return a.CommitErrorsTotal }},
		{desc("qubiq_alarm_journal_lost_total", "Alarm journal entries lost to failed commits."), func(a *gateway.AlarmMetrics) uint64 { return a.LostEntriesTotal }},
		{desc("qubiq_alarm_subscriber_dropped_total", "Alarm transitions slow WebSocket or link subscribers lost."), func(a *gateway.AlarmMetrics) uint64 { return a.SubscriberDropTotal }},
	}
)

func alarms(e emitter, a *gateway.AlarmMetrics) {
	for _, st := range sortedKeys(a.ByState) {
		e.gauge(alByState, float64(a.ByState[st]), st)
	}
	e.gauge(alShelved, float64(a.Shelved))
	e.gauge(alSuppressed, float64(a.Suppressed))
	e.gauge(alOOS, float64(a.OutOfService))
	e.gauge(alNotEval, float64(a.NotEvaluable))
	e.gauge(alChatter, float64(a.Chattering))
	for _, p := range sortedKeys(a.ActiveByPriority) {
		e.gauge(alActive, float64(a.ActiveByPriority[p]), p)
	}
	e.gauge(alRate, a.RatePer10Min)
	e.gauge(alFloods, float64(a.Floods24h))
	e.gauge(alJEntries, float64(a.JournalEntries))
	e.gauge(alJBytes, float64(a.JournalBytes))
	for _, c := range alCounters {
		e.counter(c.d, float64(c.v(a)))
	}
}
