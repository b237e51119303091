package gateway

import (
	"context"
	"encoding/json"
	"time"

	"qubiq.dev/edge/auth"
)

// Flows (docs/flows.md): a trigger, a small graph of nodes (Python
// transforms, filters, tag writes, MQTT publishes, logs), error policies.
// The flow engine (package flow) is a front door on the service layer: it
// runs its Python nodes through Nodes, writes tags through Tags.WriteTags,
// audits through Audit, receives messages through MessageRouting, and
// shows its state through FlowHealthSource; the REST API reaches it
// through Flows.

// Nodes runs the Python nodes of flows in the sandbox's workers. The
// service implements it.
type Nodes interface {
	// PrepareNode checks the code of a Python node as SaveScript checks
	// a module (syntax, the guardrail's names and imports) and that it
	// defines transform(msg) at top level, and registers it to run as
	// the module the answer names (its Ref; "flow.<flow>.<node>.<version>",
	// a name no script module can have). Code that fails the check is a
	// *ScriptError of kind invalid naming the flow, its version and the
	// node as the user wrote them, the first problem and its line and
	// column counted in the node's code: (line 1 is the block's first
	// line), never the internal module; nothing is registered.
	PrepareNode(ctx context.Context, c NodeCode) (NodePrepared, error)
	// ReleaseNode forgets a prepared node (its flow version was replaced
	// or deleted). An unknown ref is ignored.
	ReleaseNode(ref string)
	// RunNode runs the entry once per message, in order, on one worker,
	// under g (whose Origin names the flow), each message with r.Timeout
	// (0: python.node_timeout). It returns one NodeResult per message
	// that ran; fewer results than messages mean the run stopped at the
	// last one's message (its Err says why: a timeout, the worker died)
	// and the rest were not started. An error means no message ran: the
	// node is unknown, the runtime is missing, the workers are busy, or
	// the module failed to load (a *ScriptError). Node runs count
	// against python.flow_workers and wait in the sandbox's fair queue
	// under g's principal. They are not audited one by one; what they
	// change is.
	RunNode(ctx context.Context, g auth.Grant, r NodeRun) ([]NodeResult, error)
}

// NodeCode is the code of one Python node: its flow, its id in the flow,
// a version the caller makes unique for each preparation (the module's
// name holds it, and the workers cache compiled code by it) and the code.
type NodeCode struct {
	Flow    string
	Node    string
	Version int64
	// FlowVersion is the flow's stored version the node belongs to (the
	// one `flows versions` lists), named in a refusal; 0 when not known.
	FlowVersion int64
	Code        string
}

// NodePrepared is a prepared node: the module to run (Ref, with entry
// "transform") and the checker's diagnostics (warnings; errors refuse).
type NodePrepared struct {
	Ref         string
	Diagnostics []Diagnostic
}

// NodeRun is one call of a node: the module and entry (a prepared node's
// Ref and "transform", or a stored script's module and entry), the
// messages (JSON objects, at most MaxNodeBatch) and the timeout of each.
type NodeRun struct {
	Module  string
	Entry   string
	Msgs    []json.RawMessage
	Timeout time.Duration
}

// MaxNodeBatch is the most messages one RunNode call takes.
const MaxNodeBatch = 256

// NodeResult is the outcome of one message of RunNode: the entry's return
// value as JSON, or Err (a *ScriptError of kind timeout, script_error with
// the exception, permission_denied, memory_limit_exceeded, killed, or
// bad_result for a return value that is not JSON) with the script line
// when known, the lines it logged and how long it took.
type NodeResult struct {
	Value    json.RawMessage
	Err      *ScriptError
	Line     int
	Logs     []LogLine
	Duration time.Duration
}

// KindBadResult is the kind of a node result whose return value is not
// JSON at all.
const KindBadResult = "bad_result"

// MessageSink receives the messages sent (system.message.send, POST
// /api/v1/messages/{handler}, an MQTT command) to a name that is not one of
// the project's message handlers: the flow engine's message triggers.
type MessageSink interface {
	// MessageHandlers lists the names it receives, sorted.
	MessageHandlers() []string
	// DeliverMessage queues payload (any JSON) sent by g for handler.
	// handled is false when handler is not one of its names. The answer
	// says what happened ({"flow": ..., "queued": true}); a sender whose
	// grant does not cover the receiving flow's is refused with an
	// *auth.DeniedError of kind "wider" (auth.Grant.Covers: a message
	// cannot make a flow do what its sender may not).
	DeliverMessage(ctx context.Context, g auth.Grant, handler string, payload json.RawMessage) (run ScriptRun, handled bool, err error)
}

// FlowHealthSource gives health the state of every flow: the flow engine
// implements it, the service's Health includes it (a failed or stopped
// flow makes health degraded).
type FlowHealthSource interface {
	FlowHealth() map[string]FlowHealth
}

// FlowHealth is one flow's state in health: "running", "failed" (a node
// with on_error: fail failed; it stays failed until reset), or "stopped"
// (it could not start), and why when not running.
type FlowHealth struct {
	State  string
	Reason string
}

