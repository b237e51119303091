//go:build integration

package integration

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"qubiq.dev/edge/internal/peers"
)

const supGrant = `{scopes: [tag:read, tag:write, script:execute], write_level: operate, permissions: [designer]}`

const mqttProject = `devices:
  - {name: sim, driver: sim}
tags:
  - {path: Plant/Op, device: sim, address: memory, type: int64}
  - {path: Plant/Sup, device: sim, address: memory, type: int64, write_level: supervise}
`

// scriptVersion is the module's latest version over REST (0: none).
func scriptVersion(d *daemon, module string) int64 {
	d.t.Helper()
	var list []struct {
		Module  string `json:"module"`
		Version int64  `json:"version"`
	}
	d.call("GET", "/api/v1/scripts", d.token, nil, &list)
	for _, s := range list {
		if s.Module == module {
			return s.Version
		}
	}
	return 0
}

func pushBody(module string, version int, code string) string {
	b, _ := json.Marshal(map[string]any{"module": module, "version": version, "code": code})
	return string(b)
}

// TestMQTT_PushRunRollback_RoundTrip: a signed push is linted and stored
// as the version it names (in the history REST sees), the run returns the
// entry's result and logs on reply/<id>, a rollback returns to the
// version before; a push whose code does not compile is refused and
// nothing is stored.
func TestMQTT_PushRunRollback_RoundTrip(t *testing.T) {
	b := peers.StartMosquitto(t)
	k := newSupKey(t, "sup-a")
	d := newDaemon(t, mqttProject)
	d.withMQTT(mqttBlock([]string{b.URL}, k, supGrant, ""))
	d.start()
	d.waitConnected(b.URL)
	// GET /api/v1/mqtt answers the same link state as health's mqtt object,
	// to a key that reads tags.
	var link mqttHealth
	if st, body := d.call("GET", "/api/v1/mqtt", d.apiKey("reader", []string{"tag:read"}, "view"), nil, &link); st != 200 || !link.Connected || link.Broker != b.URL {
		t.Errorf("GET /api/v1/mqtt: %d %s, want connected to %s", st, body, b.URL)
	}
	s := newSupervisor(t, b.URL, "it-sup-roundtrip")

	r := s.do(k, "cmd/scripts/push", pushBody("greet", 5, "import json\n\n@gateway(timeout_ms=5000)\ndef hello(args):\n    return {'hello': args['name']}\n"))
	if !r.OK {
		t.Fatalf("push: %+v %s", r.Error, r.Result)
	}
	var saved struct {
		Version int64 `json:"version"`
		Entries []struct {
			Name string `json:"name"`
		} `json:"entries"`
	}
	json.Unmarshal(r.Result, &saved)
	if saved.Version != 5 || len(saved.Entries) != 1 || saved.Entries[0].Name != "hello" {
		t.Errorf("push result %s", r.Result)
	}
	if v := scriptVersion(d, "greet"); v != 5 {
		t.Errorf("REST sees version %d, want 5 (one history)", v)
	}
	r = s.do(k, "cmd/scripts/run", `{"entry":"greet.hello","args":{"name":"ada"}}`)
	if !r.OK || !strings.Contains(string(r.Result), `"hello":"ada"`) {
		t.Fatalf("run: %+v %s", r.Error, r.Result)
	}
	r = s.do(k, "cmd/scripts/push", pushBody("greet", 6, "def hello(args):\n    return 6\n"))
	if !r.OK {
		t.Fatalf("push 6: %+v", r.Error)
	}
	r = s.do(k, "cmd/scripts/push", pushBody("greet", 7, "def hello(args)\n    return 7\n"))
	if r.OK || r.Error.Kind != "invalid" {
		t.Errorf("a push that does not compile: %+v", r)
	}
	if v := scriptVersion(d, "greet"); v != 6 {
		t.Errorf("after the refused push REST sees version %d, want 6", v)
	}
	r = s.do(k, "cmd/scripts/rollback", `{"module":"greet"}`)
	if !r.OK || !strings.Contains(string(r.Result), `"version":5`) {
		t.Fatalf("rollback: %+v %s", r.Error, r.Result)
	}
	r = s.do(k, "cmd/scripts/run", `{"entry":"greet.hello","args":{"name":"bob"}}`)
	if !r.OK || !strings.Contains(string(r.Result), `"hello":"bob"`) {
		t.Errorf("run after rollback: %+v %s", r.Error, r.Result)
	}
}

