package metrics

import (
	"context"
	"sort"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"qubiq.dev/edge/gateway"
)

// collector reads the service layer's figures once per scrape and turns
// them into series. It is an unchecked collector (Describe sends nothing):
// the series it sends depend on the project (devices, flows, states).
type collector struct{ cfg Config }

func (c *collector) Describe(chan<- *prometheus.Desc) {}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.ScrapeTimeout)
	defer cancel()
	e := emitter{ch}
	e.gauge(buildInfo, 1, c.cfg.Version)
	f := c.cfg.Diagnostics.Figures(ctx)
	devices(e, f.Devices)
	engine(e, f.Engine)
	if h := f.History; h != nil {
		history(e, h)
	}
	if s := f.Sandbox; s != nil {
		sandbox(e, s)
	}
	if a := f.Audit; a != nil {
		e.counter(auditEnqueued, float64(a.Enqueued))
		e.counter(auditCommitted, float64(a.Committed))
		e.counter(auditRefused, float64(a.Refused))
		e.counter(auditFailures, float64(a.CommitFailures))
		pending := float64(0)
		if a.Enqueued > a.Committed {
			pending = float64(a.Enqueued - a.Committed)
		}
		e.gauge(auditPending, pending)
	}
	if a := f.Alarms; a != nil {
		alarms(e, a)
	}
	if c.cfg.Flows != nil {
		flows(e, c.cfg.Flows(ctx))
	}
	if c.cfg.Health != nil {
		h := c.cfg.Health.Health(ctx)
		for _, st := range []string{gateway.HealthOK, gateway.HealthDegraded, gateway.HealthFailed} {
			e.gauge(healthStatus, b2f(h.Status == st), st)
		}
		e.gauge(healthReasons, float64(len(h.Reasons)))
		e.gauge(healthWarnings, float64(len(h.Warnings)))
		if m := h.MQTT; m != nil {
			mqttLink(e, m)
		}
	}
}

// The MQTT supervisor link (docs/mqtt.md), from health: present when the
// link is on.
var (
	mqttConnected = desc("qubiq_mqtt_connected", "1 while the supervisor link is connected to a broker.")
	mqttDepth     = desc("qubiq_mqtt_outbox_messages", "Messages waiting in the MQTT outbox for the broker's acknowledgement.")
	mqttBytes     = desc("qubiq_mqtt_outbox_bytes", "Bytes of the MQTT outbox (what mqtt.outbox.max_bytes bounds).")
	mqttOldest    = desc("qubiq_mqtt_outbox_oldest_age_seconds", "Age of the oldest message in the MQTT outbox; 0 when empty.")
	mqttDropped   = desc("qubiq_mqtt_outbox_dropped_total", "Messages dropped from the MQTT outbox, oldest first, to stay within max_bytes and max_age.")
	mqttCommands  = desc("qubiq_mqtt_commands_total", "Supervisor commands answered since start, by result.", "result")
)

func mqttLink(e emitter, m *gateway.MQTTHealth) {
	e.gauge(mqttConnected, b2f(m.Connected))
	e.gauge(mqttDepth, float64(m.OutboxDepth))
	e.gauge(mqttBytes, float64(m.OutboxBytes))
	age := 0.0
	if !m.OutboxOldest.IsZero() {
		age = time.Since(m.OutboxOldest).Seconds()
	}
	e.gauge(mqttOldest, age)
	e.counter(mqttDropped, float64(m.OutboxDropped))
	e.counter(mqttCommands, float64(m.Accepted), "accepted")
	e.counter(mqttCommands, float64(m.Refused), "refused")
}

// emitter sends const metrics; a desc whose labels do not match is a
// programming error the tests catch (MustNewConstMetric panics).
type emitter struct{ ch chan<- prometheus.Metric }

func (e emitter) gauge(d *prometheus.Desc, v float64, labels ...string) {
	e.ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

func (e emitter) counter(d *prometheus.Desc, v float64, labels ...string) {
	e.ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, labels, nil)
}

var (
	buildInfo      = desc("qubiq_build_info", "Always 1; the label version is the daemon's version.", "version")
	healthStatus   = desc("qubiq_health_status", "1 for the health status now (GET /api/v1/health), 0 for the others.", "status")
	healthReasons  = desc("qubiq_health_reasons", "Reasons the health is not ok, now.")
	healthWarnings = desc("qubiq_health_warnings", "Warnings in health now: configuration that is not acted on, limits turned off.")

	auditEnqueued  = desc("qubiq_audit_records_enqueued_total", "Audit records queued.")
	auditCommitted = desc("qubiq_audit_records_committed_total", "Audit records committed to the store.")
	auditRefused   = desc("qubiq_audit_records_refused_total", "Audit records refused because the queue was full (the action was refused with them).")
	auditFailures  = desc("qubiq_audit_commit_failures_total", "Failed audit commit attempts (each retried).")
	auditPending   = desc("qubiq_audit_pending_records", "Audit records queued and not yet committed.")
)

