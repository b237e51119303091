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