// TestMQTT_Refusals_AnsweredAndChangeNothing: every refusal is answered on
// reply/<id> with its kind, audited, and neither the script history nor
// the tags change.
func TestMQTT_Refusals_AnsweredAndChangeNothing(t *testing.T) {
	b := peers.StartMosquitto(t)
	k, stranger := newSupKey(t, "sup-a"), newSupKey(t, "sup-x")
	d := newDaemon(t, mqttProject)
	d.withMQTT(mqttBlock([]string{b.URL}, k, supGrant, "  stale_after: 5s\n"))
	d.start()
	d.waitConnected(b.URL)
	s := newSupervisor(t, b.URL, "it-sup-refusals")
	if r := s.do(k, "cmd/scripts/push", pushBody("m", 3, "def e(a):\n    return 1\n")); !r.OK {
		t.Fatalf("first push: %+v", r.Error)
	}
	now := time.Now()
	replayed := k.signed("cmd/tags/write", "dup-1", now, `{"writes":[{"path":"Plant/Op","value":1}]}`)
	s.send("cmd/tags/write", replayed)
	if r := s.reply("dup-1", 10*time.Second); !r.OK {
		t.Fatalf("first write: %+v", r.Error)
	}
	d.call("POST", "/api/v1/tags/write", d.token, map[string]any{"writes": []map[string]any{{"path": "Plant/Op", "value": 7}}}, nil)
	unsigned := strings.Split(string(k.signed("cmd/tags/write", "r-unsigned", now, `{"writes":[{"path":"Plant/Op","value":2}]}`)), `,"sig":`)[0] + "}"
	badSig := strings.Replace(string(k.signed("cmd/tags/write", "r-badsig", now, `{"writes":[{"path":"Plant/Op","value":2}]}`)), `"value":2`, `"value":3`, 1)
	cases := []struct {
		id, topic, kind string
		payload         []byte
	}{
		{"r-unsigned", "cmd/tags/write", "unsigned", []byte(unsigned)},
		{"r-badsig", "cmd/tags/write", "bad_signature", []byte(badSig)},
		{"r-unknown", "cmd/tags/write", "unknown_key", stranger.signed("cmd/tags/write", "r-unknown", now, `{"writes":[{"path":"Plant/Op","value":2}]}`)},
		{"dup-1", "cmd/tags/write", "replayed", replayed},
		{"r-version", "cmd/scripts/push", "replayed", k.signed("cmd/scripts/push", "r-version", now, pushBody("m", 3, "def e(a):\n    return 2\n"))},
		{"r-stale", "cmd/tags/write", "stale", k.signed("cmd/tags/write", "r-stale", now.Add(-time.Minute), `{"writes":[{"path":"Plant/Op","value":2}]}`)},
		{"r-future", "cmd/tags/write", "stale", k.signed("cmd/tags/write", "r-future", now.Add(time.Minute), `{"writes":[{"path":"Plant/Op","value":2}]}`)},
		{"_errors", "cmd/tags/write", "oversized", []byte(`{"id":"r-big","pad":"` + strings.Repeat("x", 1<<20) + `"}`)},
		{"r-malformed", "cmd/tags/write", "malformed", []byte(`{"id":"r-malformed","key_id":`)},
		{"r-types", "cmd/tags/write", "invalid", k.signed("cmd/tags/write", "r-types", now, `{"writes":[{"path":"Plant/Op","value":{"x":1}}]}`)},
		{"r-cmd", "cmd/system/reboot", "unknown_command", k.signed("cmd/system/reboot", "r-cmd", now, `{}`)},
	}
	for _, c := range cases {
		s.forget(c.id)
		s.send(c.topic, c.payload)
		r := s.reply(c.id, 15*time.Second)
		if r.OK || r.Error == nil || r.Error.Kind != c.kind {
			t.Errorf("%s: reply %+v; want kind %s", c.id, r, c.kind)
		}
	}
	if v := d.read(d.token, "Plant/Op")["Plant/Op"]; fmt.Sprint(v.Value) != "7" {
		t.Errorf("Plant/Op = %v after the refusals, want 7 (unchanged)", v.Value)
	}
	if v := scriptVersion(d, "m"); v != 3 {
		t.Errorf("module m at version %d, want 3", v)
	}
	var recs []struct {
		Action string `json:"action"`
		Result string `json:"result"`
	}
	waitFor(t, 10*time.Second, "one audit record per command", func() (bool, string) {
		recs = recs[:0]
		d.call("GET", "/api/v1/audit?limit=1000", d.token, nil, &recs)
		n := 0
		for _, r := range recs {
			if r.Action == "mqtt.command" {
				n++
			}
		}
		return n == len(cases)+2, fmt.Sprintf("%d mqtt.command records for %d commands: %+v", n, len(cases)+2, recs)
	})
}

