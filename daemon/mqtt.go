package daemon

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"qubiq.dev/edge/config"
	"qubiq.dev/edge/internal/yamlnode"
	"qubiq.dev/edge/mqtt"
	"qubiq.dev/edge/mqttstore"
	"qubiq.dev/edge/store"
)

// The mqtt part: the supervisor link (package mqtt, docs/mqtt.md) over the
// service layer, with the bbolt outbox and command-id memory of the store.
// Built before the flows (which take its topics and publisher), started
// after the tag engine and the sandbox, stopped before them.

// Outbox defaults (docs/mqtt.md, the mqtt: block).
const (
	defaultOutboxMaxBytes = 256 << 20
	defaultOutboxMaxAge   = 7 * 24 * time.Hour
)

// mqttOutbox is the outbox: block of mqtt:.
type mqttOutbox struct {
	MaxBytes    config.Size     `yaml:"max_bytes"`
	MaxAge      config.Duration `yaml:"max_age"`
	LiveLatency config.Duration `yaml:"live_latency"`
}

// mqttConfig converts the mqtt: block (relative files against the config
// file) into the link's config and the outbox bounds.
func mqttConfig(c *config.Daemon) (mqtt.Config, store.OutboxOptions, error) {
	m := c.MQTT
	rel := func(p string) string {
		if p == "" || filepath.IsAbs(p) || c.File == "" {
			return p
		}
		return filepath.Join(filepath.Dir(c.File), p)
	}
	out := mqtt.Config{Brokers: m.Brokers, Username: m.Username, PasswordFile: rel(m.PasswordFile),
		TrustedKeys: m.TrustedKeys, Grants: map[string]mqtt.GrantConfig{}, RequireSigned: m.RequireSigned == nil || *m.RequireSigned,
		StaleAfter: m.StaleAfter.D(), Keepalive: m.Keepalive.D()}
	for k, v := range m.TLS {
		switch k {
		case "ca":
			out.CA = rel(v)
		case "cert":
			out.Cert = rel(v)
		case "key":
			out.Key = rel(v)
		default:
			return out, store.OutboxOptions{}, fmt.Errorf("mqtt.tls: unknown key %q (ca, cert, key)", k)
		}
	}
	for id, g := range m.Grants {
		out.Grants[id] = mqtt.GrantConfig{Scopes: g.Scopes, WriteLevel: g.WriteLevel, Permissions: g.Permissions}
	}
	ob := mqttOutbox{MaxBytes: defaultOutboxMaxBytes, MaxAge: config.Duration(defaultOutboxMaxAge)}
	if m.Outbox.Kind != 0 {
		if err := yamlnode.DecodeStrict(&m.Outbox, &ob); err != nil {
			return out, store.OutboxOptions{}, fmt.Errorf("mqtt.outbox: %w", err)
		}
	}
	out.LiveLatency = ob.LiveLatency.D()
	out.OutboxMaxAge = ob.MaxAge.D()
	return out, store.OutboxOptions{MaxBytes: int64(ob.MaxBytes), MaxAge: ob.MaxAge.D()}, nil
}

// mqttProject is the project's mqtt_publish: section.
type mqttProject struct {
	Batched bool `yaml:"batched"`
	Rules   []struct {
		Path     string          `yaml:"path"`
		Prefix   string          `yaml:"prefix"`
		Mode     string          `yaml:"mode"`
		Deadband float64         `yaml:"deadband"`
		Interval config.Duration `yaml:"interval"`
		Retain   bool            `yaml:"retain"`
		QoS      *int            `yaml:"qos"`
	} `yaml:"rules"`
}

