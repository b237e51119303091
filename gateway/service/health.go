package service

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"qubiq.dev/edge/gateway"
)

// Health reports the appliance's health (gateway.Health): degraded when a
// device is not connected, the Python runtime is missing, the audit log
// cannot commit, history lost samples or failed its retention, or the
// alarm journal cannot commit or the alarm feed overflowed.
func (s *Service) Health(context.Context) gateway.HealthReport {
	out := gateway.HealthReport{Status: gateway.HealthOK, Reasons: []string{}, Version: s.opts.Version,
		Uptime: time.Since(s.started), Devices: map[string]gateway.DeviceHealth{}, Warnings: s.Warnings()}
	degrade := func(reason string) {
		out.Status = gateway.HealthDegraded
		out.Reasons = append(out.Reasons, reason)
	}
	for name, st := range s.Engine().DeviceStates() {
		out.Devices[name] = gateway.DeviceHealth{State: st[0], Reason: st[1]}
		if st[0] != "connected" {
			degrade(fmt.Sprintf("device %q %s: %s", name, st[0], st[1]))
		}
	}
	if s.pool != nil {
		h := s.pool.Health()
		out.Sandbox = gateway.SandboxHealth{Mode: h.Mode, Linter: h.Linter,
			Python: gateway.PythonHealth{Status: h.Python.Status, Version: h.Python.Version, Path: h.Python.Path}}
		if b, err := json.Marshal(h.Limits); err == nil {
			out.Sandbox.Limits = b
		}
		if b, err := json.Marshal(h.Hardening); err == nil {
			out.Sandbox.Hardening = b
		}
		// A runtime still starting degrades nothing: runs wait for it
		// (each at most its timeout), and it ends ok or in a reason.
		if h.Python.Status != "ok" && h.Python.Status != "starting" {
			degrade(fmt.Sprintf("python runtime %s: %s", h.Python.Status, h.Python.Reason))
		}
	}
	if s.audit != nil {
		if st := s.audit.Stats(); st.LastError != nil && st.Enqueued > st.Committed {
			degrade("audit log cannot commit: " + st.LastError.Error())
		}
	}
	if s.data != nil {
		for _, a := range s.data.alarms() { // history retention, commits, overflow
			degrade(a)
		}
	}
	s.flowsHealth(&out, degrade)
	if src := s.mqttHealth(); src != nil {
		h := src.MQTTHealth()
		out.MQTT = &h
		if !h.Connected {
			why := h.LastError
			if why == "" {
				why = "connecting"
			}
			degrade("mqtt link down: " + why)
		}
	}
	if s.alarms != nil {
		for _, r := range s.alarms.Health() { // the alarm journal, the alarm feed
			degrade(r)
		}
	}
	return out
}

// SetMQTTHealth hands the service the supervisor link's health (the
// daemon, when mqtt.brokers is set).
func (s *Service) SetMQTTHealth(src gateway.MQTTHealthSource) {
	s.mqttMu.Lock()
	s.mqttSrc = src
	s.mqttMu.Unlock()
}

func (s *Service) mqttHealth() gateway.MQTTHealthSource {
	s.mqttMu.Lock()
	defer s.mqttMu.Unlock()
	return s.mqttSrc
}
