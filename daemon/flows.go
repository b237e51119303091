package daemon

import (
	"context"
	"os"
	"path/filepath"
	"regexp"

	"gopkg.in/yaml.v3"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/config"
	"qubiq.dev/edge/flow"
	"qubiq.dev/edge/mqttstore"
)

// The flow part: the flow engine over the service layer (package flow,
// docs/flows.md).
//
// Alarm transitions reach alarm triggers through the service layer
// (flow.AlarmsFrom). The supervisor link (the mqtt part, mqtt.go) gives the
// flows their mqtt triggers (Topics) and mqtt_publish nodes (Publisher)
// when mqtt.brokers is set; without it both are refused by --check-config
// and by pushes, saying why (linkWhy).

// linkWhy says why flows cannot use the supervisor link ("": it is on).
func linkWhy(c *config.Daemon) (mqtt string) {
	if c == nil || len(c.MQTT.Brokers) == 0 {
		return "is off (mqtt.brokers is empty)"
	}
	return ""
}

// buildFlows makes the flow engine over the service layer, and hands it to
// the service for message triggers and health.
func (s *System) buildFlows(context.Context) error {
	p := s.svc.Project()
	opts := flow.Options{
		Gateway:      s.svc,
		Store:        s.db,
		MQTTWhy:      linkWhy(s.cfg),
		Alarms:       flow.AlarmsFrom(s.svc),
		ProjectFile:  p.File,
		ProjectDir:   filepath.Dir(p.File),
		ProjectFlows: p.Flows,
		Handlers:     handlerNames(p),
		Log:          s.log.With("subsystem", "flows"),
	}
	if s.mqtt != nil {
		opts.Topics, opts.Publisher = mqttstore.Topics{L: s.mqtt}, s.mqtt
	}
	e, err := flow.New(opts)
	if err != nil {
		return err
	}
	s.flows = e
	s.svc.RouteMessages(e)
	s.svc.SetFlowHealth(e)
	return nil
}

// handlerNames are the names of the project's message handlers.
func handlerNames(p *config.Project) []string {
	var out []string
	for _, n := range p.MessageHandlers {
		if n.Kind != yaml.MappingNode {
			continue
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == "name" {
				out = append(out, n.Content[i+1].Value)
			}
		}
	}
	return out
}

var topDefRe = regexp.MustCompile(`(?m)^def\s+([A-Za-z][A-Za-z0-9_]*)\s*\(`)

// flowEnv is what the project's flows are checked against without a
// running daemon: its tags (write levels resolved against baseline), its
// script files' top-level functions, its message handlers, the links.
func flowEnv(p *config.Project, baseline auth.Level, c *config.Daemon) flow.Env {
	env := flow.Env{Dir: filepath.Dir(p.File), Tags: map[string]flow.TagFacts{}, Scripts: map[string][]string{},
		Handlers: handlerNames(p), MQTT: linkWhy(c) == "", MQTTWhy: linkWhy(c), Alarms: true}
	for _, t := range p.Tags {
		lvl := baseline
		if t.WriteLevel != "" {
			if l, err := auth.ParseLevel(t.WriteLevel); err == nil {
				lvl = l
			}
		}
		env.Tags[t.Path] = flow.TagFacts{ReadOnly: t.ReadOnly, WriteLevel: lvl}
	}
	for _, sc := range p.Scripts {
		code, err := os.ReadFile(p.ScriptFile(sc))
		if err != nil {
			continue // reported by the service's check
		}
		for _, m := range topDefRe.FindAllStringSubmatch(string(code), -1) {
			env.Scripts[sc.Module] = append(env.Scripts[sc.Module], m[1])
		}
	}
	return env
}

// checkFlows checks the project's flows as the flow engine parses them.
func checkFlows(c *config.Daemon) func(p *config.Project) error {
	return func(p *config.Project) error {
		baseline := auth.LevelOperate
		if c != nil {
			if l, err := auth.ParseLevel(c.Security.BaselineWriteLevel); err == nil {
				baseline = l
			}
		}
		_, err := flow.ParseSection(p.File, p.Flows, flowEnv(p, baseline, c))
		return err
	}
}

// coverFlows refuses a project import whose flows grant more than the
// importer holds (auth.Grant.Covers: a flow is never wider than its
// designer).
func coverFlows(g auth.Grant, p *config.Project) error {
	return flow.CoverSection(g, p.Flows)
}
