package apitypes

// ProjectChanges is the answer of POST /api/v1/project/import and POST
// /api/v1/tags/import: what the import changed against the running
// project, by device name and tag path (each list sorted, never null).
// RestartRequired names the other sections that changed and take effect
// only at the next start of qubiqd ("scripts", "views", "users",
// "connections", "message_handlers", "flows"); devices, tags (with their
// history policies) and named_queries are applied at once.
type ProjectChanges struct {
	Devices         ChangeSet `json:"devices"`
	Tags            ChangeSet `json:"tags"`
	RestartRequired []string  `json:"restart_required"`
}

// ChangeSet lists names added, changed (any key) and removed.
type ChangeSet struct {
	Added   []string `json:"added"`
	Changed []string `json:"changed"`
	Removed []string `json:"removed"`
}

// ProjectProblem is one problem of a refused import: the line in the
// document sent (0 when it has none: a problem of the whole document) and
// the message, which names the tag or device and what is wrong.
type ProjectProblem struct {
	Line    int    `json:"line,omitempty"`
	Message string `json:"message"`
}

// InvalidProjectProblem is the 400 answer (kind "invalid") to an import
// that was refused: every problem found, in the order found; nothing was
// applied. Detail holds the same messages, one per line.
type InvalidProjectProblem struct {
	Problem
	Errors []ProjectProblem `json:"errors"`
}

// BrowseNode is one child node of GET /api/v1/devices/{name}/browse
// (OPC UA Part 4 §5.8.2): its node id (nsu= form, usable as a tag
// address), browse name, node class ("Object", "Variable", "Method", ...),
// for variables the data type ("Double", or a node id) and whether the
// node's AccessLevel and UserAccessLevel allow writing.
type BrowseNode struct {
	NodeID     string `json:"node_id"`
	BrowseName string `json:"browse_name"`
	NodeClass  string `json:"node_class"`
	DataType   string `json:"data_type,omitempty"`
	Writable   bool   `json:"writable"`
}

// Media types of the project and tag documents (GET /project/export, GET
// and POST /tags/export|import).
const (
	YAMLContentType = "application/yaml"
	CSVContentType  = "text/csv; charset=utf-8"
)