// Tag engine and history.
var (
	engTags      = desc("qubiq_tags", "Tags configured.")
	engChanges   = desc("qubiq_tag_changes_total", "Tag changes (value, quality or reason past the deadband) published to subscribers; rate() gives changes per second.")
	engScans     = desc("qubiq_scans_total", "Scans completed (one read of one device's scan class).")
	engOverruns  = desc("qubiq_scan_overruns_total", "Scans that took longer than their scan class's period.")
	engHistSkip  = desc("qubiq_history_feed_skipped_total", "Changes the history feed lost because it fell behind.")
	histQueue    = desc("qubiq_history_queue_samples", "History samples waiting to be committed.")
	histJournal  = desc("qubiq_history_journal_samples", "Committed history samples not yet folded into blocks.")
	histBytes    = desc("qubiq_history_bytes", "Bytes of history blocks (what history.retention.max_bytes bounds).")
	histOffered  = desc("qubiq_history_samples_offered_total", "History samples offered.")
	histDropped  = desc("qubiq_history_samples_dropped_total", "History samples dropped because the queue was full.")
	histRejected = desc("qubiq_history_samples_rejected_total", "History samples whose value cannot be stored.")
	histCommit   = desc("qubiq_history_samples_committed_total", "History samples committed.")
	histCommits  = desc("qubiq_history_commits_total", "History group commits.")
	histFails    = desc("qubiq_history_commit_failures_total", "Failed history commits.")
	histRetRuns  = desc("qubiq_history_retention_runs_total", "History retention runs.")
	histRetFails = desc("qubiq_history_retention_failures_total", "Failed history retention runs.")
)

func engine(e emitter, f gateway.EngineFigures) {
	e.gauge(engTags, float64(f.Tags))
	e.counter(engChanges, float64(f.Changes))
	e.counter(engScans, float64(f.Scans))
	e.counter(engOverruns, float64(f.Overruns))
	e.counter(engHistSkip, float64(f.HistorySkipped))
}

func history(e emitter, h *gateway.HistoryFigures) {
	e.gauge(histQueue, float64(h.Queue))
	e.gauge(histJournal, float64(h.Journal))
	e.gauge(histBytes, float64(h.Bytes))
	e.counter(histOffered, float64(h.Offered))
	e.counter(histDropped, float64(h.Dropped))
	e.counter(histRejected, float64(h.Rejected))
	e.counter(histCommit, float64(h.Committed))
	e.counter(histCommits, float64(h.Commits))
	e.counter(histFails, float64(h.CommitFailures))
	e.counter(histRetRuns, float64(h.RetentionRuns))
	e.counter(histRetFails, float64(h.RetentionFailures))
}

// Sandbox.
var (
	sbRuns     = desc("qubiq_sandbox_runs_total", "Script runs and flow node runs by result: ok, or the run error's kind (timeout, busy, script_error, permission_denied, memory_limit_exceeded, killed, invalid, runtime_missing).", "result")
	sbRestarts = desc("qubiq_sandbox_worker_restarts_total", "Python workers started again in a slot that had one (died, killed, recycled, new packages).")
	sbOOMs     = desc("qubiq_sandbox_oom_kills_total", "Runs killed by the worker memory limit.")
	sbSlots    = desc("qubiq_sandbox_workers", "Python worker slots (python.replicas).")
	sbLive     = desc("qubiq_sandbox_workers_live", "Python workers up and taking runs.")
	sbBusy     = desc("qubiq_sandbox_workers_busy", "Python workers running a script now.")
	sbQueue    = desc("qubiq_sandbox_queue_runs", "Runs waiting for a free worker.")
	sbMemory   = desc("qubiq_sandbox_worker_memory_bytes", "Resident memory of each live Python worker, by slot.", "slot")
)

func sandbox(e emitter, s *gateway.SandboxFigures) {
	for _, k := range sortedKeys(s.Runs) {
		e.counter(sbRuns, float64(s.Runs[k]), k)
	}
	e.counter(sbRestarts, float64(s.Restarts))
	e.counter(sbOOMs, float64(s.OOMs))
	e.gauge(sbSlots, float64(s.Workers))
	e.gauge(sbLive, float64(s.Live))
	e.gauge(sbBusy, float64(s.Busy))
	e.gauge(sbQueue, float64(s.Queued))
	for slot, b := range s.Memory {
		e.gauge(sbMemory, float64(b), strconv.Itoa(slot))
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