// TestMQTT_TagsWrite_OperateGrant: a key granted write level operate
// writes an operate tag and is refused on a supervise tag (the same level
// check as every caller), nothing written there.
func TestMQTT_TagsWrite_OperateGrant(t *testing.T) {
	b := peers.StartMosquitto(t)
	k := newSupKey(t, "sup-a")
	d := newDaemon(t, mqttProject)
	d.withMQTT(mqttBlock([]string{b.URL}, k, supGrant, ""))
	d.start()
	d.waitConnected(b.URL)
	s := newSupervisor(t, b.URL, "it-sup-write")
	r := s.do(k, "cmd/tags/write", `{"writes":[{"path":"Plant/Op","value":42},{"path":"Plant/Sup","value":43}]}`)
	if !r.OK {
		t.Fatalf("write: %+v", r.Error)
	}
	var res []struct{ Path, Status string }
	json.Unmarshal(r.Result, &res)
	if len(res) != 2 || res[0].Status != "Good" || res[1].Status != "Bad_UserAccessDenied" {
		t.Errorf("statuses %s; want Good, Bad_UserAccessDenied", r.Result)
	}
	vals := d.read(d.token, "Plant/Op", "Plant/Sup")
	if fmt.Sprint(vals["Plant/Op"].Value) != "42" || fmt.Sprint(vals["Plant/Sup"].Value) != "0" {
		t.Errorf("values %+v; want Plant/Op 42 and Plant/Sup still its initial 0", vals)
	}
}

// TestMQTT_FailoverToSecondBroker: with the first broker of the list
// stopped, the link moves to the second and commands run through it.
func TestMQTT_FailoverToSecondBroker(t *testing.T) {
	b1, b2 := peers.StartMosquitto(t), peers.StartMosquitto(t)
	k := newSupKey(t, "sup-a")
	d := newDaemon(t, mqttProject)
	d.withMQTT(mqttBlock([]string{b1.URL, b2.URL}, k, supGrant, ""))
	d.start()
	d.waitConnected(b1.URL)
	b1.Stop()
	d.waitConnected(b2.URL)
	s := newSupervisor(t, b2.URL, "it-sup-failover")
	if r := s.do(k, "cmd/tags/write", `{"writes":[{"path":"Plant/Op","value":5}]}`); !r.OK {
		t.Fatalf("write through the second broker: %+v", r.Error)
	}
	if h := d.mqttHealth(); !strings.Contains(h.LastError, b1.URL) {
		t.Errorf("health's last error %q does not name the first broker", h.LastError)
	}
}

// TestMQTT_BrokerRestart_SubscriptionBack: paho does not resubscribe
// (https://github.com/eclipse-paho/paho.mqtt.golang/issues/238), scaled: a
// broker without persistence restarts (down 2 s); after the link is back
// the next signed cmd/tags/write reaches the device (the subscription was
// made again on connect).
func TestMQTT_BrokerRestart_SubscriptionBack(t *testing.T) {
	b := peers.StartMosquittoEphemeral(t)
	m := peers.StartModbus(t, map[int]peers.ModbusUnit{1: {HR: map[int]uint16{10: 0}}})
	k := newSupKey(t, "sup-a")
	d := newDaemon(t, fmt.Sprintf(`devices:
  - {name: plc1, driver: modbus, url: "tcp://127.0.0.1:%d", unit_id: 1, timeout: 500ms}
tags:
  - {path: Plant/HR10, device: plc1, address: HR10, type: int16, scan: 200ms}
`, m.Port))
	d.withMQTT(mqttBlock([]string{b.URL}, k, supGrant, ""))
	d.start()
	d.waitConnected(b.URL)
	b.Stop()
	waitFor(t, 10*time.Second, "the link down", func() (bool, string) { h := d.mqttHealth(); return !h.Connected, fmt.Sprintf("%+v", h) })
	time.Sleep(2 * time.Second)
	b.Start()
	d.waitConnected(b.URL)
	s := newSupervisor(t, b.URL, "it-sup-restart")
	if r := s.do(k, "cmd/tags/write", `{"writes":[{"path":"Plant/HR10","value":123}]}`); !r.OK {
		t.Fatalf("write after the restart: %+v", r.Error)
	}
	if got := m.ReadHR(1, 10, 1); got[0] != 123 {
		t.Errorf("HR10 = %d on the device, want 123", got[0])
	}
}

