// Package mqtt is the supervisor link of QUBIQ Edge (docs/mqtt.md): one
// well-behaved MQTT 3.1.1 client (github.com/eclipse/paho.mqtt.golang) of
// the site's broker, under the topics qubiq/v1/<appliance_id>/.
//
// It is a front door like the REST API: a signed supervisor command
// (cmd/scripts/push, cmd/scripts/run, cmd/scripts/rollback, cmd/tags/write)
// is decoded and verified here (command.go: ed25519 over the exact bytes,
// the key id selecting the grant of mqtt.grants, the stale window, the
// replay memory), then becomes one call of the service layer (package
// gateway) under that grant, and the answer goes back on reply/<id>
// (exec.go). Scope and write-level checks, the lint of a push and the
// script history live below, in the service layer, once for every front
// door.
//
// Outgoing messages (replies, the status birth, tag values, alarm
// transitions, flows' mqtt_publish) are store-and-forward: they are
// queued in an Outbox the daemon passes (the bbolt outbox of package
// store), published at QoS 1 in order, and leave it only when the broker
// acknowledged them (forward.go). The connection loop (link.go) keeps one
// paho client per connection so a token that completed is evidence of a
// PUBACK on that connection, never of a message parked across a reconnect
// (https://github.com/eclipse-paho/paho.mqtt.golang/issues/563). The
// link dials the broker itself and gives paho a connection that coalesces
// writes without delaying any (wire.go); QoS 0 tag values are written
// straight to it, their payloads appended by hand (payload.go), and kept
// until a PINGRESP shows the broker read them, else queued in the outbox
// when the connection ends (qos0.go).
//
// mqtt imports gateway, auth, value, tagpath, the standard library and
// paho; never api, device, daemon or gateway/service (deps_test.go).
package mqtt
