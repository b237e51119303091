package apitypes

import (
	"encoding/json"
	"time"
)

// Flows (docs/flows.md, "REST and qubiqctl"): GET /api/v1/flows lists
// FlowInfo; PUT /api/v1/flows/{name} takes a FlowSaveRequest and answers
// FlowSaved, as do POST /api/v1/flows/{name}/rollback and DELETE
// /api/v1/flows/{name}; POST /api/v1/flows/{name}/reset answers the
// FlowInfo after the reset; GET /api/v1/flows/{name}/versions lists
// FlowVersion.

// FlowInfo is one flow's state and counters. State is "running",
// "failed" (a node with on_error: fail failed: Reason names it, reset
// runs it again) or "stopped" (it could not start: Reason says why).
// Queue is the messages waiting, QueueSize the queue's size.
type FlowInfo struct {
	Name        string       `json:"name"`
	Description string       `json:"description,omitempty"`
	Version     int64        `json:"version"`
	State       string       `json:"state"`
	Reason      string       `json:"reason,omitempty"`
	Trigger     string       `json:"trigger"`
	Queue       int          `json:"queue"`
	QueueSize   int          `json:"queue_size"`
	Counters    FlowCounters `json:"counters"`
	LastError   *FlowError   `json:"last_error"`
	Nodes       []FlowNode   `json:"nodes"`
}

// FlowCounters count a flow's messages since the daemon started: in
// (offered by the trigger) = processed + dropped + queue once nothing is
// in flight; out (reached an end), filtered, errors (node failures), of
// which timeouts.
type FlowCounters struct {
	In        uint64 `json:"in"`
	Processed uint64 `json:"processed"`
	Out       uint64 `json:"out"`
	Filtered  uint64 `json:"filtered"`
	Errors    uint64 `json:"errors"`
	Dropped   uint64 `json:"dropped"`
	Timeouts  uint64 `json:"timeouts"`
}

// FlowError is one node failure: when, the node, its kind ("timeout",
// "exception", "bad_return", "write_failed", ...), the message and the
// script line (0 when unknown).
type FlowError struct {
	Time    time.Time `json:"time"`
	Node    string    `json:"node"`
	Kind    string    `json:"kind"`
	Message string    `json:"message"`
	Line    int       `json:"line,omitempty"`
}

// FlowNode is one node's state ("ok" or "failed") and counters.
type FlowNode struct {
	ID        string     `json:"id"`
	Type      string     `json:"type"`
	State     string     `json:"state"`
	Runs      uint64     `json:"runs"`
	Errors    uint64     `json:"errors"`
	Timeouts  uint64     `json:"timeouts"`
	LastError *FlowError `json:"last_error,omitempty"`
}

// FlowSaveRequest is the body of PUT /api/v1/flows/{name}: the flow's
// definition, as a JSON object of the shape of one entry of the project's
// flows: section or as its YAML text, and optionally the version to give
// it (above the flow's latest; absent: the next one).
type FlowSaveRequest struct {
	Definition json.RawMessage `json:"definition"`
	Version    int64           `json:"version,omitempty"`
}

// FlowSaved is the version running after a save, a rollback or a deletion
// (0), and what became of the queued messages of the version replaced:
// carried over, or dropped (a smaller queue).
type FlowSaved struct {
	Name    string `json:"name"`
	Version int64  `json:"version"`
	Carried int    `json:"carried"`
	Dropped uint64 `json:"dropped"`
}

// FlowVersion is one stored version of a flow.
type FlowVersion struct {
	Version   int64     `json:"version"`
	Saved     time.Time `json:"saved"`
	Principal string    `json:"principal,omitempty"`
}

// FlowHealth is one flow's state in GET /api/v1/health ("flows").
type FlowHealth struct {
	State  string `json:"state"`
	Reason string `json:"reason,omitempty"`
}
