// Package alarm is alarm management for QUBIQ Edge after ANSI/ISA-18.2-2016
// and IEC 62682:2014: alarm definitions (the project's alarms: section,
// Parse), the alarm state model (normal; active unacknowledged; active
// acknowledged; returned to normal unacknowledged; with shelving, timed or
// one-shot and never forever, suppression by design through a condition
// tag, and out of service beside it), active and clear delays, a deadband
// applied on clearing, latching, chattering detection, the journal of
// every transition and each alarm's persisted state (through Journal,
// which store.DB implements in store/alarm.go), the EEMUA 191 alarm-rate
// figures (Stats) and the figures for Prometheus (Metrics), and a stream
// of transitions (Subscribe) for the WebSocket, the MQTT link and flows.
// docs/alarms.md is the user's reference.
//
// # How it is fed
//
// The alarms consume the tag engine's changes through a subscription of
// their own, like history; they never poll. The subscription is taken
// before the scans start, so the first fresh value of every tag is seen.
// Why nothing is lost silently: see Engine's loop. In short, a large
// dedicated queue that the tag engine never blocks on, an overflow counted
// by the tag engine and noticed after every evaluation pass, and then a
// re-evaluation of every alarm from the tags' current values, counted,
// logged and shown in health.
//
// # Time
//
// The state machine reads no clock: every step takes the engine's time
// (Options.Now, time.Now by default), so delays, shelve expiries and
// chattering windows are exact in tests that inject a clock; a delayed
// transition is stamped with the instant its delay elapsed, not with the
// instant it was noticed.
//
// # Dependencies
//
// alarm imports auth (grants and levels: the operations check an alarm's
// ack_level and shelve_level with auth.Grant.AllowsLevel, the order tag
// writes use), value, store (the journal's entry and query types; the
// journal itself is the Journal interface defined here) and
// gopkg.in/yaml.v3. It defines its own Source for the tag
// engine: importing tagengine would link package device, which alarm must
// not import, and neither api, mqtt, flow nor daemon (deps_test.go). The
// service layer (gateway/service) builds an Engine and adapts the tag
// engine to Source.
package alarm