// Flow states (FlowStatus.State, FlowHealth.State).
const (
	FlowRunning = "running"
	FlowFailed  = "failed"
	FlowStopped = "stopped"
)

// Flows is the flow engine as the front doors see it (GET /api/v1/flows
// and the /flows routes, qubiqctl flows). The flow engine implements it.
// Saves, rollbacks, deletions and resets are audited.
type Flows interface {
	// ListFlows returns every flow's status, sorted by name.
	ListFlows(ctx context.Context, g auth.Grant) ([]FlowStatus, error)
	// Flow returns one flow's status; an unknown name wraps ErrNotFound.
	Flow(ctx context.Context, g auth.Grant, name string) (FlowStatus, error)
	// SaveFlow checks src (one flow, the shape of an entry of the
	// project's flows: section, YAML or JSON) and stores it as the next
	// version of src.Name (or as src.Version, which must be above the
	// flow's latest: else ErrConflict), which replaces the running one:
	// the new version takes over the old one's queued messages (those
	// beyond its queue's size are dropped, counted and reported). The
	// flow's grant must be covered by g (auth.Grant.Covers). Bad input
	// is a *ProjectError with every problem and its line.
	SaveFlow(ctx context.Context, g auth.Grant, src FlowSource) (FlowSaved, error)
	// RollbackFlow withdraws the latest version of name; the one before
	// runs again (taking over the queued messages as SaveFlow does). A
	// flow with one version wraps ErrConflict, an unknown one ErrNotFound.
	RollbackFlow(ctx context.Context, g auth.Grant, name string) (FlowSaved, error)
	// FlowVersions lists the stored versions of name, oldest first.
	FlowVersions(ctx context.Context, g auth.Grant, name string) ([]FlowVersion, error)
	// FlowDefinition returns the stored definition of version (0: the
	// latest) of name, as saved.
	FlowDefinition(ctx context.Context, g auth.Grant, name string, version int64) ([]byte, error)
	// DeleteFlow stops name and removes its versions; its queued messages
	// are dropped (counted in the answer).
	DeleteFlow(ctx context.Context, g auth.Grant, name string) (FlowSaved, error)
	// ResetFlow clears the failed nodes of name (on_error: fail) so they
	// run again, and restarts a stopped flow; it answers the new status.
	ResetFlow(ctx context.Context, g auth.Grant, name string) (FlowStatus, error)
}

// FlowSource is one flow to save: its name, its definition (YAML or
// JSON) and the version the caller gives it (0: the next one).
type FlowSource struct {
	Name    string
	Doc     []byte
	Version int64
}

// FlowSaved is a flow's version now running (0 after a deletion), and what
// happened to the queued messages of the version it replaced: Carried
// taken over, Dropped lost (the new queue is smaller; counted in the
// flow's dropped counter too).
type FlowSaved struct {
	Name    string
	Version int64
	Carried int
	Dropped uint64
}

// FlowVersion is one stored version of a flow: its number, when and by
// whom it was saved.
type FlowVersion struct {
	Version   int64
	Saved     time.Time
	Principal string
}

// FlowStatus is one flow's state and counters (GET /api/v1/flows). The
// counters are totals since the daemon started, across versions; they are
// monotonic, so they export as Prometheus counters as they are
// (qubiq_flow_messages_in_total{flow="..."} and so on; docs/flows.md,
// "Metrics").
type FlowStatus struct {
	Name        string
	Description string
	Version     int64
	State       string // FlowRunning, FlowFailed, FlowStopped
	Reason      string // why it is not running
	Trigger     string // the trigger in words: "tag Line1/Speed", "timer every 5s"
	Queue       int    // messages waiting
	QueueSize   int    // the queue's size
	Counters    FlowCounters
	LastError   *FlowError
	Nodes       []NodeStatus
}

// FlowCounters count a flow's messages. In: every message the trigger
// offered; Dropped: those lost before they were processed (the queue was
// full, the flow had failed, the tag engine's feed overflowed, a new
// version could not take them); Processed: those taken from the queue and
// run through the graph; so In = Processed + Dropped + Queue once nothing
// is in flight. Out: messages that reached an end; Filtered: messages a
// filter or a Python node (returning None) stopped; Errors: node failures
// (every policy), of which Timeouts timed out.
type FlowCounters struct {
	In        uint64
	Processed uint64
	Out       uint64
	Filtered  uint64
	Errors    uint64
	Dropped   uint64
	Timeouts  uint64
}

// FlowError is one node failure: when, which node, its kind ("timeout",
// "exception", "bad_return", "write_refused", "publish_failed", "busy",
// ...), the message (the exception text, what was returned) and the
// script line when known.
type FlowError struct {
	Time    time.Time
	Node    string
	Kind    string
	Message string
	Line    int
}

// NodeStatus is one node's state ("ok" or "failed") and counters.
type NodeStatus struct {
	ID        string
	Type      string
	State     string
	Runs      uint64
	Errors    uint64
	Timeouts  uint64
	LastError *FlowError
}
