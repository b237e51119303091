package daemon

import (
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"qubiq.dev/edge/config"
	"qubiq.dev/edge/mqtt"
)

func TestMQTTConfig_DefaultsAndRelativeFiles(t *testing.T) {
	c := &config.Daemon{File: "/etc/qubiq/qubiq.yaml"}
	c.MQTT.Brokers = []string{"tcp://b:1883"}
	c.MQTT.TLS = map[string]string{"ca": "pki/ca.pem"}
	c.MQTT.PasswordFile = "/abs/pw"
	mc, ob, err := mqttConfig(c)
	if err != nil {
		t.Fatal(err)
	}
	if !mc.RequireSigned || mc.CA != "/etc/qubiq/pki/ca.pem" || mc.PasswordFile != "/abs/pw" {
		t.Errorf("config %+v", mc)
	}
	if ob.MaxBytes != 256<<20 || ob.MaxAge != 7*24*time.Hour {
		t.Errorf("outbox bounds %+v; want 256MiB and 7d", ob)
	}
	c.MQTT.TLS = map[string]string{"cafile": "x"}
	if _, _, err := mqttConfig(c); err == nil || !strings.Contains(err.Error(), `"cafile"`) {
		t.Errorf("unknown tls key: %v", err)
	}
	c.MQTT.TLS = nil
	if err := yaml.Unmarshal([]byte("{max_bytes: 1MiB, live_latency: 500ms, size: 3}"), &c.MQTT.Outbox); err != nil {
		t.Fatal(err)
	}
	c.MQTT.Outbox = *c.MQTT.Outbox.Content[0]
	if _, _, err := mqttConfig(c); err == nil || !strings.Contains(err.Error(), "size") {
		t.Errorf("unknown outbox key: %v", err)
	}
}

func TestParsePublish_RulesAndTheirErrors(t *testing.T) {
	parse := func(s string) (*mqtt.PublishPolicy, error) {
		p := &config.Project{File: "project.yaml"}
		var n yaml.Node
		if err := yaml.Unmarshal([]byte(s), &n); err != nil {
			t.Fatal(err)
		}
		p.MQTTPublish = *n.Content[0]
		return parsePublish(p)
	}
	pol, err := parse("{batched: true, rules: [{prefix: Line1, deadband: 0.5}, {path: Line1/X, mode: interval, interval: 10s, retain: true, qos: 0}]}")
	if err != nil {
		t.Fatal(err)
	}
	if !pol.Batched || len(pol.Rules) != 2 || pol.Rules[0].Mode != mqtt.ModeChange || pol.Rules[0].QoS != 1 ||
		pol.Rules[1].Interval != 10*time.Second || pol.Rules[1].QoS != 0 || !pol.Rules[1].Retain {
		t.Errorf("policy %+v", pol)
	}
	for _, bad := range []string{
		"{rules: [{path: A, prefix: B}]}",
		"{rules: [{prefix: A, mode: sometimes}]}",
		"{rules: [{prefix: A, mode: interval}]}",
		"{rules: [{prefix: A, qos: 2}]}",
		"{rules: [{prefix: A, deadband: -1}]}",
		"{rules: [{prefix: A, every: 1s}]}",
	} {
		if _, err := parse(bad); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}