// TestMQTT_BurstWhileEntryBusyWaits: a slow command handler must
// not block the client's keep-alive, scaled: a pushed
// entry busy-waits 5 s (past the 2 s keep-alive) while 200 commands
// arrive: the link stays up (no connection lost) and every command is
// answered, run or busy.
func TestMQTT_BurstWhileEntryBusyWaits(t *testing.T) {
	b := peers.StartMosquitto(t)
	k := newSupKey(t, "sup-a")
	d := newDaemon(t, mqttProject)
	d.withMQTT(mqttBlock([]string{b.URL}, k, supGrant, ""))
	d.start()
	d.waitConnected(b.URL)
	s := newSupervisor(t, b.URL, "it-sup-burst")
	code := "import datetime\n\n@gateway(timeout_ms=20000)\ndef spin(args):\n    end = datetime.datetime.now() + datetime.timedelta(seconds=5)\n    while datetime.datetime.now() < end:\n        pass\n    return 'spun'\n\ndef quick(args):\n    return args\n"
	if r := s.do(k, "cmd/scripts/push", pushBody("busy", 1, code)); !r.OK {
		t.Fatalf("push: %+v", r.Error)
	}
	now := time.Now()
	s.send("cmd/scripts/run", k.signed("cmd/scripts/run", "spin", now, `{"entry":"busy.spin"}`))
	for i := range 200 {
		id := fmt.Sprintf("q-%d", i)
		s.send("cmd/scripts/run", k.signed("cmd/scripts/run", id, now, fmt.Sprintf(`{"entry":"busy.quick","args":%d}`, i)))
	}
	kinds := map[string]int{}
	for i := range 200 {
		r := s.reply(fmt.Sprintf("q-%d", i), 60*time.Second)
		if r.OK {
			kinds["ok"]++
		} else {
			kinds[r.Error.Kind]++
		}
	}
	if r := s.reply("spin", 60*time.Second); !r.OK || !strings.Contains(string(r.Result), "spun") {
		t.Errorf("spin: %+v %s", r.Error, r.Result)
	}
	if kinds["ok"]+kinds["busy"] != 200 {
		t.Errorf("answers %v; want each ok or busy", kinds)
	}
	if strings.Contains(d.logs(), "mqtt connection lost") {
		t.Errorf("the link dropped during the burst:\n%s", d.logs())
	}
	if h := d.mqttHealth(); !h.Connected {
		t.Errorf("health after the burst: %+v", h)
	}
}

// TestMQTT_FlowsAndAlarmsThroughTheLink: an mqtt trigger takes a message
// the supervisor publishes and writes it to a tag; a tag-triggered flow's
// mqtt_publish node and the alarm the value raises go out on the link.
func TestMQTT_FlowsAndAlarmsThroughTheLink(t *testing.T) {
	b := peers.StartMosquitto(t)
	k := newSupKey(t, "sup-a")
	d := newDaemon(t, mqttProject+`alarms:
  - {name: High, tag: Plant/Op, mode: above, setpoint: 3, priority: high}
flows:
  - name: from-supervisor
    trigger: {mqtt: in/setpoint}
    grant: {scopes: [tag:read, tag:write], write_level: operate}
    nodes:
      - {id: write, type: tag_write, path: Plant/Op}
  - name: to-supervisor
    trigger: {tag: Plant/Op}
    grant: {scopes: [tag:read]}
    nodes:
      - {id: publish, type: mqtt_publish, topic: out/op, field: value}
`)
	d.withMQTT(mqttBlock([]string{b.URL}, k, supGrant, ""))
	d.start()
	d.waitConnected(b.URL)
	s := newSupervisor(t, b.URL, "it-sup-flows", "out/#", "alarms/#")
	time.Sleep(500 * time.Millisecond) // the flow's subscription, made when its link was up
	if tok := s.c.Publish(mqttBase+"in/setpoint", 1, false, []byte("5")); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatal(tok.Error())
	}
	waitFor(t, 20*time.Second, "Plant/Op written by the mqtt trigger, published by mqtt_publish, its alarm on alarms/", func() (bool, string) {
		v := d.read(d.token, "Plant/Op")["Plant/Op"]
		var out, alarm bool
		for _, m := range s.messages() {
			switch {
			case m.Topic() == mqttBase+"out/op" && string(m.Payload()) == "5":
				out = true
			case m.Topic() == mqttBase+"alarms/Plant/Op" && strings.Contains(string(m.Payload()), `"to":"active_unacked"`):
				alarm = true
			}
		}
		var topics []string
		for _, m := range s.messages() {
			topics = append(topics, m.Topic()+" "+string(m.Payload()))
		}
		return fmt.Sprint(v.Value) == "5" && out && alarm, fmt.Sprintf("Plant/Op %v, messages %v", v.Value, topics)
	})
}

