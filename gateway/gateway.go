package gateway

// Gateway is every operation of the service layer: what the daemon passes
// to each front door, which keeps the groups it uses.
type Gateway interface {
	Tags
	Scripts
	Data
	Credentials
	Sessions
	Users
	Audit
	Devices
	Project
	Packages
	Health
	ScriptCodes   // the console: stored source by version (console.go)
	AuditSearcher // the console: audit search (console.go)
	Alarms
}
