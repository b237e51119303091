// Package service is the service layer of QUBIQ Edge: the one
// implementation of gateway.Gateway, what every front door may ask of the
// appliance under a grant. It owns the behaviour the front doors share,
// each rule once:
//
//   - the script store and runs: versions (numbered pushes, rollback), the
//     nested-run rule (a script called by a script never gets more than
//     its caller: the intersection of the grants) and the call depth
//     (scripts.go, nested.go);
//   - the system.* method implementations behind the sandbox's dispatcher,
//     one per row of sandbox.Methods (methods.go);
//   - the data services (vars, files, SQL, history, messages) with their
//     audit (data.go, dataops.go);
//   - the tag engine under a grant, and project import, export and apply
//     without a restart (tags.go, project.go, check.go);
//   - alarms under a grant (alarms.go, methods_alarm.go): package alarm's
//     engine, fed by its own tag subscription (started before the scans),
//     its operations audited, its definitions following project imports;
//   - API keys, sessions, users and provisioning (access.go); health; the
//     sandbox's package administration; the OPC UA certificate stores
//     through CertStores; the audit log (audit.go).
//
// # Who imports it
//
// Only the daemon imports service: it builds one (New), starts its Steps in
// order among the other parts, and passes it to each front door as a
// gateway.Gateway. Front doors import gateway, never this package.
// service imports the tag engine, the store, the sandbox and config; it
// does not import a front door (api, mqtt, flow), a concrete driver or the
// daemon (deps_test.go). What it needs of a driver package beyond
// device.Driver it takes as an interface it defines (AddressBook,
// CertStores), which the daemon fills from opcuastore.
package service
