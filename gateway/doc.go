// Package gateway is the vocabulary of the QUBIQ Edge service layer: what
// every front door (the REST API and LiveView, and later the MQTT
// supervisor link, flows and the engineer's console) may ask of the
// appliance, under an auth.Grant. It holds the operations, grouped by
// concern as small interfaces (Tags, Scripts, Data, Credentials, Sessions,
// Users, Audit, Devices, Project, Packages, Health, Alarms; Gateway is
// all of them), their request and result types, and the error kinds the
// operations return (errors.go). It holds no behaviour.
//
// A front door does three things: authenticate and build the grant,
// translate its wire format into one call of these interfaces, translate
// the answer back. Everything the front doors share (the nested-run rule,
// the audit of every change and refusal, the write path's level checks,
// project import) happens once, below them, in the implementation,
// gateway/service.
//
// # Who imports it
//
// Every front door imports gateway, and only gateway, to reach the
// appliance; none imports gateway/service, which only the daemon builds
// and passes to each front door. gateway imports auth, value and the
// standard library only (deps_test.go), so a front door that imports it
// links neither the tag engine, the store, the sandbox nor a driver.
//
// # For an MQTT front door
//
// A signed supervisor command becomes, with the grant of the command's key
// (mqtt.grants):
//
//	cmd/scripts/push      Scripts.SaveScript(ctx, g, ScriptSource{Module, Code, Version})
//	cmd/scripts/run       ParseEntry(body.entry), then Scripts.RunScript(ctx, g, module, entry, args)
//	cmd/scripts/rollback  Scripts.RollbackScript(ctx, g, module)
//	cmd/tags/write        Tags.WriteTags(ctx, g, writes)
//	every command         Audit.Audit(ctx, g, AuditEvent{Action: "mqtt.command", ...})
//	status                Health.Health(ctx)
//	alarms/<path>         Alarms.SubscribeAlarms(g, buf): one AlarmEvent per
//	                      transition, published through the outbox
//
// and the reply's error kind is Kind(err). A flow trigger on alarm
// transitions takes the same subscription (its own, with the flow's grant).
package gateway
