package gateway

import (
	"context"
	"encoding/json"
	"time"

	"qubiq.dev/edge/auth"
)

// Audit is the audit log: one record per write that reaches equipment, per
// script run, per refusal and per administrative change (the service layer
// writes those of its own operations). A front door adds the records of
// what it decides itself: a refusal of its route table, a panel press, an
// MQTT command.
type Audit interface {
	// CanAudit reports (nil) whether a record can be queued now; an
	// action that must not happen unaudited is refused otherwise (the
	// error wraps ErrUnavailable).
	CanAudit() error
	// Audit queues one record of ev by g: g's principal, realm and origin
	// (a script origin "script:m.e" also fills the record's script). It
	// fails when the record cannot be queued, or ev.After does not encode
	// as JSON.
	Audit(ctx context.Context, g auth.Grant, ev AuditEvent) error
	// AuditRefusal records that target (a route "POST /api/v1/tags/write",
	// a command topic) was refused to g for reason (an *auth.DeniedError
	// naming the missing scope or permission). It never blocks; a record
	// that cannot be queued is logged as lost.
	AuditRefusal(ctx context.Context, g auth.Grant, target string, reason error)
	// AuditCredentialRefusal records that a request from source (a client
	// address) to target was refused for its credentials, reason one of
	// CredentialMissing, CredentialUnknown, CredentialRevoked,
	// CredentialExpired. Refusals are aggregated per source and reason
	// over a short window (one record at the first, then one with the
	// count of the others), so a flood cannot fill the log (IEC 62443-4-2
	// CR 2.8: failed access is logged). It never blocks.
	AuditCredentialRefusal(ctx context.Context, source, target, reason string)
	// AuditRecords lists records in commit order: those after sequence
	// number after that q matches (AuditQuery.Matches; q's Before and
	// Limit are not used), at most limit (capped by the store).
	AuditRecords(ctx context.Context, after uint64, limit int, q AuditQuery) ([]AuditRecord, error)
	// AuditTrail returns up to limit of the newest records whose origin is
	// origin ("liveview:panel1"), newest first, including those still
	// queued.
	AuditTrail(ctx context.Context, origin string, limit int) ([]AuditRecord, error)
}

// AuditEvent is a record a front door adds: what (Action, e.g.
// "liveview.press", "mqtt.command"; Target, the entry or topic), the
// result ("ok", or a failure's kind) with its detail, and After: any
// value, recorded as JSON (the arguments, the grant used, the duration).
type AuditEvent struct {
	Action string
	Target string
	Result string
	Detail string
	After  any
}

// AuditRecord is one record of the audit log: its sequence number (commit
// order), time, who (principal, realm, origin, script), what (action,
// target), the value before and after as JSON, the result and its detail.
type AuditRecord struct {
	Seq       uint64
	Time      time.Time
	Principal string
	Realm     string
	Origin    string
	Script    string
	Action    string
	Target    string
	Before    json.RawMessage
	After     json.RawMessage
	Result    string
	Detail    string
}