// TestMQTT_RequireSignedOff_WarnedAndAudited: with require_signed false an
// unsigned command runs, health carries the warning and require_signed
// false, and the command's audit record says it was not verified.
func TestMQTT_RequireSignedOff_WarnedAndAudited(t *testing.T) {
	b := peers.StartMosquitto(t)
	k := newSupKey(t, "sup-a")
	d := newDaemon(t, mqttProject)
	d.withMQTT(mqttBlock([]string{b.URL}, k, supGrant, "  require_signed: false\n"))
	d.start()
	d.waitConnected(b.URL)
	var h struct {
		Warnings []string `json:"warnings"`
	}
	d.call("GET", "/api/v1/health", "", nil, &h)
	if !strings.Contains(strings.Join(h.Warnings, "\n"), "require_signed is false") || d.mqttHealth().RequireSigned {
		t.Errorf("health warnings %v, mqtt %+v", h.Warnings, d.mqttHealth())
	}
	s := newSupervisor(t, b.URL, "it-sup-unsigned")
	unsigned := strings.Split(string(k.signed("cmd/tags/write", "u-1", time.Now(), `{"writes":[{"path":"Plant/Op","value":9}]}`)), `,"sig":`)[0] + "}"
	s.send("cmd/tags/write", []byte(unsigned))
	if r := s.reply("u-1", 15*time.Second); !r.OK {
		t.Fatalf("unsigned command: %+v", r.Error)
	}
	var recs []struct {
		Action string          `json:"action"`
		Detail string          `json:"detail"`
		After  json.RawMessage `json:"after"`
	}
	waitFor(t, 10*time.Second, "the command's audit record", func() (bool, string) {
		recs = recs[:0]
		d.call("GET", "/api/v1/audit?limit=1000", d.token, nil, &recs)
		for _, r := range recs {
			if r.Action == "mqtt.command" {
				return strings.Contains(r.Detail, "not verified") && strings.Contains(string(r.After), `"require_signed":false`), fmt.Sprintf("%+v", r)
			}
		}
		return false, fmt.Sprintf("%+v", recs)
	})
}

// TestMQTT_StaleCommandQueuedDuringOutage_Refused: a stale command after a long
// outage (https://github.com/eclipse-paho/paho.mqtt.golang/issues/173),
// scaled (stale_after 3 s, offline 5 s): the persistent session keeps the
// subscription while qubiqd is down, the broker queues a signed write made
// then, and when qubiqd is back the command arrives and is refused as
// stale, answered on reply/<id>; the device is not written.
func TestMQTT_StaleCommandQueuedDuringOutage_Refused(t *testing.T) {
	b := peers.StartMosquitto(t)
	m := peers.StartModbus(t, map[int]peers.ModbusUnit{1: {HR: map[int]uint16{10: 7}}})
	k := newSupKey(t, "sup-a")
	d := newDaemon(t, fmt.Sprintf(`devices:
  - {name: plc1, driver: modbus, url: "tcp://127.0.0.1:%d", unit_id: 1, timeout: 500ms}
tags:
  - {path: Plant/HR10, device: plc1, address: HR10, type: int16, scan: 200ms}
`, m.Port))
	d.withMQTT(mqttBlock([]string{b.URL}, k, supGrant, "  stale_after: 3s\n"))
	d.start()
	d.waitConnected(b.URL)
	s := newSupervisor(t, b.URL, "it-sup-stale")
	d.stop()
	s.send("cmd/tags/write", k.signed("cmd/tags/write", "late-1", time.Now(), `{"writes":[{"path":"Plant/HR10","value":123}]}`))
	time.Sleep(5 * time.Second)
	d.start()
	r := s.reply("late-1", 30*time.Second)
	if r.OK || r.Error == nil || r.Error.Kind != "stale" {
		t.Errorf("reply %+v; want stale", r)
	}
	if got := m.ReadHR(1, 10, 1); got[0] != 7 {
		t.Errorf("HR10 = %d on the device, want 7 (not written)", got[0])
	}
}
