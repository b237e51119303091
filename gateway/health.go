package gateway

import (
	"context"
	"encoding/json"
	"time"
)

// Health reports the appliance's health.
type Health interface {
	// Health returns the health now: "degraded" with the reasons when a
	// device is not connected, the Python runtime is missing, the audit
	// log cannot commit, or history lost samples.
	Health(ctx context.Context) HealthReport
}

// Health statuses of HealthReport.Status.
const (
	HealthOK       = "ok"
	HealthDegraded = "degraded"
	HealthFailed   = "failed"
)

// HealthReport is the appliance's health: its status and the reasons it is
// not ok, the daemon's version and uptime, the sandbox, each device's
// connection state and each flow's state (a flow failed or stopped makes
// it degraded).
type HealthReport struct {
	Status  string
	Reasons []string

	// Warnings say what the configuration asks for that the daemon does
	// not do, or a safety turned off (a worker limit at unlimited, the
	// LiveView escape hatch): they do not make the status degraded, and
	// are never silent (docs/config.md, "Warnings").
	Warnings []string

	Version string
	Uptime  time.Duration
	Sandbox SandboxHealth
	Devices map[string]DeviceHealth
	Flows   map[string]FlowHealth
	// MQTT is the supervisor link's state; nil when the link is off.
	MQTT *MQTTHealth
}

// MQTTHealth is the supervisor link (docs/mqtt.md): whether it is
// connected, to which broker since when (UTC), the last connection error
// and when, the outbox (messages and bytes waiting, the oldest one's queue
// time, zero when empty, and the messages dropped, oldest first, to stay in
// its bounds), whether commands must be signed, and the commands accepted
// and refused since start. A link that is down degrades health.
type MQTTHealth struct {
	Connected     bool
	Broker        string
	Since         time.Time
	LastError     string
	LastErrorAt   time.Time
	OutboxDepth   int
	OutboxBytes   int64
	OutboxOldest  time.Time
	OutboxDropped uint64
	RequireSigned bool
	Accepted      uint64
	Refused       uint64
}

// MQTTHealthSource is the supervisor link's side of health: the daemon
// hands it to the service layer when the link is on.
type MQTTHealthSource interface {
	MQTTHealth() MQTTHealth
}

// SandboxHealth is the script sandbox's state: the isolation mode
// ("cgroup2", "cgroup1", "rlimit", "none"), its limits and hardening as
// JSON objects whose keys the sandbox defines (memory_max, pids_max,
// cpu_max; no_new_privs, netns, landlock), the Python runtime and the
// linter ("ruff", "syntax-only").
type SandboxHealth struct {
	Mode      string
	Limits    json.RawMessage
	Hardening json.RawMessage
	Python    PythonHealth
	Linter    string
}

// PythonHealth is the Python runtime's state ("ok", "missing", "failed"),
// version and interpreter path.
type PythonHealth struct {
	Status  string
	Version string
	Path    string
}

// DeviceHealth is one device's connection state and why, when it is not
// connected.
type DeviceHealth struct {
	State  string
	Reason string
}
