package apitypes

import "time"

// The wire types of the routes the engineer's console added (the route
// table's console rows; docs/console.md).

// ScriptCode is the answer of GET /api/v1/scripts/{module} (the latest
// version, with its entries and the entries a LiveView button may start)
// and of GET /api/v1/scripts/{module}/versions/{version} (that version,
// without entries): the version number, when it was saved (UTC) and the
// module's Python source.
type ScriptCode struct {
	Module   string        `json:"module"`
	Version  int64         `json:"version"`
	Saved    time.Time     `json:"saved"`
	Code     string        `json:"code"`
	Entries  []ScriptEntry `json:"entries,omitempty"`
	LiveView []string      `json:"liveview,omitempty"`
}

// ScriptVersionInfo is one element of GET
// /api/v1/scripts/{module}/versions (oldest first): a stored version and
// when it was saved (UTC). Latest marks the version that runs.
type ScriptVersionInfo struct {
	Version int64     `json:"version"`
	Saved   time.Time `json:"saved"`
	Latest  bool      `json:"latest"`
}

// AuditPage is the answer of GET /api/v1/audit/search: the matching
// records, newest first, and the cursor of the next (older) page: pass it
// as ?before= (null when this page is the last).
type AuditPage struct {
	Records    []AuditRecord `json:"records"`
	NextBefore *uint64       `json:"next_before"`
}
