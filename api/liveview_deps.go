package api

import (
	"context"
	"slices"

	"qubiq.dev/edge/api/apitypes"
	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/gateway"
)

// Panels are the LiveView front door's own parts of the project: the views
// (parsed and checked by api/liveview from the project's views:), the
// entries each script module lets a panel button start (its liveview
// list), and whether QUBIQ_BROWSER_SCRIPT_SCOPES=off is in force (scripts
// started from a panel then run unrestricted, each such run audited as
// widened).
type Panels struct {
	Views       []apitypes.View
	Entries     map[string][]string
	EscapeHatch bool
}

// LiveView is the project's panels as the routes see them, and their audit
// trail.
type LiveView interface {
	// Views returns the project's views.
	Views(ctx context.Context) []apitypes.View
	// Exposed reports whether the script module lists entry in its
	// `liveview` list (checked again at every press, beside the view).
	Exposed(module, entry string) bool
	// EscapeHatch reports whether the escape hatch is in force.
	EscapeHatch() bool
	// CanAudit reports (nil) whether an audit record can be queued now; a
	// press is refused when it cannot (fail closed).
	CanAudit() error
	// Audit queues one record of a panel action by g.
	Audit(ctx context.Context, g auth.Grant, ev gateway.AuditEvent) error
	// PanelEvents returns up to limit recent audit records whose origin is
	// the panel ("liveview:<panel>"), newest first.
	PanelEvents(ctx context.Context, panel string, limit int) ([]gateway.AuditRecord, error)
}

// NewLiveView returns the LiveView of panels, auditing through audit (the
// service layer's audit log).
func NewLiveView(panels Panels, audit PanelAudit) LiveView { return liveView{panels, audit} }

type liveView struct {
	p     Panels
	audit PanelAudit
}

func (l liveView) Views(context.Context) []apitypes.View { return l.p.Views }

func (l liveView) Exposed(module, entry string) bool {
	return slices.Contains(l.p.Entries[module], entry)
}

func (l liveView) EscapeHatch() bool { return l.p.EscapeHatch }

func (l liveView) CanAudit() error { return l.audit.CanAudit() }

func (l liveView) Audit(ctx context.Context, g auth.Grant, ev gateway.AuditEvent) error {
	return l.audit.Audit(ctx, g, ev)
}

func (l liveView) PanelEvents(ctx context.Context, panel string, limit int) ([]gateway.AuditRecord, error) {
	return l.audit.AuditTrail(ctx, "liveview:"+panel, limit)
}