// parsePublish reads the project's mqtt_publish: section; nil when absent.
func parsePublish(p *config.Project) (*mqtt.PublishPolicy, error) {
	if p.MQTTPublish.Kind == 0 {
		return nil, nil
	}
	var sec mqttProject
	if err := yamlnode.DecodeStrict(&p.MQTTPublish, &sec); err != nil {
		return nil, fmt.Errorf("%s: mqtt_publish: %w", p.File, err)
	}
	pol := &mqtt.PublishPolicy{Batched: sec.Batched}
	for i, r := range sec.Rules {
		rule := mqtt.PublishRule{Path: r.Path, Prefix: r.Prefix, Mode: r.Mode, Deadband: r.Deadband,
			Interval: r.Interval.D(), Retain: r.Retain, QoS: 1}
		if r.QoS != nil {
			rule.QoS = *r.QoS
		}
		if rule.Mode == "" {
			rule.Mode = mqtt.ModeChange
		}
		where := fmt.Sprintf("%s: mqtt_publish.rules[%d]", p.File, i)
		switch {
		case r.Path != "" && r.Prefix != "":
			return nil, fmt.Errorf("%s: path or prefix, not both", where)
		case rule.Mode != mqtt.ModeChange && rule.Mode != mqtt.ModeInterval && rule.Mode != mqtt.ModeOff:
			return nil, fmt.Errorf("%s: mode %q (change, interval, off)", where, rule.Mode)
		case rule.Mode == mqtt.ModeInterval && rule.Interval <= 0:
			return nil, fmt.Errorf("%s: mode interval needs an interval", where)
		case rule.QoS != 0 && rule.QoS != 1:
			return nil, fmt.Errorf("%s: qos %d (0 or 1)", where, rule.QoS)
		case rule.Deadband < 0:
			return nil, fmt.Errorf("%s: deadband below 0", where)
		}
		pol.Rules = append(pol.Rules, rule)
	}
	return pol, nil
}

// checkMQTT checks the mqtt: block and the project's section
// (--check-config).
func checkMQTT(c *config.Daemon) func(p *config.Project) error {
	return func(p *config.Project) error {
		if _, err := parsePublish(p); err != nil {
			return err
		}
		if c == nil || len(c.MQTT.Brokers) == 0 {
			return nil
		}
		if err := mqtt.CheckApplianceID(c.ApplianceID); err != nil { // mqtt.New refuses it: the client id and the topic root
			return fmt.Errorf("%s: %w", c.File, err)
		}
		mc, _, err := mqttConfig(c)
		if err != nil {
			return fmt.Errorf("%s: %w", c.File, err)
		}
		if err := mc.Check(); err != nil {
			return fmt.Errorf("%s: %w", c.File, err)
		}
		return nil
	}
}

// buildMQTT makes the link when mqtt.brokers is set: its outbox in the
// store, the grants checked against nothing wider than the config itself
// holds (a grant is exactly what mqtt.grants writes).
func (s *System) buildMQTT(context.Context) error {
	if len(s.cfg.MQTT.Brokers) == 0 {
		return nil
	}
	mc, obOpts, err := mqttConfig(s.cfg)
	if err != nil {
		return fmt.Errorf("%s: %w", s.cfg.File, err)
	}
	pol, err := parsePublish(s.svc.Project())
	if err != nil {
		return err
	}
	ob, err := store.NewOutbox(s.db, obOpts)
	if err != nil {
		return err
	}
	s.outbox = ob
	link, err := mqtt.New(mqtt.Options{ApplianceID: s.cfg.ApplianceID, Version: Version, Config: mc,
		Gateway: s.svc, Outbox: mqttstore.Outbox{O: ob}, Seen: s.db.CommandIDs(), Log: s.log.With("subsystem", "mqtt"),
		Publish: pol, Alarms: s.svc,
		BackoffMin: s.cfg.MQTT.Reconnect.Min.D(), BackoffMax: s.cfg.MQTT.Reconnect.Max.D()})
	if err != nil {
		ob.Close()
		return fmt.Errorf("%s: %w", s.cfg.File, err)
	}
	s.mqtt = link
	s.svc.SetMQTTHealth(link)
	if !mc.RequireSigned {
		s.svc.Warn(mqtt.RequireSignedWarning)
	}
	return nil
}

// mqttParts are the link's run-time parts (none when it is off).
func (s *System) mqttParts() []part {
	if s.mqtt == nil {
		return nil
	}
	return []part{{name: "mqtt", start: s.mqtt.Start, stop: func(ctx context.Context) error {
		err := s.mqtt.Stop(ctx)
		s.outbox.Close()
		return err
	}}}
}
