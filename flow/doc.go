// Package flow runs the flows of QUBIQ Edge (docs/flows.md): a trigger (a
// tag change, a timer, a message, an MQTT topic, an alarm transition), a
// bounded queue, and a small graph of nodes — Python transforms (def
// transform(msg)) run in the sandbox's workers under the flow's grant,
// filters, tag writes, MQTT publishes, logs, messages to other flows — with
// an error policy per node (drop, route, fail).
//
// It is a front door on the service layer, like the REST API: it calls
// gateway (Nodes for the Python nodes, Tags.WriteTags for tag writes,
// Audit, Data.SendMessage) and imports auth, value, tagpath and the
// standard library besides, never gateway/service, api, device or daemon
// (deps_test.go). What it needs of the parts beside it it takes as small
// interfaces of its own (links.go): the store of its versions (Store), the
// supervisor link (TopicSource, Publisher) and alarm transitions
// (AlarmSource), which the daemon passes in.
//
// # The rules it holds
//
//   - The tag engine never waits for a flow: every trigger offers its
//     messages to the flow's queue without blocking, and what does not fit
//     is dropped and counted (FlowCounters.Dropped), never lost quietly.
//   - A flow's messages run one batch at a time, in the order the trigger
//     made them; each node sees them in that order (process.go).
//   - A flow runs with the grant a designer configured, never wider than
//     the designer's own (auth.Grant.Covers), and a message cannot make a
//     flow do what its sender may not.
//   - A node that fails applies its policy with an error that says which
//     failure it was: timeout, exception, bad_return, write_failed, ...
//   - A new version takes over the queued messages of the one it replaces.
//
// Config (the flows: section) is config.go, config_nodes.go and
// config_yaml.go; the cron expressions of timer
// triggers cron.go; the engine and its versions engine.go, admin.go; the
// runtime state.go, process.go, triggers.go; the queue queue.go.
package flow
