package api

import (
	"net/http"

	at "qubiq.dev/edge/api/apitypes"
)

// openapiOps is the hand-kept part of the OpenAPI document (openapi.go):
// per route of the route table, keyed by its pattern, a summary and the
// wire types it takes and answers. What the route needs comes from the
// route table, never from here. Adding a route is one entry here;
// TestOpenAPI_EveryRouteDocumented names each route without one.
var openapiOps = map[string]opSpec{
	"GET /api/v1/mqtt": {summary: "The supervisor link: broker, connection, last error, outbox depth and age, drops, commands (docs/mqtt.md); 404 when the link is off",
		resp: at.MQTTHealth{}},
	"GET /api/v1/health": {summary: "Health of the appliance (status, reasons, sandbox, devices)",
		resp: struct {
			at.Health
			TLS      *at.TLSInfo        `json:"tls,omitempty"`
			Firmware *at.FirmwareStatus `json:"firmware,omitempty"`
		}{}},
	"GET /api/v1/openapi.json": {summary: "This document", resp: map[string]any{}},
	"GET /api/v1/metrics":      {summary: "Prometheus metrics, text exposition format (docs/metrics.md)", respMedia: "text/plain; version=0.0.4"},

	"GET /api/v1/tags":        {summary: "List the tags the grant may see", resp: []at.TagInfo{}},
	"POST /api/v1/tags/read":  {summary: "Read tags' values, qualities and timestamps", req: at.ReadRequest{}, resp: []at.TagValue{}},
	"POST /api/v1/tags/write": {summary: "Write tags (each tag's write level is checked); per-tag statuses", req: at.WriteRequest{}, resp: []at.WriteResult{}},

	"GET /api/v1/scripts":                             {summary: "List the stored script modules", resp: []at.ScriptInfo{}},
	"POST /api/v1/scripts/lint":                       {summary: "Lint Python code", req: at.LintRequest{}, resp: at.LintResult{}},
	"PUT /api/v1/scripts/{module}":                    {summary: "Save a script module (a new version)", req: at.ScriptSaveRequest{}, resp: at.ScriptSaved{}},
	"POST /api/v1/scripts/{module}/rollback":          {summary: "Roll a module back to its previous version", resp: at.ScriptSaved{}},
	"POST /api/v1/scripts/{module}/{entry}/run":       {summary: "Run a script entry", req: at.ScriptRunRequest{}, optionalBody: true, resp: at.ScriptRun{}},
	"GET /api/v1/scripts/{module}":                    {summary: "A module's latest code, entries and LiveView list", resp: at.ScriptCode{}},
	"GET /api/v1/scripts/{module}/versions":           {summary: "A module's versions", resp: []at.ScriptVersionInfo{}},
	"GET /api/v1/scripts/{module}/versions/{version}": {summary: "The code of one version", resp: at.ScriptCode{}},

	"GET /api/v1/devices":                                   {summary: "List the devices with their request statistics", resp: []at.DeviceInfo{}},
	"GET /api/v1/devices/{name}":                            {summary: "One device with its request statistics (docs/metrics.md)", resp: at.DeviceInfo{}},
	"GET /api/v1/devices/{name}/plan":                       {summary: "The requests one scan of a Modbus device sends", resp: []at.PlannedRequest{}},
	"GET /api/v1/devices/{name}/browse":                     {summary: "Browse an OPC UA server's address space", resp: []at.BrowseNode{}, query: []string{"node: the node to browse below"}},
	"GET /api/v1/devices/{name}/certs":                      {summary: "An OPC UA device's certificates (trusted, rejected)", resp: []at.DeviceCert{}},
	"POST /api/v1/devices/{name}/certs/{thumbprint}/trust":  {summary: "Trust a server certificate", resp: at.DeviceCert{}},
	"POST /api/v1/devices/{name}/certs/{thumbprint}/reject": {summary: "Reject a server certificate", resp: at.DeviceCert{}},

	"POST /api/v1/apikeys":        {summary: "Create an API key (never wider than the caller); the token is shown once", req: at.APIKeyRequest{}, resp: at.APIKeyCreated{}, status: http.StatusCreated},
	"GET /api/v1/apikeys":         {summary: "List the API keys (never their tokens)", resp: []at.APIKeyInfo{}},
	"DELETE /api/v1/apikeys/{id}": {summary: "Revoke an API key: 204; 200 with already true when it was revoked before (nothing changed)", resp: at.Done{}},
	"POST /api/v1/provision":      {summary: "Set the first admin password; revokes the bootstrap token", req: at.ProvisionRequest{}},

	"POST /api/v1/auth/login":                   {summary: "Log in (throttled per user and address); sets the session cookie", req: at.LoginRequest{}, resp: at.SessionInfo{}},
	"POST /api/v1/auth/logout":                  {summary: "End the session"},
	"GET /api/v1/auth/session":                  {summary: "The session's user, realm, level and CSRF token", resp: at.SessionInfo{}},
	"GET /api/v1/users":                         {summary: "List the users", resp: []at.UserInfo{}},
	"POST /api/v1/users":                        {summary: "Add a user", req: at.UserRequest{}, status: http.StatusCreated},
	"PUT /api/v1/users/{name}/password":         {summary: "Set a user's password (ends the user's sessions)", req: at.PasswordRequest{}},
	"POST /api/v1/users/{name}/disable":         {summary: "Disable a user, ending its sessions: 204; 200 with already true when it was disabled before", resp: at.Done{}},
	"GET /api/v1/ws":                            {summary: "WebSocket of live values and alarms (upgrade; messages: WSMessage)", status: http.StatusSwitchingProtocols},
	"GET /api/v1/liveview/views":                {summary: "The LiveView panels the session may open", resp: []at.View{}},
	"GET /api/v1/liveview/views/{panel}/events": {summary: "A panel's recent events", resp: []at.PanelEvent{}},

	"GET /api/v1/alarms":           {summary: "The current alarms", resp: at.AlarmList{}, query: []string{"state: states to list (comma-separated)", "priority: priorities to list (comma-separated)", "prefix: a source path prefix", "include_normal: true to list normal alarms too"}},
	"GET /api/v1/alarms/journal":   {summary: "The alarm journal", resp: at.AlarmJournal{}, query: []string{"path: an alarm's source", "priority: a priority", "state: a state", "from: RFC 3339", "to: RFC 3339", "limit: at most this many", "after: a sequence number (paging)", "order: asc or desc"}},
	"GET /api/v1/alarms/stats":     {summary: "Alarm rates over a window", resp: at.AlarmStats{}, query: []string{"window_h: the window in hours"}},
	"POST /api/v1/alarms/ack":      {summary: "Acknowledge alarms", req: at.AlarmAckRequest{}, resp: at.AlarmResults{}},
	"POST /api/v1/alarms/shelve":   {summary: "Shelve alarms", req: at.AlarmShelveRequest{}, resp: at.AlarmResults{}},
	"POST /api/v1/alarms/unshelve": {summary: "Unshelve alarms", req: at.AlarmUnshelveRequest{}, resp: at.AlarmResults{}},
	"POST /api/v1/alarms/note":     {summary: "Add a note to an alarm", req: at.AlarmNoteRequest{}, resp: at.OK{}},

	"GET /api/v1/audit": {summary: "The audit log in commit order", resp: []at.AuditRecord{},
		query: []string{"after: list records after this sequence number", "limit: at most this many (1 to 10000)",
			"result: only records with this result (ok, script_error, timeout, permission_denied, refused, unauthenticated, ...)",
			"principal: only this principal", "origin: only this origin (prefix up to ':')", "action: only this action (prefix up to '.')"}},
	"GET /api/v1/audit/search": {summary: "Search the audit log, newest first", resp: at.AuditPage{},
		query: []string{"principal: exact", "origin: prefix", "action: prefix", "result: exact", "since: RFC 3339", "until: RFC 3339",
			"before: a sequence number (paging)", "limit: at most this many"}},

	"POST /api/v1/db/named/{name}":    {summary: "Run a named query (read-only)", req: at.NamedQueryRequest{}, optionalBody: true, resp: at.NamedQueryResult{}},
	"GET /api/v1/history":             {summary: "Tag history, raw or aggregated", resp: []at.HistorySeries{}, query: []string{"path: a tag path (repeatable)", "start: RFC 3339", "end: RFC 3339", "interval_ms: the aggregation interval", "aggregate: raw, avg, min, max, ..."}},
	"GET /api/v1/vars/{key}":          {summary: "Read a var", resp: at.VarValue{}},
	"PUT /api/v1/vars/{key}":          {summary: "Set a var", req: at.VarPut{}, resp: at.VarValue{}},
	"DELETE /api/v1/vars/{key}":       {summary: "Delete a var"},
	"POST /api/v1/vars/{key}/incr":    {summary: "Increment a numeric var", req: at.VarIncr{}, optionalBody: true, resp: at.VarValue{}},
	"GET /api/v1/files/{path...}":     {summary: "Read a file", respMedia: "application/octet-stream"},
	"PUT /api/v1/files/{path...}":     {summary: "Save a file", reqMedia: "application/octet-stream", resp: at.FileSaved{}},
	"DELETE /api/v1/files/{path...}":  {summary: "Delete a file"},
	"POST /api/v1/messages/{handler}": {summary: "Send a message to its handler script", req: at.MessageRequest{}, optionalBody: true, resp: at.ScriptRun{}},

	"GET /api/v1/flows":                   {summary: "List the flows with their counters", resp: []at.FlowInfo{}},
	"GET /api/v1/flows/{name}":            {summary: "One flow's state and counters", resp: at.FlowInfo{}},
	"PUT /api/v1/flows/{name}":            {summary: "Save a flow (a new version)", req: at.FlowSaveRequest{}, resp: at.FlowSaved{}},
	"DELETE /api/v1/flows/{name}":         {summary: "Delete a flow", resp: at.FlowSaved{}},
	"POST /api/v1/flows/{name}/rollback":  {summary: "Roll a flow back to its previous version", resp: at.FlowSaved{}},
	"POST /api/v1/flows/{name}/reset":     {summary: "Reset a flow's failed nodes", resp: at.FlowInfo{}},
	"GET /api/v1/flows/{name}/versions":   {summary: "A flow's versions", resp: []at.FlowVersion{}},
	"GET /api/v1/flows/{name}/definition": {summary: "A flow version's definition (YAML)", respMedia: at.YAMLContentType},

	"POST /api/v1/project/import": {summary: "Import a project file (YAML) or a tag file (CSV)", reqMedia: at.YAMLContentType, resp: at.ProjectChanges{}, query: []string{"format: yaml or csv"}},
	"GET /api/v1/project/export":  {summary: "Export the project (YAML)", respMedia: at.YAMLContentType},
	"POST /api/v1/tags/import":    {summary: "Import a tag file (CSV or YAML)", reqMedia: "text/csv", resp: at.ProjectChanges{}, query: []string{"format: csv or yaml"}},
	"GET /api/v1/tags/export":     {summary: "Export the tags (CSV or YAML)", respMedia: "text/csv", query: []string{"format: csv or yaml"}},

	"GET /api/v1/sandbox/config":             {summary: "The script sandbox's configuration", resp: at.SandboxConfig{}},
	"GET /api/v1/sandbox/packages":           {summary: "The installed packages", resp: []at.SandboxPackage{}},
	"POST /api/v1/sandbox/packages":          {summary: "Install a package from the index (NDJSON progress events, PackageEvent)", req: at.PackageInstallRequest{}, respMedia: at.NDJSONContentType, respLine: at.PackageEvent{}},
	"POST /api/v1/sandbox/packages/upload":   {summary: "Install uploaded wheels (NDJSON progress events, PackageEvent)", reqMedia: "multipart/form-data", respMedia: at.NDJSONContentType, respLine: at.PackageEvent{}, query: []string{"filename: the wheel's name, for a body that is the wheel itself", "acknowledge_widening: true to install what widens the allow-list"}},
	"DELETE /api/v1/sandbox/packages/{name}": {summary: "Remove a package", resp: at.PackageChange{}},
	"GET /api/v1/sandbox/check":              {summary: "Check the package index", resp: at.IndexCheck{}},
}
