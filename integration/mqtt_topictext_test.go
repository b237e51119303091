//go:build integration

package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"qubiq.dev/edge/internal/peers"
)

// TestMQTT_ControlCharacterIDDoesNotCostTheLink: a command's id becomes a
// topic level of its reply (reply/<id>, docs/mqtt.md "Signed commands":
// "id is the reply's topic level"). An id holding a control character
// (U+0001, U+007F) or a noncharacter (U+FFFF) is valid JSON and valid
// UTF-8, but a topic MQTT 3.1.1 §1.5.3 says should not hold, and that
// mosquitto refuses by closing the publisher's connection. Anyone who may
// publish on cmd/# (no key needed: an unsigned command is answered
// "unsigned") must not cost the appliance its link: the command is
// refused without a reply on an unpublishable topic, and the next signed
// command is answered.
func TestMQTT_ControlCharacterIDDoesNotCostTheLink(t *testing.T) {
	for _, id := range []string{`a\u0001b`, `a\u007fb`, `a\uffffb`} {
		t.Run(strings.TrimPrefix(id, `a\`), func(t *testing.T) {
			b := peers.StartMosquitto(t)
			k := newSupKey(t, "sup-a")
			d := newDaemon(t, mqttProject)
			d.withMQTT(mqttBlock([]string{b.URL}, k, supGrant, "  stale_after: 5s\n"))
			d.start()
			d.waitConnected(b.URL)
			s := newSupervisor(t, b.URL, "it-sup-hostile-id")
			s.send("cmd/tags/write", []byte(fmt.Sprintf(`{"id":"%s","key_id":"sup-a","ts":"%s","body":{"writes":[]}}`,
				id, time.Now().UTC().Format(time.RFC3339))))
			time.Sleep(time.Second)
			r := s.do(k, "cmd/tags/write", `{"writes":[{"path":"Plant/Op","value":1}]}`)
			if !r.OK {
				t.Errorf("the next signed write: %+v", r.Error)
			}
			if n := strings.Count(d.logs(), "mqtt connection lost"); n > 0 {
				t.Errorf("the link was lost %d times", n)
			}
		})
	}
}

// TestMQTT_ControlCharacterIDReplyNotKeptAcrossRestart: the reply to a
// command whose id holds U+0001 is not left in the outbox, so a restart
// of qubiqd finds its link and answers the next signed command.
func TestMQTT_ControlCharacterIDReplyNotKeptAcrossRestart(t *testing.T) {
	b := peers.StartMosquitto(t)
	k := newSupKey(t, "sup-a")
	d := newDaemon(t, mqttProject)
	d.withMQTT(mqttBlock([]string{b.URL}, k, supGrant, "  stale_after: 5s\n"))
	d.start()
	d.waitConnected(b.URL)
	s := newSupervisor(t, b.URL, "it-sup-hostile-restart")
	s.send("cmd/tags/write", []byte(fmt.Sprintf(`{"id":"a\u0001b","key_id":"sup-a","ts":"%s","body":{"writes":[]}}`,
		time.Now().UTC().Format(time.RFC3339))))
	time.Sleep(2 * time.Second)
	d.stop()
	before := strings.Count(d.logs(), "mqtt connection lost")
	d.start()
	time.Sleep(5 * time.Second)
	if n := strings.Count(d.logs(), "mqtt connection lost") - before; n > 0 {
		t.Errorf("after the restart the link was lost %d times in 5 s", n)
	}
	r := s.do(k, "cmd/tags/write", `{"writes":[{"path":"Plant/Op","value":1}]}`)
	if !r.OK {
		t.Errorf("the next signed write: %+v", r.Error)
	}
}

// TestMQTT_FlowTopicWithATabRefused: a flow's mqtt_publish topic holding
// a control character (a tab typed into a quoted YAML string) is refused
// when the project is checked, naming the topic and the character: MQTT
// 3.1.1 §1.5.3 says topics should not hold U+0001 to U+001F, and
// mosquitto closes the connection of a client that publishes on one (the
// outbox would send it again at every reconnect).
func TestMQTT_FlowTopicWithATabRefused(t *testing.T) {
	b := peers.StartMosquitto(t)
	k := newSupKey(t, "sup-a")
	d := newDaemon(t, mqttProject+`flows:
  - name: to-supervisor
    trigger: {tag: Plant/Op}
    grant: {scopes: [tag:read]}
    nodes:
      - {id: publish, type: mqtt_publish, topic: "out/op\t1", field: value}
`)
	d.withMQTT(mqttBlock([]string{b.URL}, k, supGrant, ""))
	d.spawn()
	d.awaitExit(1)
	if logs := d.logs(); !strings.Contains(logs, `topic "out/op\t1": byte 6: control character U+0009`) {
		t.Errorf("qubiqd's refusal does not name the topic and U+0009:\n%s", logs)
	}
}

// TestMQTT_FlowTriggerFilterWithATabRefused: the same for a flow's mqtt
// trigger filter (mosquitto closes the connection of a client that
// subscribes to one, and the subscription is made again at every
// connect).
func TestMQTT_FlowTriggerFilterWithATabRefused(t *testing.T) {
	b := peers.StartMosquitto(t)
	k := newSupKey(t, "sup-a")
	d := newDaemon(t, mqttProject+`flows:
  - name: to-supervisor
    trigger: {mqtt: "in/set\t1"}
    grant: {scopes: [tag:read, tag:write], write_level: operate}
    nodes:
      - {id: write, type: tag_write, path: Plant/Op}
`)
	d.withMQTT(mqttBlock([]string{b.URL}, k, supGrant, ""))
	d.spawn()
	d.awaitExit(1)
	if logs := d.logs(); !strings.Contains(logs, `topic "in/set\t1": byte 6: control character U+0009`) {
		t.Errorf("qubiqd's refusal does not name the filter and U+0009:\n%s", logs)
	}
}
